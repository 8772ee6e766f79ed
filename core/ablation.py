"""Knocking heads out and measuring what changes."""
from __future__ import annotations

import torch

from .metrics import copy_metrics
from .model import Ablation, TinyCharLM


@torch.no_grad()
def ablated_metrics(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                    heads: dict[tuple[int, int], str] | None = None) -> dict[str, float]:
    """Copy metrics with `heads` ({(layer, head): "zero" | "mean"}) ablated; none ablated if empty."""
    logits, _ = model.run_with_cache(tokens, Ablation(dict(heads or {})))
    return copy_metrics(logits, tokens, periods)


@torch.no_grad()
def single_head_ablation(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                         mode: str = "zero") -> list[dict]:
    """Each head ablated alone: rows {layer, head, loss_later_delta, acc_later_delta} (ablated - clean)."""
    clean = ablated_metrics(model, tokens, periods)
    rows = []
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            m = ablated_metrics(model, tokens, periods, {(layer, head): mode})
            rows.append({
                "layer": layer, "head": head,
                "loss_later_delta": m["loss_later_copies"] - clean["loss_later_copies"],
                "acc_later_delta": m["acc_later_copies"] - clean["acc_later_copies"],
            })
    return rows
