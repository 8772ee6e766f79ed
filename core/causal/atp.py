"""AtP* (Kramár et al., 2024) beside plain attribution patching (core.causal.noising.attribution_head_positions),
for patching (3): each head's clean output at one position into the corrupted run.

Plain attribution patching linearises M around the corrupted run, the attention softmax of every later head
included. When a sender's output moves a later head's keys or queries (1.4's key path into block 2), the
softmax is far from linear over that change and the estimate can even get the sign wrong. AtP*'s QK fix:
linearise only through the rest of the model and recompute the later heads' attention exactly.

    estimate(sender, p) = delta . dM/d(output) with every later pattern held fixed
                        + sum over later blocks r of  (A_r(stream_r + delta at p) - A_r) . dM/dA_r

both gradients at the corrupted run, delta = clean - corrupted output of the sender at position p, A_r
recomputed from the corrupted stream entering block r plus delta at p (one hop: what delta does to blocks
between the sender and r is not fed into A_r). Divided by the gap like every patch effect. Kramár et al.'s
second fix, GradDrop (for cancellation across layers when ranking nodes by magnitude), is not done here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.causal.noising import attribution_head_positions
from core.causal.patching import CHUNK_POSITIONS, PatchRuns, metric
from core.model.hooks import hook_name
from core.model.symbols import head_label, with_labels
from core.model.tinycharlm import TinyCharLM


def _check(model: TinyCharLM, runs: PatchRuns) -> None:
    if model.cfg.n_layers == 0:
        raise ValueError("AtP* needs attention heads: this model has no blocks.")
    out = runs.corrupted_cache["head_out"]
    if len(out) != model.cfg.n_layers or out[0].shape[1] != model.cfg.n_heads or \
            out[0].shape[-1] != model.cfg.d_model:
        raise ValueError("These runs were prepared on another model (its blocks, heads or width differ): "
                         "prepare them with this model (core.causal.patching.prepare).")


def atp_star_head_positions(model: TinyCharLM, runs: PatchRuns) -> np.ndarray:
    """AtP* estimates of each head's clean output at one position into the corrupted run: patch effects
    [n_layers, n_heads, T] (compare patching.head_position_effects and noising.attribution_head_positions).
    ValueError for a model without blocks or runs prepared on another model."""
    _check(model, runs)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    B, T = runs.clean.shape
    gap = runs.m_clean - runs.m_corrupted
    results = [hook_name(l, "attn.hook_result") for l in range(L)]
    patterns = [hook_name(l, "attn.hook_pattern") for l in range(L)]
    held: dict[str, torch.Tensor] = {}

    def hold(name):  # the pattern as a leaf: no gradient through the softmax, and dM/dA itself
        def edit(a):
            held[name] = a.detach().requires_grad_(True)
            return held[name]
        return edit

    with torch.enable_grad():
        logits, cache = model.run_with_hooks(runs.corrupted, edits={n: hold(n) for n in patterns}, cache=results)
        grads = torch.autograd.grad(metric(logits, runs.clean, runs.periods),
                                    [cache[n] for n in results] + [held[n] for n in patterns])
    g_out, g_pat = grads[:L], grads[L:]
    A = [held[n].detach() for n in patterns]  # [B, H, T, T]
    per = max(1, CHUNK_POSITIONS // (B * T))
    eye = torch.eye(T)
    out = np.zeros((L, H, T))
    with torch.no_grad():
        for layer in range(L):
            delta = runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]  # [B, H, T, D]
            est = (delta * g_out[layer]).sum(-1).sum(0)  # [H, T]: the linear part, patterns held
            for r in range(layer + 1, L):
                base = runs.corrupted_cache["resid"][r]
                for h in range(H):
                    for lo in range(0, T, per):
                        hi = min(T, lo + per)
                        streams = base[None] + delta[None, :, h] * eye[lo:hi, None, :, None]  # [G, B, T, D]
                        _, c = model.run_with_hooks(resid=streams, start=r, stop=r + 1, cache=[patterns[r]])
                        est[h, lo:hi] += ((c[patterns[r]] - A[r][None]) * g_pat[r][None]).sum((1, 2, 3, 4))
            out[layer] = (est / gap).numpy() if gap else np.nan
    return out


def compare(exact: np.ndarray, estimates: dict[str, np.ndarray], labels: list[str]):
    """Each estimate [n_layers, n_heads, T] against the exact sweep: one row per method and head (label):
    exact_sum, estimate_sum over positions, same_sign, scale (estimate_sum / exact_sum), max_abs_error
    over positions. ValueError when the shapes differ."""
    rows = []
    for name, est in estimates.items():
        if est.shape != exact.shape:
            raise ValueError(f"{name}: shape {est.shape} against the exact sweep's {exact.shape}.")
        e, x = est.reshape(-1, est.shape[-1]), exact.reshape(-1, exact.shape[-1])
        for i, lab in enumerate(labels):
            es, xs = float(e[i].sum()), float(x[i].sum())
            rows.append({"method": name, "label": lab, "exact_sum": xs, "estimate_sum": es,
                         "same_sign": bool(np.sign(es) == np.sign(xs)), "scale": es / xs if xs else float("nan"),
                         "max_abs_error": float(np.abs(e[i] - x[i]).max())})
    return pd.DataFrame(rows)


def attribution_agreement(model: TinyCharLM, runs: PatchRuns, exact: np.ndarray) -> dict:
    """Attribution patching against the exact one-head-one-position sweep (exact: head_position_effects,
    [n_layers, n_heads, T]): {estimate [n_layers * n_heads, T], corr (over every cell), max_abs_diff,
    max_abs_exact (the largest exact cell, the scale max_abs_diff is read against), per_head {label:
    correlation over positions}, sums (one row per head: label, layer, head, estimate_sum and exact_sum over
    positions, corr, same_sign, scale = estimate_sum / exact_sum, star_sum and star_same_sign: the same for
    AtP*, core.causal.atp)}. A correlation alone hides a wrong sign
    or a wrong scale of a head's total."""
    est = attribution_head_positions(model, runs)
    star = atp_star_head_positions(model, runs)
    x, y = est.ravel(), exact.ravel()
    ok = np.isfinite(x) & np.isfinite(y)

    def corr(a, b):
        return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")

    per_head = {head_label(l, h): corr(est[l, h], exact[l, h])
                for l in range(est.shape[0]) for h in range(est.shape[1])}
    sums = pd.DataFrame([{"layer": l, "head": h, "estimate_sum": float(np.nansum(est[l, h])),
                          "exact_sum": float(np.nansum(exact[l, h])), "corr": per_head[head_label(l, h)],
                          "star_sum": float(np.nansum(star[l, h]))}
                         for l in range(est.shape[0]) for h in range(est.shape[1])],
                        columns=["layer", "head", "estimate_sum", "exact_sum", "corr", "star_sum"])
    sums["same_sign"] = np.sign(sums["estimate_sum"]) == np.sign(sums["exact_sum"])
    sums["star_same_sign"] = np.sign(sums["star_sum"]) == np.sign(sums["exact_sum"])
    with np.errstate(divide="ignore", invalid="ignore"):
        sums["scale"] = sums["estimate_sum"] / sums["exact_sum"]
    return {"estimate": est.reshape(-1, est.shape[-1]), "star": star.reshape(-1, star.shape[-1]),
            "corr": corr(x[ok], y[ok]),
            "max_abs_diff": float(np.abs(x[ok] - y[ok]).max()) if ok.any() else float("nan"),
            "max_abs_exact": float(np.abs(y[ok]).max()) if ok.any() else float("nan"), "per_head": per_head,
            "sums": with_labels(sums)}
