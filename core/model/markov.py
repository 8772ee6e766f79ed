"""The Markov-chain task (in-context learning of Markov chains, Edelman et al. 2024, "The evolution of
statistical induction heads"): each sequence comes from its own Markov chain, drawn afresh.

A sequence of `seq_len` tokens over `n_states` states. With `order` n (n = 2: a bigram chain), the
next token depends on the previous n - 1 tokens through a transition table with one row per context of
n - 1 states; every row is drawn independently from a symmetric Dirichlet(`concentration`) prior, once
per sequence. The first n - 1 tokens are uniform and independent of the table (the paper draws the
first token from the chain's stationary distribution; a uniform start makes the count predictors
below exactly Bayes-optimal).

Two other priors test whether the unigram solution delays the bigram one (Edelman et al. 2024 train on
them for that), order 2 only: `prior="doubly_stochastic"` makes every table's columns sum to 1 as well as its
rows (each Dirichlet draw Sinkhorn-balanced: rows and columns normalised in turn until both sum to 1 within
1e-9; not the uniform distribution over doubly stochastic matrices the authors draw from), so the chain's
stationary distribution is uniform and in-context counts of single tokens predict no better than uniform;
`unigram_share` s makes round(s x batch) sequences of every batch (the last ones) unigram-optimal: their table
is one Dirichlet row repeated, the next token independent of the current one. The strategies below stay the
Dirichlet prior's, Bayes-optimal only under it (a run trained on another prior is evaluated on the Dirichlet
prior's batch: core.training.trainer.eval_batch).

Strategies: next-token predictors that read only the context. For a target at position t + 1 (the
model's logits at position t), with alpha the concentration and k = n_states:
- uniform: 1 / k.
- unigram: (N_t(j) + alpha) / (t + 1 + k alpha), N_t(j) the count of j among tokens 0..t: the posterior
  mean of a single distribution under the same Dirichlet prior, i.e. the Bayes-optimal guess if the tokens were
  drawn independently from one such distribution. On these chains the counts of single tokens carry more than
  that (how often a token is followed by itself, say), so it is not the best guess from them.
- bigram: (N_t(x_t -> j) + alpha) / (N_t(x_t ->) + k alpha), N_t(a -> j) the count of i < t with
  x_i = a, x_{i+1} = j: the posterior mean of the current token's transition row, the Bayes-optimal
  prediction of a bigram chain (the statistical induction head's job).
- for order n > 2 also the n-gram of that order (context = the last n - 1 tokens); "trigram" for
  order 3, "4-gram" for order 4. Its predictor is the chain's Bayes-optimal one; the predictor of a
  context not yet complete (the first n - 2 targets, which are uniform) is uniform.

The KL of a model to a strategy at a target is KL(strategy || model) = sum_j p_s(j) log(p_s(j) / p_m(j)),
the model's cross-entropy against the strategy's distribution minus the strategy's entropy (the paper
compares the model to each strategy by that cross-entropy). `strategy_kl` gives it per position
(averaged over sequences) and as one number per strategy (averaged over positions too).

Torch is imported by the functions that use it (core/model/lazy.py).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from core.model.tasks import Task

if TYPE_CHECKING:
    import torch

KIND = "markov"  # the checkpoint task entry's "kind" for this task (the repeat task's entry has none)
MAX_STATES = 64  # the lab's model vocabulary: a state is a token
MAX_ORDER = 4
MAX_CONTEXTS = 4096  # rows of one sequence's transition table (n_states ** (order - 1))
MAX_SEQ_LEN = 2048  # as core.model.task: attention patterns are [T, T]
PRIORS = ("dirichlet", "doubly_stochastic")
SINKHORN_TOL = 1e-9  # a doubly stochastic table's rows and columns sum to 1 within this
SINKHORN_MAX_ITER = 10_000
ORDER_NAMES = {1: "unigram", 2: "bigram", 3: "trigram", 4: "4-gram"}


NOT_A_REPEAT = "which Markov-chain sequences do not have."


@dataclass
class MarkovTask(Task):
    name: ClassVar[str] = KIND
    title: ClassVar[str] = "the Markov-chain task"
    corruptions: ClassVar[tuple[str, ...]] = ("another-chain",)  # core.causal.corruptions.another_chain
    not_offered: ClassVar[dict[str, str]] = {
        "circuits": "Its QK and OV circuits are read here against a copied pattern's period and its ablations "
                    f"measure second-copy accuracy, {NOT_A_REPEAT}",
        "depth": f"This page's path sums are scored on the repeat task's second copy, {NOT_A_REPEAT}",
        "icl": "This page's in-context curves measure how a copied pattern is picked up after a restart, "
               f"{NOT_A_REPEAT}",
        "head archetypes": "Its heads are matched here against archetypes scored on a repeated pattern, "
                           f"{NOT_A_REPEAT}",
        "overview": "this overview measures copying a repeated pattern, which its sequences do not have; the "
                    "Attention and Causal pages read it",
    }
    read_instead: ClassVar[str] = ("The **Attention** page shows its patterns and which heads count transitions; "
                                   "the **Causal** page patches it with another chain.")

    n_states: int = 3
    concentration: float = 1.0
    seq_len: int = 100
    order: int = 2
    prior: str = "dirichlet"  # or "doubly_stochastic" (order 2 only)
    unigram_share: float = 0.0  # the share of a batch's sequences whose chain is unigram-optimal (order 2 only)

    def validate(self, vocab_size: int | None = None) -> MarkovTask:
        """Raise ValueError saying what to change if no sequence of this task can be made (vocab_size: the
        model's, which must hold every state)."""
        for name in ("n_states", "seq_len", "order"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be a whole number, got {value!r}.")
        if not 2 <= self.n_states <= MAX_STATES:
            raise ValueError(f"n_states must be between 2 and {MAX_STATES} (got {self.n_states}): one state "
                             "makes every sequence the same.")
        c = self.concentration
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (c > 0 and math.isfinite(c)):
            raise ValueError(f"concentration must be a positive number (the Dirichlet prior's), got {c!r}.")
        if not 2 <= self.order <= MAX_ORDER:
            raise ValueError(f"order must be between 2 (a bigram chain: the next token depends on the "
                             f"current one) and {MAX_ORDER}, got {self.order}.")
        if self.n_states ** (self.order - 1) > MAX_CONTEXTS:
            raise ValueError(f"{self.n_states} states at order {self.order} make {self.n_states ** (self.order - 1)} "
                             f"transition rows a sequence, above this lab's {MAX_CONTEXTS}: lower n_states or order.")
        if self.seq_len > MAX_SEQ_LEN:
            raise ValueError(f"seq_len {self.seq_len} is above this lab's limit of {MAX_SEQ_LEN}: lower it.")
        if self.seq_len < self.order + 1:
            raise ValueError(f"seq_len {self.seq_len} is too short for an order-{self.order} chain: a sequence "
                             f"needs at least {self.order + 1} tokens to hold one transition after its start.")
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {', '.join(PRIORS)}, got {self.prior!r}.")
        u = self.unigram_share
        if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 <= u < 1:
            raise ValueError(f"unigram_share must be a number from 0 up to (not including) 1, got {u!r}: it is the "
                             "share of a batch's sequences whose chain is unigram-optimal.")
        if (self.prior != "dirichlet" or u) and self.order != 2:
            raise ValueError(f"a doubly stochastic prior or a unigram share needs a bigram chain (order 2), got "
                             f"order {self.order}: set order to 2 or use the Dirichlet prior with no unigram share.")
        if vocab_size is not None and vocab_size < self.n_states:
            raise ValueError(f"the model's vocabulary ({vocab_size}) is smaller than n_states ({self.n_states}).")
        return self

    @property
    def strategies(self) -> tuple[str, ...]:
        """The strategies' names, simplest first: uniform, unigram, bigram (and the chain's own n-gram)."""
        return ("uniform", *(ORDER_NAMES[n] for n in range(1, self.order + 1)))

    @property
    def standard(self) -> bool:
        """Whether every chain is drawn from the Dirichlet prior (the one the strategies are Bayes-optimal for)."""
        return self.prior == "dirichlet" and not self.unigram_share

    def to_dict(self) -> dict:
        """{"kind": "markov", ...}; prior and unigram_share only when not the defaults, so the entry of a task
        on the Dirichlet prior is the same as before they existed."""
        out = {"kind": KIND, **asdict(self)}
        for name in OPTIONAL:
            if out[name] == MarkovTask.__dataclass_fields__[name].default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, entry: dict) -> MarkovTask:
        return task_from_dict(entry)

    @property
    def train_plots(self) -> tuple[str, ...]:
        """The Train page's curves: the KL to each strategy, and each head's prev_token and induction score."""
        return (*(f"kl_{name}" for name in self.strategies), "prev_token", "induction")

    def summary(self) -> str:
        return (f"Markov chains of {self.n_states} states (order {self.order}, Dirichlet {self.concentration:g}), "
                f"length {self.seq_len}")

    def sample(self, batch_size: int, vocab_size: int, generator: torch.Generator | None = None) -> tuple:
        """(tokens [B, seq_len], None): sample_markov's tokens (the tables are not needed by any score)."""
        self.validate(vocab_size)
        return sample_markov(self, batch_size, generator)[0], None

    def eval_task(self) -> MarkovTask:
        """This task on the Dirichlet prior: a run trained on doubly stochastic or partly unigram-optimal chains
        is measured on the full distribution, as Edelman et al. (2024) evaluate theirs, and there its strategies
        are the Bayes-optimal ones."""
        return replace(self, prior="dirichlet", unigram_share=0.0)

    def evaluate(self, model, tokens: torch.Tensor, extra, edits: dict | None = None,
                 cache: dict | None = None) -> dict:
        """log_row; the strategies' predictions on a fixed batch are computed once (kept in `cache`)."""
        if cache is not None and "strategies" not in cache:
            cache["strategies"] = strategy_probs(tokens, self)
        return log_row(model, tokens, self, edits, None if cache is None else cache["strategies"])

    def head_scores(self, pattern: torch.Tensor, tokens: torch.Tensor, extra) -> dict:
        """prev_token and induction on the sequence's own tokens (head_scores below)."""
        return head_scores(pattern, tokens)


OPTIONAL = ("prior", "unigram_share")  # fields a task entry may leave out (their defaults)


def task_from_dict(entry: dict) -> MarkovTask:
    """The MarkovTask a checkpoint's task entry ({"kind": "markov", ...}) describes; ValueError otherwise."""
    names = ("n_states", "concentration", "seq_len", "order")
    if entry.get("kind") != KIND or any(k not in entry for k in names):
        raise ValueError(f"a Markov task entry needs kind 'markov' and {', '.join(names)}.")
    return MarkovTask(**{k: entry[k] for k in (*names, *OPTIONAL) if k in entry}).validate()


def sinkhorn(tables):
    """Doubly stochastic tables [..., k, k] from positive ones: rows and columns normalised in turn until every
    row and column sums to 1 within SINKHORN_TOL (float64). RuntimeError if that takes more than SINKHORN_MAX_ITER
    rounds (a table with a zero pattern that no doubly stochastic matrix has)."""
    import numpy as np

    t = np.asarray(tables, dtype=np.float64).copy()
    for _ in range(SINKHORN_MAX_ITER):
        t /= t.sum(-1, keepdims=True)
        t /= t.sum(-2, keepdims=True)
        if np.abs(t.sum(-1) - 1).max() <= SINKHORN_TOL:  # columns sum to 1 exactly after their normalisation
            return t
    raise RuntimeError(f"Sinkhorn balancing did not reach {SINKHORN_TOL} in {SINKHORN_MAX_ITER} rounds.")


def kept_sequences(unigram_share: float, batch_size: int) -> int:
    """How many of a batch's sequences are not on unigram-optimal chains (sample_markov makes the last
    round(unigram_share x batch_size) of them unigram-optimal)."""
    return batch_size - round(unigram_share * batch_size)


def sample_markov(task: MarkovTask, batch_size: int, generator: torch.Generator | None = None):
    """Draw fresh sequences: tokens [B, seq_len] (long) and each sequence's transition table
    [B, n_states ** (order - 1), n_states] (float64; row c = the context whose last token is c % k,
    the one before it c // k % k, ...), from the task's prior (the last round(unigram_share x B) tables
    unigram-optimal: every row the same).

    Every number comes from `generator` (one seed drawn from it feeds numpy's Dirichlet and the token
    draws), so a seeded generator gives the same batch every time, as core.model.task.sample_batch."""
    import numpy as np
    import torch

    task.validate()
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    rng = np.random.default_rng(seed)
    k, n, T = task.n_states, task.order, task.seq_len
    rows = k ** (n - 1)
    tables = rng.dirichlet(np.full(k, float(task.concentration)), size=(batch_size, rows))  # [B, rows, k]
    if task.prior == "doubly_stochastic":
        tables = sinkhorn(tables)
    n_unigram = batch_size - kept_sequences(task.unigram_share, batch_size)
    if n_unigram:  # the last sequences' chains: one freshly drawn Dirichlet row for every current token
        tables[batch_size - n_unigram :] = rng.dirichlet(np.full(k, float(task.concentration)),
                                                         size=(n_unigram, 1))
    cdf = np.cumsum(tables, axis=-1)
    cdf[..., -1] = 1.0  # the last bin ends at exactly 1 (a uniform draw below 1 always lands in a bin)
    tokens = np.empty((batch_size, T), dtype=np.int64)
    tokens[:, : n - 1] = rng.integers(0, k, size=(batch_size, n - 1))
    u = rng.random((batch_size, T))
    b = np.arange(batch_size)
    context = np.zeros(batch_size, dtype=np.int64)
    for t in range(n - 1):
        context = (context * k + tokens[:, t]) % rows
    for t in range(n - 1, T):
        tokens[:, t] = (u[:, t, None] >= cdf[b, context]).sum(-1)
        context = (context * k + tokens[:, t]) % rows
    return torch.from_numpy(tokens), torch.from_numpy(tables)


def _ngram_probs(tokens: torch.Tensor, k: int, n: int, alpha: float) -> torch.Tensor:
    """[B, T, k]: the order-n count predictor (n = 1: unigram) at every position t, from tokens 0..t."""
    import torch

    B, T = tokens.shape
    if n == 1:
        counts = torch.nn.functional.one_hot(tokens, k).to(torch.float64).cumsum(1)  # [B, T, k]
        return (counts + alpha) / (counts.sum(-1, keepdim=True) + k * alpha)
    rows = k ** (n - 1)
    # the context ending at position t: c_t = sum_m x_{t-m} k^m over m < n - 1 (defined for t >= n - 2)
    context = torch.zeros(B, T, dtype=torch.long)
    for m in range(n - 1):
        shifted = torch.zeros(B, T, dtype=torch.long)
        shifted[:, m:] = tokens[:, : T - m]
        context += shifted * k ** m
    # an event at position i >= n - 1: context c_{i-1} followed by x_i; counted at every t >= i
    events = torch.zeros(B, T, rows * k, dtype=torch.float64)
    if n - 1 < T:
        index = context[:, n - 2 : T - 1] * k + tokens[:, n - 1 :]
        events[:, n - 1 :].scatter_(-1, index[..., None], 1.0)
    counts = events.cumsum(1).view(B, T, rows, k)
    row = counts.gather(2, context[:, :, None, None].expand(B, T, 1, k)).squeeze(2)  # [B, T, k]
    probs = (row + alpha) / (row.sum(-1, keepdim=True) + k * alpha)
    probs[:, : n - 2] = 1.0 / k  # no complete context yet: the next token is a uniform start token
    return probs


def strategy_probs(tokens: torch.Tensor, task: MarkovTask) -> dict[str, torch.Tensor]:
    """{strategy: [B, T, k] float64}: each strategy's next-token distribution at every position of tokens
    [B, T] (position t predicts token t + 1; the last position's prediction has no target in the batch)."""
    import torch

    task.validate()
    k, alpha = task.n_states, float(task.concentration)
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(f"tokens must be a [B, T] long tensor, got {tuple(tokens.shape)} {tokens.dtype}.")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= k):
        raise ValueError(f"tokens must be states 0..{k - 1} of this task.")
    out = {"uniform": torch.full((*tokens.shape, k), 1.0 / k, dtype=torch.float64)}
    for n in range(1, task.order + 1):
        out[ORDER_NAMES[n]] = _ngram_probs(tokens, k, n, alpha)
    return out


def kl_to(p_strategy: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last axis: p [..., k] probabilities, log_q [..., k] log-probabilities -> [...]."""
    import torch

    p = p_strategy.to(torch.float64)
    log_p = torch.where(p > 0, p.log(), torch.zeros_like(p))
    return (p * (log_p - log_q.to(torch.float64))).sum(-1)


def strategy_kl(logits: torch.Tensor, tokens: torch.Tensor, task: MarkovTask,
                strategies: dict[str, torch.Tensor] | None = None) -> dict[str, dict]:
    """The KL of a model's predictions to each strategy: {strategy: {"per_position": [T - 1] float64 (the
    mean over sequences at logit positions 0..T-2, i.e. targets 1..T-1), "mean": float (over positions
    and sequences)}}.

    logits [B, T, V] (V >= n_states; only the first n_states logits count, renormalised, since a state
    is a token and the rest are tokens this task never shows); tokens [B, T]. `strategies`: the
    strategy_probs of tokens, when already computed (a trainer computes them once for its fixed batch)."""
    import torch

    if logits.dim() != 3 or logits.shape[:2] != tokens.shape or logits.shape[-1] < task.n_states:
        raise ValueError(f"logits must be [B, T, V >= {task.n_states}] for tokens {tuple(tokens.shape)}, "
                         f"got {tuple(logits.shape)}.")
    probs = strategies if strategies is not None else strategy_probs(tokens, task)
    log_q = torch.log_softmax(logits[:, :-1, : task.n_states].to(torch.float64), -1)
    out = {}
    for name, p in probs.items():
        kl = kl_to(p[:, :-1], log_q)  # [B, T - 1]
        out[name] = {"per_position": kl.mean(0), "mean": float(kl.mean())}
    return out


def nearest_strategies(rows: list[dict], names: tuple[str, ...], confirm: int = 2) -> dict:
    """The stages of a training, measured from its logged KL curves: rows are history rows holding
    "kl_<strategy>" numbers and "step".

    Returns {"nearest": [name per row] (the strategy with the smallest KL there), "closest_step":
    {name: the logged step where that strategy's KL is smallest}, "onset": {name: the first logged step
    from which the strategy is the nearest for `confirm` logged rows in a row (fewer at the end of the
    run), or None if it never is}}. The strategy nearest at the first row has its onset there without
    confirmation: that row is the start of training (the untrained model is nearest to uniform, and on
    this task the uniform stage can end before the next log). A strategy the model never gets nearest
    to has no onset: the stage was not reached."""
    usable = [r for r in rows if all(isinstance(r.get(f"kl_{n}"), (int, float)) and math.isfinite(r[f"kl_{n}"])
                                     for n in names)]
    nearest = [min(names, key=lambda n: r[f"kl_{n}"]) for r in usable]
    closest = {n: min(usable, key=lambda r: r[f"kl_{n}"])["step"] if usable else None for n in names}
    onset: dict[str, int | None] = {n: None for n in names}
    for i, name in enumerate(nearest):
        if onset[name] is not None:
            continue
        run = nearest[i : i + (1 if i == 0 else confirm)]
        if all(x == name for x in run):
            onset[name] = usable[i]["step"]
    return {"nearest": nearest, "closest_step": closest, "onset": onset}


def head_scores(pattern: torch.Tensor, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-head scores of one block on Markov sequences: pattern [B, H, T, T], tokens [B, T] -> {name: [H]}.

    prev_token: A[i, i-1] over queries i >= 1. induction: the attention on the keys j <= i whose previous
    token is the query's token (x_{j-1} = x_i: the tokens that followed an earlier occurrence of the
    current one, which the bigram strategy counts), summed per query and averaged over the queries that
    have such a key (core.reading.detectors' induction mask)."""
    import torch

    from core.reading.detectors import detector_mask

    T = pattern.shape[-1]
    prev = pattern.diagonal(-1, -2, -1).mean((0, 2)) if T > 1 else torch.full(pattern.shape[1:2], float("nan"))
    mask = detector_mask("induction", tokens)[:, None].to(pattern.dtype)  # [B, 1, T, T]
    per_query = (pattern * mask).sum(-1)  # [B, H, T]
    rows = (mask.sum(-1) > 0).to(pattern.dtype)  # [B, 1, T]
    return {"prev_token": prev, "induction": (per_query * rows).sum((0, 2)) / rows.sum((0, 2))}


def log_row(model, tokens: torch.Tensor, task: MarkovTask, edits: dict | None = None,
            strategies: dict | None = None) -> dict:
    """A Markov-task training log's measurements: "loss" (mean cross-entropy on targets 1..T-1), "loss_optimal"
    (the chain's Bayes-optimal strategy's, the floor), "kl_<strategy>" for each strategy, "kl_positions"
    ({strategy: [T - 1] list}) and each head's prev_token and induction score ([layer][head] lists).
    strategies: strategy_probs(tokens, task), when already computed."""
    import torch
    import torch.nn.functional as F

    from core.model.hooks import eval_patterns

    logits, patterns = eval_patterns(model, tokens, edits)
    with torch.no_grad():
        probs = strategies if strategies is not None else strategy_probs(tokens, task)
        targets = tokens[:, 1:]
        best = probs[task.strategies[-1]][:, :-1].gather(-1, targets[..., None]).squeeze(-1)
        row = {"loss": float(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1))),
               "loss_optimal": float(-best.log().mean())}
        kl = strategy_kl(logits, tokens, task, probs)
        row.update({f"kl_{name}": value["mean"] for name, value in kl.items()})
        row["kl_positions"] = {name: [round(float(v), 5) for v in value["per_position"]] for name, value in kl.items()}
        scores = [head_scores(p, tokens) for p in patterns]
    row["prev_token"] = [s["prev_token"].tolist() for s in scores]
    row["induction"] = [s["induction"].tolist() for s in scores]
    return row
