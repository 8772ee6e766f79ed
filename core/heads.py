"""Head scores from attention patterns (DESIGN.md "Metrics").

Every score averages one entry per (sequence, query position) over the batch and the query
positions the definition names; a pattern is [B, H, T, T] with query i on axis -2, key j on -1.
"""
from __future__ import annotations

import torch

PERIOD_SCORES = ("prev_token", "induction", "duplicate", "first_token", "self")


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


def head_scores(pattern: torch.Tensor, periods: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-head scores of one block: pattern [B, H, T, T], periods [B] -> {name: [H]}.

    prev_token: A[i, i-1], i >= 1.   induction: A[i, i+1-L], i >= L.   duplicate: A[i, i-L], i >= L.
    first_token: A[i, 0], i >= 1.    self: A[i, i], all i.
    """
    B = pattern.shape[0]
    zeros, ones = torch.zeros(B, dtype=torch.long), torch.ones(B, dtype=torch.long)
    L = periods.long()
    T = pattern.shape[-1]
    first_col = pattern[..., 1:, 0].mean((0, 2)) if T > 1 else torch.full(pattern.shape[1:2], float("nan"))
    return {
        "prev_token": _diagonal_mean(pattern, ones, ones),
        "induction": _diagonal_mean(pattern, L - 1, L),
        "duplicate": _diagonal_mean(pattern, L, L),
        "first_token": first_col,
        "self": pattern.diagonal(dim1=-2, dim2=-1).mean((0, 2)),
    }


def offset_mass(pattern: torch.Tensor, k: int) -> torch.Tensor:
    """Mean A[i, i-k] over queries i >= k: pattern [B, H, T, T] -> [H]."""
    B = pattern.shape[0]
    kk = torch.full((B,), k, dtype=torch.long)
    return _diagonal_mean(pattern, kk, kk)
