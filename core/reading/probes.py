"""The period-shift probe: evaluate a model on sequences of one fixed period, which may differ from
the periods it was trained on, and see where its heads put their attention.

A model that learned a content-based lookup (an induction circuit) keeps working when the period
moves; one that learned "copy the token k positions back" fails as soon as the period is not k + 1,
and its heads keep their mass at the old offset.

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from core.model.lazy import no_grad
from core.model.metrics import copy_metrics
from core.model.symbols import with_labels
from core.model.task import TaskConfig, sample_batch

if TYPE_CHECKING:
    from core.model.tinycharlm import TinyCharLM


def probe_periods(task: TaskConfig) -> tuple[int, int]:
    """The probe periods that leave a complete second copy: 2 .. seq_len // 2."""
    return 2, task.seq_len // 2


def training_offsets(task: TaskConfig) -> list[int]:
    """Offsets L - 1 a fixed-offset rule would have used on the training periods."""
    return [L - 1 for L in range(task.period_min, task.period_max + 1)]


@no_grad
def period_probe(model: TinyCharLM, task: TaskConfig, period: int, offsets: list[int] | tuple = (),
                 n_seqs: int = 64, seed: int = 0) -> dict:
    """Evaluate at one fixed `period`.

    Returns {"period", "metrics": copy metrics, "offset_mass": DataFrame rows {label, layer, head,
    offset, mass}} for offset period - 1 (where an induction head should look) and every offset in
    `offsets` (e.g. the training period minus one).
    """
    import torch

    from core.reading.heads import offset_mass

    lo, hi = probe_periods(task)
    if not lo <= period <= hi:
        raise ValueError(f"probe period must be between {lo} and {hi} (two full copies in {task.seq_len} tokens).")
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=g, period=period)
    logits, cache = model.run_with_cache(tokens)
    ks = sorted({period - 1, *(int(k) for k in offsets)})
    rows = []
    for layer, pattern in enumerate(cache["pattern"]):
        for k in ks:
            mass = offset_mass(pattern, k) if k < task.seq_len else torch.full((model.cfg.n_heads,), float("nan"))
            for h in range(model.cfg.n_heads):
                rows.append((layer, h, k, float(mass[h])))
    return {"period": period, "metrics": copy_metrics(logits, tokens, periods),
            "offset_mass": with_labels(pd.DataFrame(rows, columns=["layer", "head", "offset", "mass"]))}


@no_grad
def period_sweep(model: TinyCharLM, task: TaskConfig, periods: list[int] | None = None,
                 n_seqs: int = 16) -> pd.DataFrame:
    """Copy metrics at each fixed probe period (default: every period the task length allows).

    Rows {period, trained (bool: inside the training range), loss_second_copy, acc_second_copy,
    loss_later_copies, acc_later_copies}. All periods run in a few large batches.
    """
    import torch

    lo, hi = probe_periods(task)
    periods = list(range(lo, hi + 1)) if periods is None else list(periods)
    batches = [sample_batch(task, n_seqs, model.cfg.vocab_size, generator=torch.Generator().manual_seed(P),
                            period=P) for P in periods]
    tokens = torch.cat([t for t, _ in batches])
    logits = torch.cat([model(tokens[s:s + 256]) for s in range(0, len(tokens), 256)])
    rows = []
    for n, (P, (tok, per)) in enumerate(zip(periods, batches)):
        m = copy_metrics(logits[n * n_seqs:(n + 1) * n_seqs], tok, per)
        rows.append({"period": P, "trained": task.period_min <= P <= task.period_max,
                     **{k: m[k] for k in ("loss_second_copy", "acc_second_copy", "loss_later_copies",
                                           "acc_later_copies")}})
    return pd.DataFrame(rows)


FIXED_ACC = 0.2  # later-copy accuracy at a shifted period below this: the model does not look the token up
WORKS_ACC = 0.5  # ... while at its own training period it is at least this


def fixed_distance_verdict(model: TinyCharLM, task: TaskConfig) -> dict | None:
    """Whether the period-shift probe says the model copies from a fixed distance back: its later-copy
    accuracy at its shortest training period is at least WORKS_ACC, and at a period a quarter shorter
    (outside the training range) below FIXED_ACC, on 32 sequences each. Then attention-mass scores such as the
    induction score measure the trained offset, not a look-up. Returns {"fixed", "trained", "shifted", "acc_trained",
    "acc_shifted"}, or None when no shorter period leaves two copies (or the model has no heads)."""
    lo, _ = probe_periods(task)
    trained = task.period_min
    shifted = max(lo, (3 * trained) // 4)
    if model.cfg.n_layers == 0 or shifted >= trained:
        return None
    acc = {L: float(period_probe(model, task, L, n_seqs=32, seed=0)["metrics"]["acc_later_copies"])
           for L in (trained, shifted)}
    return {"fixed": acc[trained] >= WORKS_ACC and acc[shifted] < FIXED_ACC, "trained": trained, "shifted": shifted,
            "acc_trained": acc[trained], "acc_shifted": acc[shifted]}
