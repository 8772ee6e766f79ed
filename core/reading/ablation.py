"""Knocking heads out and measuring what changes.

Modes: "zero" replaces a head's output (A v) W_O by 0; "mean" replaces it, at each position, by its
mean over the evaluation batch at that position (so the head still adds its typical, input-independent
contribution, and only the information it carries about this sequence is removed). An ablation is an
edit on the heads' mixed values (hook_z) of TinyCharLM.run_with_hooks; tests/test_ablation.py checks
it against a per-head reference.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.model.hooks import hook_name
from core.model.metrics import copy_metrics
from core.model.symbols import head_label, with_labels
from core.model.tinycharlm import TinyCharLM

MODES = ("zero", "mean")


def _check(model: TinyCharLM, heads: dict) -> None:
    for (layer, head), mode in heads.items():
        if not (0 <= layer < model.cfg.n_layers and 0 <= head < model.cfg.n_heads):
            raise ValueError(f"no head {head_label(layer, head)} in this model: it has {model.cfg.n_layers} "
                             f"block(s) of {model.cfg.n_heads} heads.")
        if mode not in MODES:
            raise ValueError(f"ablation mode must be 'zero' or 'mean', got {mode!r}.")


def ablation_edits(heads: dict[tuple[int, int], str]) -> dict:
    """The edits of run_with_hooks that knock `heads` {(layer, head): mode} out, on each block's hook_z
    [*, B, H, T, d_head]: a head's output z_h W_O[h] is linear in z_h, so zeroing z_h (or replacing it by
    its mean over the batch B at each position) zero- (or mean-) ablates the head."""
    by_layer: dict[int, dict[int, str]] = {}
    for (layer, head), mode in heads.items():
        by_layer.setdefault(layer, {})[head] = mode

    def knock(mine):
        def edit(z):
            z = z.clone()
            for hd, mode in mine.items():
                z[..., hd, :, :] = 0.0 if mode == "zero" else z[..., hd, :, :].mean(-3, keepdim=True)
            return z
        return edit

    return {hook_name(layer, "attn.hook_z"): knock(mine) for layer, mine in by_layer.items()}


@torch.no_grad()
def ablated_logits(model: TinyCharLM, tokens: torch.Tensor,
                   heads: dict[tuple[int, int], str] | None = None) -> torch.Tensor:
    """Logits [B, T, V] of tokens [B, T] with `heads` ({(layer, head): "zero" | "mean"}) ablated."""
    heads = dict(heads or {})
    _check(model, heads)
    return model.run_with_hooks(tokens, edits=ablation_edits(heads))[0]


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
    L = model.cfg.n_layers
    logits, cache = model.run_with_hooks(tokens, cache=[hook_name(l, "hook_resid_pre") for l in range(L)])
    clean = copy_metrics(logits, tokens, periods)
    rows = []
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            logits = model.run_with_hooks(resid=cache[hook_name(layer, "hook_resid_pre")], start=layer,
                                          edits=ablation_edits({(layer, head): mode}))[0]
            m = copy_metrics(logits, tokens, periods)
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

    return with_labels(df)
