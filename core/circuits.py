"""Weight-level views of a head: the QK and OV circuits and the OV copying matrix."""
from __future__ import annotations

import torch

from .model import TinyCharLM


@torch.no_grad()
def W_OV(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    """W_V[h] W_O[h]: [D, D], rank <= d_head (row vector convention: x -> x W_OV)."""
    b = model.blocks[layer]
    return b.W_V[head] @ b.W_O[head]


@torch.no_grad()
def ov_copying_matrix(model: TinyCharLM, layer: int, head: int | None = None) -> torch.Tensor:
    """C = W_E W_V W_O W_E^T: [V, V], row = attended token a, column = boosted logit b.

    head=None sums the OV circuits of all the block's heads.
    """
    heads = range(model.cfg.n_heads) if head is None else [head]
    ov = sum(W_OV(model, layer, h) for h in heads)
    return model.W_E @ ov @ model.W_E.T


def ov_diag_top1(C: torch.Tensor) -> float:
    """Share of rows whose largest entry is on the diagonal (chance 1/V)."""
    return float((C.argmax(-1) == torch.arange(C.shape[0])).float().mean())


def ov_copying_eig(C: torch.Tensor) -> float:
    """Re(sum of eigenvalues) / sum |eigenvalues|: +1 for pure copying, -1 for anti-copying."""
    eig = torch.linalg.eigvals(C.double())
    total = eig.abs().sum()
    return float(eig.sum().real / total) if total > 0 else 0.0
