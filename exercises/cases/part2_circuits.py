"""Part 2's checks (circuits and ablations): each exercise's cases, the lab's answer and the typical
mistakes, each a wrong computation with its sentence."""
from __future__ import annotations

import math

import torch

from core.model.symbols import head_label
from exercises import planted
from exercises.cases.inputs import _patterns, batch, head_list
from exercises.engine import Case, Check

CHECKS: dict[str, Check] = {}  # exercise name -> its check, each one written below the functions it uses


def _ov_cases(model, task, label):
    b = model.blocks
    return [Case(f"{label}, head {head_label(l, h)}",
                 {"W_E": model.W_E.detach(), "W_V": b[l].W_V[h].detach(), "W_O": b[l].W_O[h].detach()})
            for l, h in head_list(model, label)]


def _ov_ref(W_E, W_V, W_O):
    return W_E @ W_V @ W_O @ W_E.T


CHECKS["ov_copying_matrix"] = Check(_ov_cases, _ov_ref, ("V, the attended token a", "V, the logit b"), [
    ("Rows and columns swapped: row a is the attended token and column b the logit it raises, "
     "C = W_E W_V W_O W_E^T (not its transpose)", lambda W_E, W_V, W_O: _ov_ref(W_E, W_V, W_O).T),
    ("Rows centred: return C itself (the eigenvalue score centres it, in the next exercise)",
     lambda W_E, W_V, W_O: _ov_ref(W_E, W_V, W_O) - _ov_ref(W_E, W_V, W_O).mean(-1, keepdim=True)),
    ("You stopped at W_E W_V W_O [V, D]: multiply by W_E^T to reach the logits",
     lambda W_E, W_V, W_O: W_E @ W_V @ W_O),
    ("The unembedding is missing on the right and the embedding on the left: C = W_E W_V W_O W_E^T",
     lambda W_E, W_V, W_O: W_V @ W_O)])


def _copy_cases(model, task, label):
    from core.reading.copying import ov_copying_matrix

    heads = [planted.INDUCTION] if label.startswith("the planted") else head_list(model, label)
    out = [Case(f"{label}, head {head_label(l, h)}", {"C": ov_copying_matrix(model, l, h)}) for l, h in heads]
    if label.startswith("the planted"):
        C = ov_copying_matrix(model, *planted.INDUCTION)
        out.append(Case("the planted induction head's OV turned around (anti-copying)",
                        {"C": -C + 0.01 * C.T.roll(1, 0)}))
    return out


def _copy_ref(C, centred=True, axis=-1, normalise=True, count=False):
    from core.reading.copying import ov_copying_eig

    V = C.shape[0]
    hits = (C.argmax(axis) == torch.arange(V)).float()
    diag = float(hits.sum()) if count else float(hits.mean())
    if normalise:
        eig = ov_copying_eig(C, centred=centred)
    else:
        M = (C - C.mean(-1, keepdim=True)).double()
        eig = float(torch.linalg.eigvals(M).sum().real)
    return diag, eig


CHECKS["copying_scores"] = Check(_copy_cases, _copy_ref, (), [
    ("Rows and columns swapped in ov_diag_top1: take each row's largest entry, C.argmax(-1) (row = the "
     "attended token)", lambda C: _copy_ref(C, axis=0)),
    ("ov_copying_eig is not centred: remove every row's mean before the eigenvalues",
     lambda C: _copy_ref(C, centred=False)),
    ("ov_copying_eig is not normalised: divide Re(sum of eigenvalues) by the sum of their absolute values",
     lambda C: _copy_ref(C, normalise=False)),
    ("ov_diag_top1 is not normalised: return the share of rows, not their count",
     lambda C: _copy_ref(C, count=True))])


def _rotary_cases(model, task, label):
    from core.reading.circuits import head_qk_vectors

    out = []
    for l, h in head_list(model, label):
        tokens, _ = batch(model, task, n=4)
        resid = _patterns(model, tokens)["resid"][l]
        q, k = head_qk_vectors(model, l, h, resid)
        out.append(Case(f"{label}, head {head_label(l, h)}", {"q": q, "k": k, "n_offsets": 40}))
    return out


def _rotary(q, k, n_offsets, which="q", scale=True, start=0):
    from core.model.tinycharlm import apply_rope, rope_cos_sin

    dh = q.shape[-1]
    cos, sin = rope_cos_sin(n_offsets + start, dh, 10000.0, q.dtype)
    cos, sin = cos[start:], sin[start:]
    qq, kk = q.expand(n_offsets, dh), k.expand(n_offsets, dh)
    if which in ("q", "both"):
        qq = apply_rope(qq, cos, sin)
    if which in ("k", "both"):
        kk = apply_rope(kk, cos, sin)
    return (qq * kk).sum(-1) / (math.sqrt(dh) if scale else 1.0)


CHECKS["rotary_profile"] = Check(_rotary_cases, _rotary, ("n_offsets, the offset t",), [
    ("Rotated the key instead of the query: that puts the key t positions ahead; rotate q by t",
     lambda q, k, n_offsets: _rotary(q, k, n_offsets, which="k")),
    ("Rotated both q and k by t: a common rotation cancels out; rotate only q by the offset",
     lambda q, k, n_offsets: _rotary(q, k, n_offsets, which="both")),
    ("The scores are not scaled: divide by sqrt(d_head)",
     lambda q, k, n_offsets: _rotary(q, k, n_offsets, scale=False)),
    ("Off by one position: the offsets start at t = 0, the query's own position",
     lambda q, k, n_offsets: _rotary(q, k, n_offsets, start=1))])


def _comp_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    b0, b1 = model.blocks[0], model.blocks[1]
    pairs = [(planted.PREV[1], planted.INDUCTION[1])] if label.startswith("the planted") else [(0, 1), (1, 0)]
    return [Case(f"{label}, head 1.{w + 1} into 2.{r + 1}",
                 {"W_OV": (b0.W_V[w] @ b0.W_O[w]).detach(), "W_QK": (b1.W_Q[r] @ b1.W_K[r].T).detach()})
            for w, r in pairs]


def _comp(W_OV, W_QK, kind="K", normalise=True, ord="fro", order="ok"):
    from core.reading.composition import composition_score

    right = W_QK.T if kind == "K" else W_QK
    if order != "ok":
        return float(torch.linalg.matrix_norm(right @ W_OV) / (W_OV.norm() * W_QK.norm()))
    if not normalise:
        return float((W_OV @ right).norm())
    if ord != "fro":
        return float(torch.linalg.matrix_norm(W_OV @ right, ord=2)
                     / (torch.linalg.matrix_norm(W_OV, ord=2) * torch.linalg.matrix_norm(W_QK, ord=2)))
    return float(composition_score(W_OV, right))


CHECKS["k_composition"] = Check(_comp_cases, _comp, (), [
    ("That is Q-composition (W_OV W_QK, the queries read the writer): for keys use W_OV W_QK^T",
     lambda W_OV, W_QK: _comp(W_OV, W_QK, kind="Q")),
    ("Not normalised: divide ||W_OV W_QK^T||_F by ||W_OV||_F ||W_QK||_F",
     lambda W_OV, W_QK: _comp(W_OV, W_QK, normalise=False)),
    ("Used the spectral norm: the composition score uses Frobenius norms (.norm())",
     lambda W_OV, W_QK: _comp(W_OV, W_QK, ord=2)),
    ("Multiplied in the wrong order: the writer's output comes first, W_OV W_QK^T",
     lambda W_OV, W_QK: _comp(W_OV, W_QK, order="swapped"))])


def _abl_cases(model, task, label):
    if model.cfg.n_layers == 0:
        return []
    tokens, periods = batch(model, task, n=8)
    heads = head_list(model, label)
    return [Case(f"{label}, head {head_label(l, h)} {mode}-ablated",
                 {"model": model, "tokens": tokens, "periods": periods, "layer": l, "head": h, "mode": mode})
            for (l, h), mode in zip(heads, ("zero", "mean", "zero"))]


def _abl_ref(model, tokens, periods, layer, head, mode, sign=1.0, metric="loss_later_copies"):
    from core.reading.ablation import ablated_metrics

    if not (0 <= layer < model.cfg.n_layers and 0 <= head < model.cfg.n_heads):
        raise ValueError("no such head")
    clean = ablated_metrics(model, tokens, periods)
    after = ablated_metrics(model, tokens, periods, {(layer, head): mode})
    if metric == "all":
        from core.model.metrics import per_target_loss
        from core.reading.ablation import ablated_logits
        c = float(per_target_loss(ablated_logits(model, tokens), tokens)[0].mean())
        a = float(per_target_loss(ablated_logits(model, tokens, {(layer, head): mode}), tokens)[0].mean())
        return sign * (a - c)
    return sign * (after[metric] - clean[metric])


def _abl_positions(model, tokens, periods, layer, head, mode):
    """Mean ablation with the mean over positions instead of over the batch."""
    from core.model.metrics import copy_metrics

    def over_positions(result):  # [B, H, T, D]: the head's output replaced by its mean over the positions
        result = result.clone()
        result[:, head] = result[:, head].mean(1, keepdim=True)
        return result

    with torch.no_grad():
        logits, _ = model.run_with_hooks(tokens, edits={f"blocks.{layer}.attn.hook_result": over_positions})
    key = "loss_later_copies"
    return copy_metrics(logits, tokens, periods)[key] - copy_metrics(model(tokens), tokens, periods)[key]


CHECKS["ablation_delta"] = Check(_abl_cases, _abl_ref, (), [
    ("The sign is flipped: return ablated minus clean, so that knocking out a head that helps gives a "
     "rise", lambda **a: _abl_ref(**a, sign=-1.0)),
    ("Mean taken over the positions: mean ablation replaces the output by its mean over the batch at "
     "each position", _abl_positions),
    ("Zero-ablated although the mode is 'mean': replace the output by its batch mean at each position",
     lambda **a: _abl_ref(**(a | {"mode": "zero"}))),
    ("Scored every target: the change asked for is in the later-copy loss (targets t >= L)",
     lambda **a: _abl_ref(**a, metric="all")),
    ("Knocked out the wrong head: layer and head are 0-based (block 2, head 3 is layer 1, head 2)",
     lambda **a: _abl_ref(**(a | {"layer": a["layer"] - 1, "head": a["head"] - 1}))),
    ("Knocked out the wrong head: layer and head are 0-based (block 2, head 3 is layer 1, head 2)",
     lambda **a: _abl_ref(**(a | {"layer": a["layer"] + 1, "head": a["head"] + 1})))])
