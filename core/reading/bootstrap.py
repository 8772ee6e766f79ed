"""The one bootstrap over sequences behind every interval the pages show: head-score intervals
(core.reading.heads.score_intervals), patch-effect intervals (core.causal.patching.effect_interval) and the
circuit's knockout intervals (core.causal.circuit.knockouts). The Laws tables resample seeds, not sequences,
with the same N_BOOT, BOOT_SEED and LEVEL (core.laws.stats).

Each resamples the B sequences measured N_BOOT times with replacement (seed BOOT_SEED, one [N_BOOT, B]
draw), recomputes its statistic on each resample, and reports the central LEVEL quantiles.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

N_BOOT = 1000  # resamples of the sequences behind an interval
BOOT_SEED = 0
LEVEL = 0.95


def resample_indices(n_seqs: int, seed: int = BOOT_SEED) -> np.ndarray:
    """[N_BOOT, n_seqs] sequence indices drawn with replacement: row r is resample r."""
    return np.random.default_rng(seed).integers(0, n_seqs, (N_BOOT, n_seqs))


def sequence_interval(statistic: Callable[[np.ndarray], np.ndarray], n_seqs: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a statistic over the sequences: statistic(idx [N_BOOT, B]) -> [..., N_BOOT], the
    statistic of each resample (last axis); quantiles ignore NaN resamples (a ratio with a zero
    denominator, a score no resampled query defines)."""
    boot = np.asarray(statistic(resample_indices(n_seqs)), dtype=np.float64)
    a = (1 - LEVEL) / 2
    with warnings.catch_warnings():  # an all-NaN slice is simply NaN here
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanquantile(boot, a, axis=-1), np.nanquantile(boot, 1 - a, axis=-1)

