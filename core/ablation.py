"""Knocking heads out and measuring what changes.

Modes: "zero" replaces a head's output (A v) W_O by 0; "mean" replaces it, at each position, by its
mean over the evaluation batch at that position (so the head still adds its typical, input-independent
contribution, and only the information it carries about this sequence is removed).
"""
from __future__ import annotations

import pandas as pd
import torch

from .metrics import copy_metrics
from .model import Ablation, TinyCharLM

MODES = ("zero", "mean")


def _check(model: TinyCharLM, heads: dict) -> None:
    for (layer, head), mode in heads.items():
        if not (0 <= layer < model.cfg.n_layers and 0 <= head < model.cfg.n_heads):
            raise ValueError(f"no head {head} in block {layer + 1}: this model has {model.cfg.n_layers} "
                             f"block(s) of {model.cfg.n_heads} heads.")
        if mode not in MODES:
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}.")


@torch.no_grad()
def ablated_metrics(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                    heads: dict[tuple[int, int], str] | None = None) -> dict[str, float]:
    """Copy metrics with `heads` ({(layer, head): "zero" | "mean"}) ablated; none ablated if empty.

    tokens [B, T], periods [B]. Mean ablation uses the per-position mean over this batch.
    """
    heads = dict(heads or {})
    _check(model, heads)
    logits, _ = model.run_with_cache(tokens, Ablation(heads))
    return copy_metrics(logits, tokens, periods)


@torch.no_grad()
def compare_ablation(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                     heads: dict[tuple[int, int], str]) -> pd.DataFrame:
    """Before/after table: rows = metric name, columns clean, ablated, delta (ablated - clean)."""
    clean = ablated_metrics(model, tokens, periods)
    after = ablated_metrics(model, tokens, periods, heads)
    df = pd.DataFrame({"clean": clean, "ablated": after})
    df["delta"] = df["ablated"] - df["clean"]
    return df


def _rest_of_model(model: TinyCharLM, h: torch.Tensor, start: int) -> torch.Tensor:
    """Run blocks start.. on stream h [B, T, D] and unembed: -> logits [B, T, V].

    Uses the same per-head path as run_with_cache, so an ablation that changes nothing gives
    exactly the clean logits."""
    for layer in range(start, model.cfg.n_layers):
        h = model.blocks[layer].forward_with_cache(h, layer)[0]
    return h @ model.W_E.T


@torch.no_grad()
def single_head_ablation(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                         mode: str = "zero") -> list[dict]:
    """Each head ablated alone: rows {layer, head, loss_later_delta, acc_later_delta} (ablated - clean).

    One cached clean run; each ablation edits the stream after its block and reruns only the blocks
    above it (the same numbers as a full ablated run, see tests).
    """
    if mode not in MODES:
        raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}.")
    logits, cache = model.run_with_cache(tokens)
    clean = copy_metrics(logits, tokens, periods)
    rows = []
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            out = cache["head_out"][layer][:, head]  # [B, T, D]
            replacement = out.mean(0, keepdim=True) if mode == "mean" else torch.zeros_like(out[:1])
            h = cache["resid"][layer + 1] - out + replacement
            m = copy_metrics(_rest_of_model(model, h, layer + 1), tokens, periods)
            rows.append({
                "layer": layer, "head": head,
                "loss_later_delta": m["loss_later_copies"] - clean["loss_later_copies"],
                "acc_later_delta": m["acc_later_copies"] - clean["acc_later_copies"],
            })
    return rows


def ablation_table(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor,
                   mode: str = "zero") -> pd.DataFrame:
    """single_head_ablation as a tidy DataFrame: layer, block (1-based), head, loss_later_delta,
    acc_later_delta (one row per head; pivot on block x head for the heatmap)."""
    df = pd.DataFrame(single_head_ablation(model, tokens, periods, mode),
                      columns=["layer", "head", "loss_later_delta", "acc_later_delta"])
    df.insert(1, "block", df["layer"] + 1)
    return df
