"""Token-based head detectors for any token sequence (no period needed), as TransformerLens does.

Each detector is a 0/1 matrix M [T, T] over (query i, key j) saying where an archetypal head would
look. A head's score is TransformerLens's `detect_head` score (error_measure "mul"): the share of
*all* its attention that falls on M's ones,

    score = sum_ij A[i, j] M[i, j] / sum_ij A[i, j],

so rows where the archetype has nothing to find (e.g. the first copy, for induction) count with
score 0, and a perfect head scores below 1 when such rows exist. `exclude_bos` and
`exclude_current_token` zero column 0 / the diagonal of A first, as in TransformerLens.
Pass rows="target" to average only over query rows that have at least one 1 in M instead.

Masks (TransformerLens's, plus first-token sink and self): previous_token j = i-1;
duplicate_token j < i with token_j = token_i; induction 1 <= j <= i with token_{j-1} = token_i
(the duplicate mask shifted one to the right); first_token j = 0 for i >= 1; self j = i.

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch



DETECTORS = ("previous_token", "duplicate_token", "induction", "first_token", "self")
SCORE_ROWS = ("target", "all")  # average over the rows with a target, or over the whole pattern


def detector_mask(name: str, tokens: torch.Tensor) -> torch.Tensor:
    """The 0/1 target pattern [T, T] (bool, causal) of detector `name` on tokens [T]
    (or [..., T, T] for a batch of sequences tokens [..., T])."""
    import torch

    T = tokens.shape[-1]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    same = tokens[..., :, None] == tokens[..., None, :]  # token_i == token_j
    if name == "previous_token":
        return (j == i - 1).expand_as(same)
    if name == "duplicate_token":
        return same & (j < i)
    if name == "induction":
        # key j follows an earlier occurrence of the query's token: token_{j-1} == token_i, j <= i
        prev_same = torch.zeros_like(same)
        prev_same[..., :, 1:] = same[..., :, :-1]
        return prev_same & (j <= i) & (j >= 1)
    if name == "first_token":
        return ((j == 0) & (i >= 1)).expand_as(same)
    if name == "self":
        return (j == i).expand_as(same)
    raise ValueError(f"unknown detector {name!r}; choose one of {', '.join(DETECTORS)}.")


def detector_score(pattern: torch.Tensor, mask: torch.Tensor, rows: str = "all",
                   exclude_bos: bool = False, exclude_current_token: bool = False) -> torch.Tensor:
    """Share of attention on mask: pattern [..., T, T], mask [T, T] (or broadcastable, e.g. [B, 1, T, T]
    for a pattern [B, H, T, T] of B sequences) -> [...].

    rows="all" is TransformerLens's score (sum(A * M) / sum(A) over the whole matrix);
    rows="target" averages each qualifying row's share (NaN if no row qualifies).
    """
    import torch

    if rows not in SCORE_ROWS:
        raise ValueError(f"rows must be 'all' or 'target', got {rows!r}.")
    A = pattern
    if exclude_bos or exclude_current_token:
        A = A.clone()
        if exclude_bos:
            A[..., :, 0] = 0.0
        if exclude_current_token:
            A.diagonal(dim1=-2, dim2=-1).zero_()
    M = mask.to(A.dtype)
    if rows == "all":
        return (A * M).sum((-2, -1)) / A.sum((-2, -1)).clamp_min(1e-12)
    if mask.dim() != 2:
        raise ValueError("rows='target' takes one sequence's mask [T, T].")
    keep = mask.any(-1)
    if not keep.any():
        return torch.full(A.shape[:-2], float("nan"))
    on_mask = (A * M).sum(-1)[..., keep]
    total = A.sum(-1)[..., keep]
    return (on_mask / total.clamp_min(1e-12)).mean(-1)


def detector_scores(pattern: torch.Tensor, tokens: torch.Tensor, **kwargs) -> dict[str, torch.Tensor]:
    """Every detector on one sequence: pattern [..., T, T] (e.g. [H, T, T]), tokens [T] -> {name: [...]}.
    For B sequences at once pass pattern [B, H, T, T] and tokens [B, 1, T] (rows="all" only).

    Keyword arguments go to detector_score (rows, exclude_bos, exclude_current_token).
    """
    return {name: detector_score(pattern, detector_mask(name, tokens), **kwargs) for name in DETECTORS}
