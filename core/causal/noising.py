"""Beside denoising (core.causal.patching: a clean piece into the corrupted run, does it suffice?), the
two measurements Heimersheim & Nanda (2024) and Wang et al. (2022) start from, on the same PatchRuns:

- noising one head: its corrupted output (every position) into the clean run, every block above
  rerun. Is the head needed? Effect near 1 = nothing lost, near 0 = all of the gap lost.
- direct effect (path patching into the logits, by noising; Wang et al.'s first step): the head's
  corrupted output reaches the logits only along its direct path (added to the clean final stream,
  no block above rerun: the model run from its unembedding, start = n_layers). Effect near 1 = its
  direct contribution does not matter.
- attribution patching (Nanda, 2023; Syed et al., 2023): the first-order estimate of patching (3),
  each head's clean output at one position into the corrupted run, from one backward pass:
  (clean - corrupted output) . dM/d(output) at the corrupted run, divided by M(clean) - M(corrupted).

Every effect uses the patch effect of core.causal.patching, (M - M(corrupted)) / (M(clean) - M(corrupted)).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.causal.patching import PatchRuns, _metrics_of_streams, effect_interval, metric, metric_by_seq
from core.model.hooks import hook_name
from core.model.tinycharlm import TinyCharLM


@torch.no_grad()
def head_noise_effects(model: TinyCharLM, runs: PatchRuns) -> pd.DataFrame:
    """Rows: layer, head (0-based), noise_effect (total: corrupted output into the clean run, above
    rerun), noise_low, noise_high (95% bootstrap), direct_effect (into the logits only), direct_low,
    direct_high."""
    rows, seqs, direct_seqs = [], [], []
    final = runs.clean_cache["resid"][-1]
    for layer in range(model.cfg.n_layers):
        clean = runs.clean_cache["head_out"][layer].transpose(0, 1)  # [H, B, T, D]
        corr = runs.corrupted_cache["head_out"][layer].transpose(0, 1)
        streams = runs.clean_cache["resid"][layer + 1][None] + (corr - clean)
        m, by_seq = _metrics_of_streams(model, runs, streams, layer + 1, by_seq=True)
        direct, _ = model.run_with_hooks(resid=final[None] + (corr - clean), start=model.cfg.n_layers)
        dm, d_seq = metric(direct, runs.clean, runs.periods), metric_by_seq(direct, runs.clean, runs.periods)
        seqs.append(by_seq.double().numpy())
        direct_seqs.append(d_seq.double().numpy())
        rows += [{"layer": layer, "head": h, "noise_effect": float(runs.effect(float(m[h]))),
                  "direct_effect": float(runs.effect(float(dm[h])))} for h in range(model.cfg.n_heads)]
    df = pd.DataFrame(rows, columns=["layer", "head", "noise_effect", "direct_effect"])
    if rows:
        df["noise_low"], df["noise_high"] = effect_interval(runs, np.concatenate(seqs))
        df["direct_low"], df["direct_high"] = effect_interval(runs, np.concatenate(direct_seqs))
    return df


def attribution_head_positions(model: TinyCharLM, runs: PatchRuns) -> np.ndarray:
    """Attribution patching of each head's clean output at one position into the corrupted run:
    estimated patch effects [n_layers, n_heads, T] (compare patching.head_position_effects)."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    T = runs.clean.shape[1]
    if L == 0:
        return np.zeros((0, H, T))
    gap = runs.m_clean - runs.m_corrupted
    names = [hook_name(l, "attn.hook_result") for l in range(L)]
    with torch.enable_grad():  # each result feeds every later one: the gradients are total derivatives
        logits, cache = model.run_with_hooks(runs.corrupted, cache=names)
        grads = torch.autograd.grad(metric(logits, runs.clean, runs.periods), [cache[n] for n in names])
    out = np.zeros((L, H, T))
    for layer in range(L):
        delta = runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]  # [B, H, T, D]
        est = (delta * grads[layer]).sum(-1).sum(0)  # [H, T]
        out[layer] = (est / gap).detach().numpy() if gap else np.nan
    return out
