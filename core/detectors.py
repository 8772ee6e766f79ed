"""Token-based head detectors for any token sequence (no period needed), as TransformerLens does.

Each detector is a 0/1 matrix M [T, T] over (query i, key j) saying where an archetypal head would
look; a head's score is the share of its attention that falls on M's ones:
sum(A * M) / sum(A) over the query rows that have at least one 1 in M (rows with nothing to find
are left out, so a score is never diluted by positions where the archetype has no target).
"""
from __future__ import annotations

import torch

DETECTORS = ("previous_token", "duplicate_token", "induction", "first_token", "self")


def detector_mask(name: str, tokens: torch.Tensor) -> torch.Tensor:
    """The 0/1 target pattern [T, T] (bool, causal) of detector `name` on tokens [T]."""
    T = tokens.shape[0]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    same = tokens[:, None] == tokens[None, :]  # token_i == token_j
    if name == "previous_token":
        return j == i - 1
    if name == "duplicate_token":
        return same & (j < i)
    if name == "induction":
        # key j follows an earlier occurrence of the query's token: token_{j-1} == token_i, j <= i
        prev_same = torch.zeros(T, T, dtype=torch.bool)
        prev_same[:, 1:] = same[:, :-1]
        return prev_same & (j <= i) & (j >= 1)
    if name == "first_token":
        return (j == 0) & (i >= 1)
    if name == "self":
        return j == i
    raise ValueError(f"unknown detector {name!r}; choose one of {', '.join(DETECTORS)}.")


def detector_score(pattern: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Share of attention on mask: pattern [..., T, T], mask [T, T] -> [...]; NaN if no row qualifies."""
    rows = mask.any(-1)
    if not rows.any():
        return torch.full(pattern.shape[:-2], float("nan"))
    on_mask = (pattern * mask).sum(-1)[..., rows]
    total = pattern.sum(-1)[..., rows]
    return (on_mask / total.clamp_min(1e-12)).mean(-1)


def detector_scores(pattern: torch.Tensor, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every detector on one sequence: pattern [..., T, T] (e.g. [H, T, T]), tokens [T] -> {name: [...]}."""
    return {name: detector_score(pattern, detector_mask(name, tokens)) for name in DETECTORS}
