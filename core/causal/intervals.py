"""Bootstrap intervals of patch effects over the sequences measured."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from core.causal.patching import PatchRuns


N_BOOT = 1000  # bootstrap resamples of the sequences for an effect's interval
BOOT_SEED = 0


def effect_interval(runs: PatchRuns, m_seq, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """A bootstrap interval of patch effects over the sequences measured: m_seq [..., B] (metric_by_seq
    of each patched run) -> (low, high), each [...]. Each resample draws B sequences with replacement
    (fixed seed BOOT_SEED) and recomputes the whole ratio, denominator included; NaN where a resample's
    M(clean) == M(corrupted)."""
    m = np.asarray(m_seq, dtype=np.float64)
    w = runs.weights
    B = len(w)
    idx = np.random.default_rng(BOOT_SEED).integers(0, B, (N_BOOT, B))
    ws = w[idx]  # [N, B]
    clean = (runs.clean_seq[idx] * ws).sum(-1)
    corr = (runs.corrupted_seq[idx] * ws).sum(-1)
    patched = (m[..., idx] * ws).sum(-1)  # [..., N]
    gap = clean - corr
    with np.errstate(invalid="ignore", divide="ignore"):
        eff = np.where(gap != 0, (patched - corr) / gap, np.nan)
    a = (1 - level) / 2
    return np.nanquantile(eff, a, axis=-1), np.nanquantile(eff, 1 - a, axis=-1)
