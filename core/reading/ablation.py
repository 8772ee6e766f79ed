"""Knocking heads out and measuring what changes.

Modes: "zero" replaces a head's output (A v) W_O by 0; "mean" replaces it, at each position, by its
mean over the evaluation batch at that position (so the head still adds its typical, input-independent
contribution, and only the information it carries about this sequence is removed). The model's own
fused forward (AttentionBlock.forward's `ablate`) knocks the heads out; tests/test_ablation.py checks
it against a per-head reference.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.model.metrics import copy_metrics
from core.model.tinycharlm import TinyCharLM

MODES = ("zero", "mean")


def _check(model: TinyCharLM, heads: dict) -> None:
    for (layer, head), mode in heads.items():
        if not (0 <= layer < model.cfg.n_layers and 0 <= head < model.cfg.n_heads):
            raise ValueError(f"no head {head} in block {layer + 1}: this model has {model.cfg.n_layers} "
                             f"block(s) of {model.cfg.n_heads} heads.")
        if mode not in MODES:
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}.")


def _block_forward(model: TinyCharLM, layer: int, h: torch.Tensor, heads: dict) -> torch.Tensor:
    """Block `layer` on h [B, T, D] with its heads among `heads` {(layer, head): mode} knocked out."""
    return model.blocks[layer](h, {hd: mode for (l, hd), mode in heads.items() if l == layer})


def _forward_from(model: TinyCharLM, h: torch.Tensor, start: int, heads: dict) -> torch.Tensor:
    """Blocks start.. on the stream h [B, T, D] entering block `start`, then unembed: logits [B, T, V]."""
    for layer in range(start, model.cfg.n_layers):
        h = _block_forward(model, layer, h, heads)
    return h @ model.W_E.T


@torch.no_grad()
def ablated_logits(model: TinyCharLM, tokens: torch.Tensor,
                   heads: dict[tuple[int, int], str] | None = None) -> torch.Tensor:
    """Logits [B, T, V] of tokens [B, T] with `heads` ({(layer, head): "zero" | "mean"}) ablated.

    """
    heads = dict(heads or {})
    _check(model, heads)
    return _forward_from(model, model.W_E[tokens], 0, heads)


@torch.no_grad()
def ablated_metrics(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                    heads: dict[tuple[int, int], str] | None = None) -> dict[str, float]:
    """Copy metrics with `heads` ({(layer, head): "zero" | "mean"}) ablated; none ablated if empty.

    tokens [B, T], periods [B]. Mean ablation uses the per-position mean over this batch.
    """
    return copy_metrics(ablated_logits(model, tokens, heads), tokens, periods)


@torch.no_grad()
def compare_ablation(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                     heads: dict[tuple[int, int], str]) -> pd.DataFrame:
    """Before/after table: rows = metric name, columns clean, ablated, delta (ablated - clean)."""
    clean = ablated_metrics(model, tokens, periods)
    after = ablated_metrics(model, tokens, periods, heads) if heads else clean
    df = pd.DataFrame({"clean": clean, "ablated": after})
    df["delta"] = df["ablated"] - df["clean"]
    return df


@torch.no_grad()
def single_head_ablation(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                         mode: str = "zero") -> list[dict]:
    """Each head ablated alone: rows {layer, head, loss_later_delta, acc_later_delta} (ablated - clean).

    The clean streams entering each block are computed once; each ablation reruns only its own block
    and those above it.
    """
    if mode not in MODES:
        raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}.")
    resid = [model.W_E[tokens]]
    for layer in range(model.cfg.n_layers):
        resid.append(_block_forward(model, layer, resid[-1], {}))
    clean = copy_metrics(resid[-1] @ model.W_E.T, tokens, periods)
    rows = []
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            m = copy_metrics(_forward_from(model, resid[layer], layer, {(layer, head): mode}), tokens, periods)
            rows.append({
                "layer": layer, "head": head,
                "loss_later_delta": m["loss_later_copies"] - clean["loss_later_copies"],
                "acc_later_delta": m["acc_later_copies"] - clean["acc_later_copies"],
            })
    return rows


def ablation_table(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                   mode: str = "zero") -> pd.DataFrame:
    """single_head_ablation as a tidy DataFrame: label, layer, head (core.model.symbols), loss_later_delta,
    acc_later_delta (one row per head; pivot on layer x head for the heatmap)."""
    df = pd.DataFrame(single_head_ablation(model, tokens, periods, mode),
                      columns=["layer", "head", "loss_later_delta", "acc_later_delta"])
    from core.model.symbols import with_labels  # here, not at the top: this module's imports are edited elsewhere

    return with_labels(df)
