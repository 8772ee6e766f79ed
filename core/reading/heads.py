"""Head scores from attention patterns (docs/DESIGN.md "Metrics").

Every score averages one entry per (sequence, query position) over the batch and the query
positions the definition names; a pattern is [B, H, T, T] with query i on axis -2, key j on -1.

- prev_token: A[i, i-1] over i >= 1          - induction: A[i, i+1-L] over i >= L (latest copy)
- induction_any: sum_k A[i, i+1-kL] over every earlier copy k >= 1, averaged over i >= L
- duplicate: A[i, i-L] over i >= L           - first_token: A[i, 0] over i >= 1
- self: A[i, i] over i >= 1 (query 0 has nowhere else to look: A[0, 0] = 1 always)
- offset_mass[k]: A[i, i-k] over i >= k
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from core.model.symbols import with_labels
from core.reading import bootstrap
from core.reading.detectors import DETECTORS, detector_scores

if TYPE_CHECKING:  # pandas only in the tables: a training (head_scores) never imports it
    import pandas as pd

PERIOD_SCORES = ("prev_token", "induction", "induction_any", "duplicate", "first_token", "self")


def _diagonal_mean(pattern: torch.Tensor, back: torch.Tensor, first_query: torch.Tensor) -> torch.Tensor:
    """Mean of A[i, i - back[b]] over queries i >= first_query[b].

    pattern [B, H, T, T]; back, first_query [B] (long). Returns [H]; NaN where no query qualifies.
    """
    B, H, T, _ = pattern.shape
    i = torch.arange(T)[None, :]  # [1, T]
    j = i - back[:, None]  # [B, T]
    valid = (i >= first_query[:, None]) & (j >= 0) & (j <= i)
    values = pattern.gather(-1, j.clamp(0, T - 1)[:, None, :, None].expand(B, H, T, 1)).squeeze(-1)  # [B, H, T]
    weights = valid[:, None, :].float()
    return (values * weights).sum((0, 2)) / weights.sum((0, 2))


def induction_any(pattern: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Mean over queries i >= L of sum_k A[i, i+1-kL] over every earlier copy k >= 1 with
    i+1-kL >= 0: the attention on the token after *any* earlier occurrence (what TransformerLens's
    induction detector and Olsson et al. count). pattern [B, H, T, T], periods [B] -> [H]."""
    T = pattern.shape[-1]
    L = periods.long()[:, None, None]  # [B, 1, 1]
    i = torch.arange(T)[None, :, None]
    j = torch.arange(T)[None, None, :]
    back = i + 1 - j  # = kL for the token after the k-th copy back
    mask = (i >= L) & (back >= L) & (back % L == 0)  # [B, T, T]; back >= L implies j <= i
    per_query = (pattern * mask[:, None].to(pattern.dtype)).sum(-1)  # [B, H, T]
    rows = (i[..., 0] >= L[..., 0]).to(pattern.dtype)[:, None, :]  # [B, 1, T]
    return (per_query * rows).sum((0, 2)) / rows.sum((0, 2))  # NaN where no query qualifies, as the others


def head_scores(pattern: torch.Tensor, periods: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-head scores of one block: pattern [B, H, T, T], periods [B] -> {name: [H]}.

    prev_token: A[i, i-1], i >= 1.   induction: A[i, i+1-L], i >= L.   induction_any: see below.
    duplicate: A[i, i-L], i >= L.    first_token: A[i, 0], i >= 1.     self: A[i, i], i >= 1.
    """
    B = pattern.shape[0]
    ones = torch.ones(B, dtype=torch.long)
    zeros = torch.zeros(B, dtype=torch.long)
    L = periods.long()
    T = pattern.shape[-1]
    first_col = pattern[..., 1:, 0].mean((0, 2)) if T > 1 else torch.full(pattern.shape[1:2], float("nan"))
    return {
        "prev_token": _diagonal_mean(pattern, ones, ones),
        "induction": _diagonal_mean(pattern, L - 1, L),
        "induction_any": induction_any(pattern, L),
        "duplicate": _diagonal_mean(pattern, L, L),
        "first_token": first_col,
        "self": _diagonal_mean(pattern, zeros, ones),
    }


def offset_mass(pattern: torch.Tensor, k: int) -> torch.Tensor:
    """Mean A[i, i-k] over queries i >= k: pattern [B, H, T, T] -> [H]."""
    B = pattern.shape[0]
    kk = torch.full((B,), k, dtype=torch.long)
    return _diagonal_mean(pattern, kk, kk)


def offset_profile(pattern: torch.Tensor) -> torch.Tensor:
    """offset_mass for every offset k = 0..T-1 at once: pattern [B, H, T, T] -> [H, T]."""
    T = pattern.shape[-1]
    return torch.stack([pattern.diagonal(-k, dim1=-2, dim2=-1).mean((0, 2)) for k in range(T)], -1)


def head_score_table(patterns: list[torch.Tensor], periods: torch.Tensor) -> pd.DataFrame:
    """One row per head: label, layer and head (0-based, core.model.symbols), and every period score.

    patterns[l] [B, H, T, T] for each block; periods [B].
    """
    rows = []
    for layer, pattern in enumerate(patterns):
        scores = head_scores(pattern, periods)
        for h in range(pattern.shape[1]):
            rows.append({"layer": layer, "head": h,
                         **{name: float(scores[name][h]) for name in PERIOD_SCORES}})
    import pandas as pd

    return with_labels(pd.DataFrame(rows, columns=["layer", "head", *PERIOD_SCORES]))


INTERVAL_SCORES = ("prev_token", "induction_any")  # the scores score_intervals gives an interval


def score_intervals(patterns: list[torch.Tensor], periods: torch.Tensor) -> pd.DataFrame:
    """A 95% bootstrap interval over the sequences for the INTERVAL_SCORES (core.reading.bootstrap): each
    sequence's own score (one row of the batch), resampled with replacement and pooled as head_scores
    pools them (each sequence weighted by how many queries it has). patterns[l] [B, H, T, T]; periods [B].
    Rows: label, layer, head, and <name>_low, <name>_high for each name."""
    B = len(periods)
    T = patterns[0].shape[-1] if patterns else 0
    weights = {"prev_token": torch.full((B,), T - 1.0),  # queries i >= 1
               "induction_any": (T - periods.long()).clamp_min(0).double()}  # queries i >= L
    rows = []
    for layer, pattern in enumerate(patterns):
        per = [head_scores(pattern[b:b + 1], periods[b:b + 1]) for b in range(B)]
        row = {}
        for name in INTERVAL_SCORES:
            v = torch.stack([p[name] for p in per]).double()  # [B, H]
            w = (weights[name].double()[:, None].expand_as(v) * torch.isfinite(v)).numpy()
            v = torch.nan_to_num(v).numpy()

            def pooled(idx, v=v, w=w):  # [N, B] -> [H, N]
                return ((v[idx] * w[idx]).sum(1) / w[idx].sum(1)).T

            with np.errstate(invalid="ignore", divide="ignore"):
                row[name] = bootstrap.sequence_interval(pooled, B)
        for h in range(pattern.shape[1]):
            out = {"layer": layer, "head": h}
            for name in INTERVAL_SCORES:
                out[f"{name}_low"], out[f"{name}_high"] = float(row[name][0][h]), float(row[name][1][h])
            rows.append(out)
    cols = ["layer", "head", *(f"{n}_{e}" for n in INTERVAL_SCORES for e in ("low", "high"))]
    import pandas as pd

    return with_labels(pd.DataFrame(rows, columns=cols))


def detector_table(patterns: list[torch.Tensor], tokens: torch.Tensor) -> pd.DataFrame:
    """One row per head: the token-based detector scores (core.reading.detectors) on one sequence.

    patterns[l] [H, T, T] or [1, H, T, T]; tokens [T] or [1, T].
    """
    tokens = tokens.reshape(-1)
    rows = []
    for layer, pattern in enumerate(patterns):
        pattern = pattern.reshape(-1, *pattern.shape[-2:])  # [H, T, T]
        scores = detector_scores(pattern, tokens)
        for h in range(pattern.shape[0]):
            rows.append({"layer": layer, "head": h,
                         **{name: float(scores[name][h]) for name in DETECTORS}})
    import pandas as pd

    return with_labels(pd.DataFrame(rows, columns=["layer", "head", *DETECTORS]))


def offset_table(patterns: list[torch.Tensor], max_offset: int | None = None) -> pd.DataFrame:
    """Tidy offset-mass profile: rows {label, layer, head, offset, mass} for offsets 0..max_offset."""
    rows = []
    for layer, pattern in enumerate(patterns):
        prof = offset_profile(pattern)
        K = prof.shape[1] if max_offset is None else min(prof.shape[1], max_offset + 1)
        for h in range(prof.shape[0]):
            for k in range(K):
                rows.append((layer, h, k, float(prof[h, k])))
    import pandas as pd

    return with_labels(pd.DataFrame(rows, columns=["layer", "head", "offset", "mass"]))
