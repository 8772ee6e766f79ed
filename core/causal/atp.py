"""AtP* (Kramár et al., 2024) beside plain attribution patching (core.causal.noising.attribution_head_positions),
for patching (3): each head's clean output at one position into the corrupted run.

Plain attribution patching linearises M around the corrupted run, the attention softmax of every later head
included. When a sender's output moves a later head's keys or queries (1.4's key path into block 2), the
softmax is far from linear over that change and the estimate can even get the sign wrong. AtP*'s QK fix
(Kramár et al.) recomputes exactly the softmax of the attention a patched query or key feeds, for nodes that
are a head's queries or keys. The nodes here are whole head outputs, upstream of later blocks' attention, so
the lab extends the fix: linearise only through the rest of the model and recompute every later block's
attention exactly for the sender's change (one hop, below). That extension is the lab's, not the paper's.

    estimate(sender, p) = delta . dM/d(output) with every later pattern held fixed
                        + sum over later blocks r of  (A_r(stream_r + delta at p) - A_r) . dM/dA_r

both gradients at the corrupted run, delta = clean - corrupted output of the sender at position p, A_r
recomputed from the corrupted stream entering block r plus delta at p (one hop: what delta does to blocks
between the sender and r is not fed into A_r). Divided by the gap like every patch effect.

Kramár et al.'s second fix, GradDrop, is for cancellation: a node whose effect reaches M along several paths
of opposite sign gets a small estimate however large each path is. It repeats the estimate once per block l
with the backward pass through block l dropped, and ranks nodes by sum_l |estimate_l| / (n_layers - 1). That
is a ranking score, not an estimate of any patch effect (a node at or above every dropped block counts its
estimate once per block: in a 2-block model a block-2 head scores exactly 2|AtP*|): it cannot give a total's
sign, and it finds a node that the undropped estimate hides only when the paths cancel. In a 2-block model a
block-1 head has two paths, its direct one and the one through block 2; dropping block 2 leaves the direct one
alone (graddrop_head_positions).
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


def _backward(model: TinyCharLM, runs: PatchRuns, hold: bool, drop: int | None = None):
    """One backward pass at the corrupted run: (dM/d hook_result per block, dM/dA per block or None, the
    corrupted run's patterns or None). hold: every pattern a leaf (no gradient through a softmax, dM/dA itself).
    drop: the block whose q, k and v pass no gradient into the stream they read (GradDrop's dropped layer)."""
    L = model.cfg.n_layers
    results = [hook_name(l, "attn.hook_result") for l in range(L)]
    patterns = [hook_name(l, "attn.hook_pattern") for l in range(L)]
    held: dict[str, torch.Tensor] = {}

    def leaf(name):
        def edit(a):
            held[name] = a.detach().requires_grad_(True)
            return held[name]
        return edit

    edits = {n: leaf(n) for n in patterns} if hold else {}
    if drop is not None:
        edits.update({hook_name(drop, f"attn.hook_{p}"): torch.Tensor.detach for p in "qkv"})
    with torch.enable_grad():
        logits, cache = model.run_with_hooks(runs.corrupted, edits=edits, cache=results)
        grads = torch.autograd.grad(metric(logits, runs.clean, runs.periods),
                                    [cache[n] for n in results] + [held[n] for n in patterns if hold])
    if not hold:
        return grads, None, None
    return grads[:L], grads[L:], [held[n].detach() for n in patterns]


def _estimates(model: TinyCharLM, runs: PatchRuns, backwards: list[tuple]) -> np.ndarray:
    """Patch-effect estimates [len(backwards), n_layers, n_heads, T] of each head's clean output at one position
    into the corrupted run, one per backward (g_out, g_pat, A, skip): the linear part delta . g_out, plus, when
    g_pat is given, every later block r's exact pattern change (not for r in skip) times g_pat[r]. The pattern
    changes are computed once for every backward."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    B, T = runs.clean.shape
    gap = runs.m_clean - runs.m_corrupted
    pattern = [hook_name(l, "attn.hook_pattern") for l in range(L)]
    per = max(1, CHUNK_POSITIONS // (B * T))
    eye = torch.eye(T)
    out = np.zeros((len(backwards), L, H, T))
    with torch.no_grad():
        for layer in range(L):
            delta = runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]  # [B, H, T, D]
            est = torch.stack([(delta * g_out[layer]).sum(-1).sum(0) for g_out, *_ in backwards])  # [N, H, T]
            for r in range(layer + 1, L):
                fixed = [i for i, (_, g_pat, _, skip) in enumerate(backwards) if g_pat is not None and r not in skip]
                if not fixed:
                    continue
                base = runs.corrupted_cache["resid"][r]
                for h in range(H):
                    for lo in range(0, T, per):
                        hi = min(T, lo + per)
                        streams = base[None] + delta[None, :, h] * eye[lo:hi, None, :, None]  # [G, B, T, D]
                        _, c = model.run_with_hooks(resid=streams, start=r, stop=r + 1, cache=[pattern[r]])
                        for i in fixed:
                            _, g_pat, A, _ = backwards[i]
                            est[i, h, lo:hi] += ((c[pattern[r]] - A[r][None]) * g_pat[r][None]).sum((1, 2, 3, 4))
            out[:, layer] = (est / gap).numpy() if gap else np.nan
    return out


def atp_star_head_positions(model: TinyCharLM, runs: PatchRuns) -> np.ndarray:
    """AtP* estimates of each head's clean output at one position into the corrupted run: patch effects
    [n_layers, n_heads, T] (compare patching.head_position_effects and noising.attribution_head_positions).
    ValueError for a model without blocks or runs prepared on another model."""
    _check(model, runs)
    return _estimates(model, runs, [(*_backward(model, runs, hold=True), ())])[0]


def graddrop_head_positions(model: TinyCharLM, runs: PatchRuns, qk_fix: bool = True,
                            undropped: np.ndarray | None = None) -> np.ndarray:
    """GradDrop (Kramar et al., 2024): the estimate of atp_star_head_positions (qk_fix) or of plain attribution
    patching, once per block l with the gradient through block l dropped (block l's q, k and v pass no gradient
    to the stream; with the QK fix, block l's pattern change is left out too). Signed patch-effect estimates
    [n_layers (the dropped block l), n_layers, n_heads, T]. A head in block l or above gets the undropped
    estimate for that l; a head below it loses exactly the paths that run through block l. Dropping block 1
    changes no head's estimate (only the embedding is below it): undropped, the caller's AtP* (or plain)
    estimate [n_layers, n_heads, T], is used for l = 0 instead of recomputing it.
    ValueError for fewer than two blocks (nothing to drop) or runs prepared on another model."""
    _check(model, runs)
    if model.cfg.n_layers < 2:
        raise ValueError("GradDrop needs two blocks or more: with one, no block sits between a head and the "
                         "logits whose gradient could be dropped.")
    backwards = []
    for drop in range(0 if undropped is None else 1, model.cfg.n_layers):
        if qk_fix:
            backwards.append((*_backward(model, runs, hold=True, drop=drop), (drop,)))
        else:
            backwards.append((_backward(model, runs, hold=False, drop=drop)[0], None, None, ()))
    out = _estimates(model, runs, backwards)
    return out if undropped is None else np.concatenate([np.asarray(undropped)[None], out])


def graddrop_score(dropped: np.ndarray) -> np.ndarray:
    """Kramar et al.'s GradDrop score from graddrop_head_positions' [n_layers, ...] estimates:
    sum over the dropped block l of |estimate_l| / (n_layers - 1). A score for ranking nodes, with no sign and
    no patch effect it estimates:
    a node whose paths cancel in the undropped estimate shows its size in the estimates that drop one path."""
    return np.abs(dropped).sum(0) / (dropped.shape[0] - 1)


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


@torch.no_grad()
def direct_path_effects(model: TinyCharLM, runs: PatchRuns) -> np.ndarray:
    """The exact effect of each head's clean output (every position) sent into the corrupted run along its direct
    path to the logits only (the blocks above read the corrupted output): patch effects [n_layers, n_heads]."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    final = runs.corrupted_cache["resid"][L]
    delta = torch.stack([runs.clean_cache["head_out"][l] - runs.corrupted_cache["head_out"][l] for l in range(L)])
    streams = final[None] + delta.transpose(1, 2).reshape(L * H, *final.shape)  # [L*H, B, T, D]
    logits, _ = model.run_with_hooks(resid=streams, start=L)
    return runs.effect(metric(logits, runs.clean, runs.periods).numpy()).reshape(L, H)


def graddrop_table(model: TinyCharLM, runs: PatchRuns, exact: np.ndarray, star: np.ndarray) -> pd.DataFrame:
    """GradDrop beside the exact sweep and AtP*, one row per head, every column summed over positions: label,
    layer, head, exact_sum, star_sum (AtP*), dropped_layer<l> (the AtP* estimate with layer l's gradient dropped,
    l counted from 0), direct_exact (direct_path_effects), graddrop (graddrop_score, a ranking score) and abs_exact
    (the exact cells' absolute values summed, beside it; graddrop does not estimate it).
    exact, star: [n_layers, n_heads, T]."""
    dropped = graddrop_head_positions(model, runs, undropped=star)
    score, direct = graddrop_score(dropped), direct_path_effects(model, runs)
    rows = []
    for l in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            row = {"layer": l, "head": h, "exact_sum": float(exact[l, h].sum()), "star_sum": float(star[l, h].sum())}
            row.update({f"dropped_layer{d}": float(dropped[d, l, h].sum()) for d in range(len(dropped))})
            row.update(direct_exact=float(direct[l, h]), graddrop=float(score[l, h].sum()),
                       abs_exact=float(np.abs(exact[l, h]).sum()))
            rows.append(row)
    return with_labels(pd.DataFrame(rows))
