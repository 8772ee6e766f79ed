"""Three metrics for the same patching experiment side by side (Heimersheim & Nanda, 2024, "How to use and
interpret activation patching"): on the second-copy targets L+1 <= t < 2L of core.causal.patching,

- logprob:    the right token's log-probability (the page's M);
- logit_diff: the right token's logit minus the logit of the token the corrupted run's first copy puts
              there (corrupted[t - L], what copying from the corrupted context would give);
- prob:       the right token's probability.

Why prefer one: the logit difference is linear in the final residual stream, so the effects of heads that
write straight to the logits add up, and it measures the right answer against the wrong one the
corruption offers. The log-probability also moves when other tokens' logits move; the probability
saturates near 0 and 1, so a patch can matter yet barely move it (or the other way round).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.causal.patching import CHUNK_POSITIONS, PatchRuns, target_mask
from core.model.symbols import with_labels
from core.model.tinycharlm import TinyCharLM

METRICS = ("logprob", "logit_diff", "prob")


def metric_values(logits: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor,
                  periods: torch.Tensor) -> dict[str, torch.Tensor]:
    """logits [..., B, T, V] -> {metric: [...]}, each the mean over every second-copy target of every
    sequence. ValueError when the token batches' shapes differ."""
    if clean.shape != corrupted.shape or logits.shape[-3:-1] != clean.shape:
        raise ValueError(f"tokens {tuple(clean.shape)} and {tuple(corrupted.shape)} must match the logits' "
                         f"[B, T] {tuple(logits.shape[-3:-1])}.")
    mask = target_mask(periods, clean.shape[1])
    b, i = mask.nonzero(as_tuple=True)  # target t = i + 1, predicted at position i
    picked = logits[..., b, i, :]  # [..., N, V]
    right = clean[b, i + 1].expand(*picked.shape[:-1])[..., None]
    wrong = corrupted[b, i + 1 - periods[b]].expand(*picked.shape[:-1])[..., None]
    logp = picked.log_softmax(-1).gather(-1, right)[..., 0]
    diff = (picked.gather(-1, right) - picked.gather(-1, wrong))[..., 0]
    return {"logprob": logp.mean(-1), "logit_diff": diff.mean(-1), "prob": logp.exp().mean(-1)}


@torch.no_grad()
def head_effects_by_metric(model: TinyCharLM, runs: PatchRuns) -> pd.DataFrame:
    """Patching (1), each head's clean output at every position into the corrupted run, measured with each
    metric. Rows: label, layer, head, metric, clean, corrupted, patched, patch_effect ((patched - corrupted)
    / (clean - corrupted), NaN where the two runs do not differ)."""
    B, T = runs.clean.shape
    def measured(tokens):
        out = metric_values(model.run_with_hooks(tokens)[0], runs.clean, runs.corrupted, runs.periods)
        return {k: float(v) for k, v in out.items()}

    base, corr = measured(runs.clean), measured(runs.corrupted)
    per = max(1, CHUNK_POSITIONS // (B * T))
    rows = []
    for layer in range(model.cfg.n_layers):
        delta = (runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]).transpose(0, 1)
        streams = runs.corrupted_cache["resid"][layer + 1][None] + delta  # [H, B, T, D]
        vals = {k: [] for k in METRICS}
        for lo in range(0, streams.shape[0], per):
            out = metric_values(model.run_with_hooks(resid=streams[lo:lo + per], start=layer + 1)[0], runs.clean,
                                runs.corrupted, runs.periods)
            for k in METRICS:
                vals[k].append(out[k])
        for k in METRICS:
            for h, v in enumerate(torch.cat(vals[k]).tolist()):
                gap = base[k] - corr[k]
                rows.append({"layer": layer, "head": h, "metric": k, "clean": base[k], "corrupted": corr[k],
                             "patched": v, "patch_effect": (v - corr[k]) / gap if gap else np.nan})
    cols = ["layer", "head", "metric", "clean", "corrupted", "patched", "patch_effect"]
    return with_labels(pd.DataFrame(rows, columns=cols))
