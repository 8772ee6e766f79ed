"""Part 5's checks (Markov chains and statistical induction heads): each exercise's cases, the lab's answer
(core.model.markov) and the typical mistakes, each a wrong computation with its sentence.

The cases come from a Markov-chain model (exercises/engine.py's markov_source: the picked model when it is
of that task, else the shipped checkpoints/markov/markov-2block.pt) on seeded sequences of its task, and
from planted inputs whose answers are known: each cases function adds those itself."""
from __future__ import annotations

import torch

from core.model.symbols import block_label
from exercises.engine import Case, Check

CHECKS: dict[str, Check] = {}  # exercise name -> its check, each one written below the functions it uses
PATTERN_AXES = ("B", "H", "T, the query i", "T, the key j")
# Two planted sequences over 4 states: state 3 first shows up late, so its row is empty for a while, and
# some transitions are never seen.
PLANTED_TOKENS = torch.tensor([[0, 1, 0, 1, 1, 0, 2, 0, 3, 3, 0, 1],
                               [2, 2, 2, 0, 1, 2, 3, 1, 0, 2, 2, 1]])


def markov_batch(task, n: int = 8, seed: int = 0) -> torch.Tensor:
    """Seeded sequences of a Markov task: tokens [n, seq_len] (long)."""
    from core.model.markov import sample_markov

    tokens, _ = sample_markov(task, n, generator=torch.Generator().manual_seed(seed))
    return tokens


def _strategies(tokens, n_states, alpha):
    from core.model.markov import MarkovTask, strategy_probs

    return strategy_probs(tokens, MarkovTask(n_states, float(alpha), tokens.shape[1], 2))


# ---------------------------------------------------------------------------------------------
# bigram_strategy


def _bigram_cases(model, task, label):
    return [Case(f"{label}'s task", {"tokens": markov_batch(task), "n_states": task.n_states,
                                     "alpha": float(task.concentration)}),
            Case("a planted pair of sequences (4 states, alpha 0.5)",
                 {"tokens": PLANTED_TOKENS, "n_states": 4, "alpha": 0.5})]


def _transitions(tokens, k, ahead=0):
    """[B, T, k]: the transitions out of x_t seen through token min(t + ahead, T - 1)."""
    B, T = tokens.shape
    events = torch.zeros(B, T, k, k, dtype=torch.float64)  # events[b, i, a, j]: x_{i-1} = a, x_i = j
    b = torch.arange(B)[:, None]
    i = torch.arange(1, T)[None, :]
    events[b, i, tokens[:, :-1], tokens[:, 1:]] = 1.0
    seen = events.cumsum(1)
    upto = (torch.arange(T) + ahead).clamp(max=T - 1)
    return seen[:, upto][torch.arange(B)[:, None], torch.arange(T)[None, :], tokens]


def _bigram_wrong(tokens, n_states, alpha, ahead=0, prior=True, total_extra=0.0, k_alpha=True):
    N = _transitions(tokens, n_states, ahead)
    if not prior:
        return N / N.sum(-1, keepdim=True)
    return (N + alpha) / (N.sum(-1, keepdim=True) + total_extra + (n_states if k_alpha else 1) * alpha)


CHECKS["bigram_strategy"] = Check(
    _bigram_cases, lambda tokens, n_states, alpha: _strategies(tokens, n_states, alpha)["bigram"],
    ("B", "T, the position t", "k, the next state j"), [
        ("No pseudo-count: add alpha to every transition count and k * alpha to the total (the Dirichlet prior), "
         "else a transition not seen yet gets probability 0 and a state never left yet divides 0 by 0",
         lambda tokens, n_states, alpha: _bigram_wrong(tokens, n_states, alpha, prior=False)),
        ("Looking at the future: the transition out of position t leads to token t + 1, the one being predicted; "
         "count only the transitions whose both tokens are among 0..t",
         lambda tokens, n_states, alpha: _bigram_wrong(tokens, n_states, alpha, ahead=1)),
        ("That counts the occurrences of j (the unigram strategy): the bigram strategy counts the transitions "
         "x_t -> j, the tokens that followed earlier occurrences of the current token",
         lambda tokens, n_states, alpha: _strategies(tokens, n_states, alpha)["unigram"]),
        ("Divided by the occurrences of x_t up to t, position t included: its transition is not seen yet, so "
         "divide by the transitions out of x_t (the row's counts summed), and each row sums to 1",
         lambda tokens, n_states, alpha: _bigram_wrong(tokens, n_states, alpha, total_extra=1.0)),
        ("The prior adds alpha to each of the k counts, so the total gets k * alpha (each row then sums to 1)",
         lambda tokens, n_states, alpha: _bigram_wrong(tokens, n_states, alpha, k_alpha=False))], task="markov")


# ---------------------------------------------------------------------------------------------
# strategy_kl


def _kl_cases(model, task, label):
    tokens = markov_batch(task)
    logits = model(tokens)
    probs = _strategies(tokens, task.n_states, task.concentration)
    out = [Case(f"{label}, KL to the {name} strategy", {"logits": logits, "strategy_probs": probs[name]})
           for name in ("unigram", "bigram")]
    # planted: a vocabulary of 7 tokens over 4 states; random logits, a model that predicts the bigram
    # strategy exactly (KL 0 at every position), and a strategy sure of the next token (probabilities 0)
    g = torch.Generator().manual_seed(5)
    bigram = _strategies(PLANTED_TOKENS, 4, 0.5)["bigram"]
    extra = torch.randn(2, 12, 3, generator=g, dtype=torch.float64) * 3
    exact = torch.cat([bigram.log() + 1.5, extra], -1)
    sure = bigram.clone()  # every third position sure of its next token (the last wraps round to the first)
    sure[:, ::3] = torch.nn.functional.one_hot(PLANTED_TOKENS.roll(-1, 1)[:, ::3], 4).to(torch.float64)
    random = torch.randn(2, 12, 7, generator=g, dtype=torch.float64) * 2
    return out + [Case("planted logits (7 tokens, 4 states) against the bigram strategy",
                       {"logits": random, "strategy_probs": bigram}),
                  Case("a planted model that predicts the bigram strategy exactly (KL 0)",
                       {"logits": exact, "strategy_probs": bigram}),
                  Case("a planted strategy sure of some next tokens (probabilities 0)",
                       {"logits": random, "strategy_probs": sure})]


def _kl(logits, strategy_probs, reverse=False, renormalise=True, entropy=True, nan_zeros=False, over="B"):
    """The lab's KL(strategy || model) per position [T] (core.model.markov.kl_to), and wrong variants."""
    from core.model.markov import kl_to

    k = strategy_probs.shape[-1]
    p = strategy_probs.to(torch.float64)
    log_q = torch.log_softmax(logits[..., :k].to(torch.float64), -1) if renormalise else \
        torch.log_softmax(logits.to(torch.float64), -1)[..., :k]
    if reverse:
        per = (log_q.exp() * (log_q - p.log())).sum(-1)
    elif not entropy:
        per = -(p * log_q).sum(-1)
    elif nan_zeros:
        per = (p * (p.log() - log_q)).sum(-1)
    else:
        per = kl_to(p, log_q)
    return {"B": per.mean(0), "all": per.mean(), "sum": per.sum(0)}[over]


CHECKS["strategy_kl"] = Check(_kl_cases, _kl, ("T, the position t",), [
    ("The KL the wrong way round: that is KL(model || strategy); the lab measures KL(strategy || model), the "
     "strategy's probabilities weighting log p_s - log p_model", lambda **a: _kl(**a, reverse=True)),
    ("Not renormalised over the states: take the softmax of the first k logits (logits[..., :k]), not the "
     "softmax over the whole vocabulary", lambda **a: _kl(**a, renormalise=False)),
    ("Averaged over the positions too: return one KL per position t, [T], averaged over the batch only",
     lambda **a: _kl(**a, over="all")),
    ("Summed over the batch: average each position's KL over the sequences",
     lambda **a: _kl(**a, over="sum")),
    ("That is the cross-entropy of the model against the strategy: subtract the strategy's entropy "
     "(KL = sum_j p_s(j) (log p_s(j) - log p_model(j)))", lambda **a: _kl(**a, entropy=False)),
    ("A strategy probability of 0 gives 0 * log 0 = nan: a term with p_s(j) = 0 counts 0 "
     "(torch.xlogy(p, p), or torch.where(p > 0, ...))", lambda **a: _kl(**a, nan_zeros=True))], task="markov")


# ---------------------------------------------------------------------------------------------
# successor_score


def _planted_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """A planted pattern [B, 3, T, T] with known successor scores: head 0 exactly on the latest successor
    key of each query that has one (else on key 0): score 1; head 1 always on key 0, never a successor:
    score 0; head 2 uniform over the keys j <= i."""
    B, T = tokens.shape
    A = torch.zeros(B, 3, T, T)
    A[:, 2] = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    A[:, 1, :, 0] = 1.0
    for b in range(B):
        seq = tokens[b].tolist()
        for i in range(T):
            keys = [j for j in range(1, i + 1) if seq[j - 1] == seq[i]]
            A[b, 0, i, keys[-1] if keys else 0] = 1.0
    return A


def _successor_cases(model, task, label):
    tokens = markov_batch(task)
    _, cache = model.run_with_cache(tokens, per_head=False)
    out = [Case(f"{label}, {block_label(l)}", {"pattern": cache["pattern"][l], "tokens": tokens})
           for l in range(model.cfg.n_layers)]
    from core.model.markov import MarkovTask

    planted = markov_batch(MarkovTask(n_states=3, seq_len=30), n=4, seed=3)
    return out + [Case("a planted pattern (head 0 exactly on a successor, head 1 on key 0, head 2 uniform)",
                       {"pattern": _planted_pattern(planted), "tokens": planted})]


def _successor(pattern, tokens, shift=1, strict=False, wrap=False, every_query=False, per_sequence=False):
    """The attention on keys j <= i with tokens[j - shift] == tokens[i] (the lab's: shift 1), per query, averaged
    over the queries with such a key; the variants are the typical mistakes."""
    B, H, T, _ = pattern.shape
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    src = j[0] - shift  # the position each key's token is compared from
    inside = ((src >= 0) & (src < T)) | wrap
    mask = (tokens[:, src % T][:, None, :] == tokens[:, :, None]) & inside & ((j < i) if strict else (j <= i))
    per_query = (pattern * mask[:, None].to(pattern.dtype)).sum(-1)  # [B, H, T]
    rows = torch.ones(B, 1, T) if every_query else mask.any(-1)[:, None].to(pattern.dtype)
    if per_sequence:
        return ((per_query * rows).sum(-1) / rows.sum(-1)).mean(0)
    return (per_query * rows).sum((0, 2)) / rows.sum((0, 2))


def _lab_successor(pattern, tokens):
    from core.model.markov import head_scores

    return head_scores(pattern, tokens)["induction"]


CHECKS["successor_score"] = Check(_successor_cases, _lab_successor, ("H",), [
    ("That is the duplicate-token score (tokens[j] == tokens[i]: the earlier occurrences themselves); the "
     "successor key is the token after each, tokens[j - 1] == tokens[i]",
     lambda pattern, tokens: _successor(pattern, tokens, shift=0, strict=True)),
    ("Averaged over every query: a query whose token was never followed yet has no successor key; average "
     "over the queries that have at least one", lambda pattern, tokens: _successor(pattern, tokens, every_query=True)),
    ("Off by one position: that is the key before each earlier occurrence (tokens[j + 1] == tokens[i]); the "
     "successor is the key after it, tokens[j - 1] == tokens[i]",
     lambda pattern, tokens: _successor(pattern, tokens, shift=-1)),
    ("Off by one position: the key j = i counts too, when tokens[i - 1] == tokens[i] (that transition is one "
     "the bigram strategy counts)", lambda pattern, tokens: _successor(pattern, tokens, strict=True)),
    ("Key 0 has no previous token: torch.roll wraps the last token round to it; count the keys j >= 1 only",
     lambda pattern, tokens: _successor(pattern, tokens, wrap=True)),
    ("Averaged per sequence first: pool every (sequence, query) pair that has a successor key",
     lambda pattern, tokens: _successor(pattern, tokens, per_sequence=True))], task="markov")
