"""In-context learning in miniature: typed patterns, restarts, and a check that the skill is read
from the context rather than stored in the weights.

Typed text and tokens: token i is the i-th character of the lab's alphabet, core.model.symbols.ALPHABET
(a=0 ... z=25, A=26 ... Z=51, 0=52 ... 9=61, space=62, '.'=63), the mapping every page uses, so the
64 tokens of the default vocabulary each have one visible symbol and typing is case-sensitive. A
model with a smaller vocabulary uses the first V symbols; tokens beyond 64 (larger vocabularies) are
shown as ⟨id⟩ and cannot be typed.

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from core.model.lazy import no_grad
from core.model.metrics import copy_metrics
from core.model.task import TaskConfig, sample_batch

if TYPE_CHECKING:
    import torch

    from core.model.tinycharlm import TinyCharLM


def tile(pattern: list[int], length: int) -> list[int]:
    """The pattern repeated to exactly `length` tokens."""
    return [pattern[t % len(pattern)] for t in range(length)]


@no_grad
def predict_each(model: TinyCharLM, tokens: list[int], period: int | None = None) -> list[dict]:
    """The model's prediction at every position of one sequence.

    One row per target t = 1..T-1 (the prediction made at t-1): position t, target (token id),
    predicted, p_predicted, p_target, correct, and copy ("first"/"second"/"later") when the
    sequence's period is given.
    """
    import torch

    x = torch.tensor(tokens, dtype=torch.long)[None]
    probs = model(x)[0].softmax(-1)
    rows = []
    for t in range(1, len(tokens)):
        p = probs[t - 1]
        pred = int(p.argmax())
        row = {"position": t, "target": tokens[t], "predicted": pred, "p_predicted": float(p[pred]),
               "p_target": float(p[tokens[t]]), "correct": pred == tokens[t]}
        if period:
            row["copy"] = "first" if t < period else ("second" if t < 2 * period else "later")
        rows.append(row)
    return rows


def random_pattern(symbols: list[int], length: int, seed: int) -> list[int]:
    """`length` tokens drawn uniformly (repeats allowed) from `symbols`."""
    import torch

    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(symbols), (length,), generator=g)
    return [symbols[i] for i in idx.tolist()]


# ---------------------------------------------------------------------------------------------
# Is the skill in context?


def replay_training_sequences(task: TaskConfig, vocab_size: int, train: dict | None, n_seqs: int,
                               end_step: int | None = None):
    """The `n_seqs` sequences the trainer drew last before step `end_step` (default: the end of
    training), regenerated from the checkpoint's train entry with core.training.trainer.training_batches (the
    trainer's own stream).

    Returns tokens [n, T_train] and periods [n], or None when the entry lacks seed, batch_size or
    steps_done, describes settings the trainer would refuse, or end_step is out of range.
    """
    import torch

    from core.training.trainer import training_batches

    needed = ("seed", "batch_size", "steps_done")
    if not isinstance(train, dict) or any(not isinstance(train.get(k), int) for k in needed):
        return None
    steps, bs = train["steps_done"], train["batch_size"]
    end_step = steps if end_step is None else end_step
    if not 1 <= end_step <= steps or bs < 1:
        return None
    keep_from = max(0, end_step - math.ceil(n_seqs / bs))
    kept_t, kept_p = [], []
    try:
        stream = training_batches(task, vocab_size, train)
        for step in range(end_step):
            tok, per = next(stream)
            if step >= keep_from:
                kept_t.append(tok)
                kept_p.append(per)
    except (ValueError, TypeError):
        return None
    return torch.cat(kept_t)[-n_seqs:], torch.cat(kept_p)[-n_seqs:]


def _swap_first_copy(tokens: torch.Tensor, periods: torch.Tensor, vocab_size: int, g: torch.Generator):
    """Replace positions t < L of each sequence by a different fresh pattern: the 'second copy' then
    follows a context that never showed it."""
    import torch

    out = tokens.clone()
    noise = torch.randint(0, vocab_size, tokens.shape, generator=g)
    first = torch.arange(tokens.shape[1])[None] < periods[:, None]
    out[first] = noise[first]
    return out


def _binom_se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n else math.nan


FRESH_SEED = 777  # the fresh sequences' generator: a seed the trainer never samples with


@no_grad
def in_context_check(model: TinyCharLM, task: TaskConfig, train: dict | None, n_seqs: int = 256) -> dict:
    """Second-copy accuracy and first-copy loss on four sets of sequences:

    - "seen_mid": n_seqs training sequences replayed from halfway through training;
    - "seen_last": the last n_seqs training sequences (the final updates were made on them);
    - "fresh": n_seqs new sequences from a seed the trainer never used for sampling;
    - "swapped": the fresh sequences with their first copy replaced by another fresh pattern.
    The two seen sets are None when the checkpoint cannot say what training drew. Each entry:
    acc_second, acc_second_se (binomial), loss_first, acc_later, n_second (targets); seen ones also
    step (the training step their last batch was drawn at). Also n_train (sequences trained on),
    p_fresh_in_training (upper bound on the chance that any fresh sequence occurred in training:
    n_train * n_seqs / V^period_min), seq_len, chance (1/V), ln_V.
    """
    import torch

    V = model.cfg.vocab_size

    def measure(tokens, periods):
        m = copy_metrics(model(tokens), tokens, periods)
        n = int(((periods * 2).clamp(max=tokens.shape[1]) - periods).sum())
        return {"acc_second": m["acc_second_copy"], "acc_second_se": _binom_se(m["acc_second_copy"], n),
                "loss_first": m["loss_first_copy"], "acc_later": m["acc_later_copies"], "n_second": n}

    out = {"seen_mid": None, "seen_last": None, "n_train": None, "p_fresh_in_training": None}
    last = replay_training_sequences(task, V, train, n_seqs)
    if last is not None:
        steps, half = train["steps_done"], max(1, train["steps_done"] // 2)
        mid = replay_training_sequences(task, V, train, n_seqs, end_step=half)
        task = TaskConfig(task.period_min, task.period_max, last[0].shape[1])  # compare at training's length
        out["seen_last"] = measure(*last) | {"step": steps}
        out["seen_mid"] = measure(*mid) | {"step": half} if mid is not None else None
        out["n_train"] = steps * train["batch_size"]
        out["p_fresh_in_training"] = out["n_train"] * n_seqs / float(V) ** task.period_min
    g = torch.Generator().manual_seed(FRESH_SEED)
    fresh_t, fresh_p = sample_batch(task, n_seqs, V, generator=g)
    out["fresh"] = measure(fresh_t, fresh_p)
    out["swapped"] = measure(_swap_first_copy(fresh_t, fresh_p, V, g), fresh_p)
    out.update({"seq_len": task.seq_len, "chance": 1.0 / V, "ln_V": math.log(V)})
    return out


NOISE_Z = 3.0  # two accuracies closer than this many standard errors are "equal within noise"


def compare_sets(a: dict, b: dict) -> dict:
    """How far apart two in_context_check sets' second-copy accuracies are: gap, z (in combined
    binomial standard errors) and within_noise (z < NOISE_Z)."""
    gap = abs(a["acc_second"] - b["acc_second"])
    se = math.hypot(a["acc_second_se"], b["acc_second_se"])
    z = gap / se if se else math.inf
    return {"gap": gap, "z": z, "within_noise": z < NOISE_Z}


def last_steps_trace(check: dict) -> bool:
    """Whether the sequences of the very last training steps score beyond noise above fresh ones, or
    their first copy is predicted 0.05 nats better: a trace of the final updates in the weights."""
    fresh, last = check["fresh"], check["seen_last"]
    return not compare_sets(fresh, last)["within_noise"] or fresh["loss_first"] - last["loss_first"] > 0.05
