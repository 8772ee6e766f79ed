"""Attention capture on any token sequence: raw and value-weighted patterns, per block and head.

A *raw* pattern A[i, j] is how much query i attends to key j. The *value-weighted* pattern scales each
entry by the norm of what key j actually writes into the stream through the head, ||v_j W_O[h]||
(the view Elhage et al. 2021 use for their attention figures): a position that is attended to but
writes almost nothing then fades out. Rows are renormalised to sum to 1 so both views share one scale.

Typed text becomes tokens in core.model.symbols (encode_text, ALPHABET).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.model.task import TaskConfig, sample_batch
from core.model.tinycharlm import TinyCharLM


@dataclass
class AttentionCapture:
    """Patterns of one or more sequences through every block.

    tokens [B, T]; pattern[l] [B, H, T, T] (query i, key j); write_norm[l] [B, H, T] = ||v_j W_O[h]||;
    logits [B, T, V]; periods [B] (long) when the sequences come from the task, else None.
    """

    tokens: torch.Tensor
    pattern: list[torch.Tensor]
    write_norm: list[torch.Tensor]
    logits: torch.Tensor
    periods: torch.Tensor | None = None

    @property
    def n_layers(self) -> int:
        return len(self.pattern)

    def weighted(self, layer: int, normalize: bool = True) -> torch.Tensor:
        """Value-weighted pattern of block `layer`: [B, H, T, T]."""
        return value_weighted(self.pattern[layer], self.write_norm[layer], normalize)

    def view(self, layer: int, weighted: bool = False) -> torch.Tensor:
        """Raw or (row-normalised) value-weighted pattern [B, H, T, T]."""
        return self.weighted(layer) if weighted else self.pattern[layer]


def value_weighted(pattern: torch.Tensor, write_norm: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """A[i, j] * ||v_j W_O||: pattern [..., T, T], write_norm [..., T] -> [..., T, T].

    With normalize, each query row is divided by its sum (rows whose sum is 0 stay 0).
    """
    w = pattern * write_norm.unsqueeze(-2)
    if normalize:
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-12)
    return w


@torch.no_grad()
def capture(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor | None = None) -> AttentionCapture:
    """Run `model` on tokens [T] or [B, T] and keep every block's patterns and write norms."""
    if tokens.dim() == 1:
        tokens = tokens[None]
    logits, cache = model.run_with_cache(tokens)
    norms = []
    for layer, v in enumerate(cache["v"]):
        W_O = model.blocks[layer].W_O  # [H, dh, D]
        norms.append(torch.einsum("bhtd,hdm->bhtm", v, W_O).norm(dim=-1))
    return AttentionCapture(tokens, cache["pattern"], norms, logits, periods)


def task_sequences(task: TaskConfig, vocab_size: int, n: int, period: int | None = None,
                   seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n task sequences with a fixed seed: tokens [n, T], periods [n]."""
    g = torch.Generator().manual_seed(seed)
    return sample_batch(task, n, vocab_size, generator=g, period=period)


