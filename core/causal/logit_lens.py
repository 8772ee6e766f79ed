"""The logit lens: the residual stream after each block read through the unembedding W_Eᵀ.

TinyCharLM has no final LayerNorm, so the lens on the last stream is exactly the model's logits; on
earlier streams it shows what the model would predict if the blocks above added nothing. Stage 0 is
the embedding itself (the direct path W_E[x] W_Eᵀ), stage l the stream after block l.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.model.hooks import hook_name
from core.model.task import copy_masks
from core.model.tinycharlm import TinyCharLM

COPIES = ("first", "second", "later")


def stage_labels(n_layers: int) -> list[str]:
    return ["embedding"] + [f"after block {l}" for l in range(1, n_layers + 1)]


@torch.no_grad()
def lens(model: TinyCharLM, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens [B, T] -> (prob, rank) of the right token, each [n_layers + 1, B, T - 1] over targets
    t = 1..T-1 read at position t-1. rank 1 = the top prediction (ties counted in the token's favour)."""
    L = model.cfg.n_layers
    names = [hook_name(l, "hook_resid_pre") for l in range(L)] + ["hook_resid_final"]
    _, cache = model.run_with_hooks(tokens, cache=names)
    target = tokens[:, 1:]
    probs, ranks = [], []
    for h in (cache[n] for n in names):
        logits = h[:, :-1] @ model.W_E.T  # [B, T-1, V]
        right = logits.gather(-1, target[..., None])
        probs.append(logits.softmax(-1).gather(-1, target[..., None])[..., 0])
        ranks.append(1 + (logits > right).sum(-1))
    return torch.stack(probs), torch.stack(ranks)


def lens_sequence(model: TinyCharLM, tokens: torch.Tensor) -> pd.DataFrame:
    """One sequence tokens [T]: rows stage, stage_label, position (the query, 0-based), target (t), prob, rank."""
    prob, rank = lens(model, tokens[None])
    labels = stage_labels(model.cfg.n_layers)
    rows = [{"stage": s, "stage_label": labels[s], "position": i, "target": i + 1,
             "prob": float(prob[s, 0, i]), "rank": int(rank[s, 0, i])}
            for s in range(prob.shape[0]) for i in range(prob.shape[2])]
    return pd.DataFrame(rows)


def lens_by_copy(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor) -> pd.DataFrame:
    """Mean probability and mean rank of the right token per stage and copy (core.model.task.copy_masks' first, second
    and later copies) over a batch tokens [B, T], periods [B]. Rows: stage, stage_label, copy, prob, rank, n."""
    prob, rank = lens(model, tokens)
    masks = copy_masks(periods, tokens.shape[1])
    labels = stage_labels(model.cfg.n_layers)
    rows = []
    for s in range(prob.shape[0]):
        for copy in COPIES:
            m = masks[copy]
            n = int(m.sum())
            rows.append({"stage": s, "stage_label": labels[s], "copy": copy,
                         "prob": float(prob[s][m].mean()) if n else float("nan"),
                         "rank": float(rank[s][m].float().mean()) if n else float("nan"), "n": n})
    return pd.DataFrame(rows)
