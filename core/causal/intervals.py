"""Bootstrap intervals of patch effects over the sequences measured (core.reading.bootstrap)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from core.reading import bootstrap

if TYPE_CHECKING:
    from core.causal.patching import PatchRuns


def effect_interval(runs: PatchRuns, m_seq, level: float = bootstrap.LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """A bootstrap interval of patch effects over the sequences measured: m_seq [..., B] (metric_by_seq
    of each patched run) -> (low, high), each [...]. Each resample (core.reading.bootstrap) draws B
    sequences with replacement and recomputes the whole ratio, denominator included; NaN where a
    resample's M(clean) == M(corrupted)."""
    m = np.asarray(m_seq, dtype=np.float64)
    w = runs.weights

    def effect(idx):  # [N, B] -> [..., N]
        ws = w[idx]
        clean = (runs.clean_seq[idx] * ws).sum(-1)
        corr = (runs.corrupted_seq[idx] * ws).sum(-1)
        patched = (m[..., idx] * ws).sum(-1)
        gap = clean - corr
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(gap != 0, (patched - corr) / gap, np.nan)

    return bootstrap.sequence_interval(effect, len(w), level)
