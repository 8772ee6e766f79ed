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


def _fact_cases(model, task, label):
    if model.cfg.n_layers == 0:
        return []
    out = []
    for l, h in head_list(model, label):
        b = model.blocks[l]
        out.append(Case(f"{label}, head {head_label(l, h)}'s QK circuit (W_Q, W_K^T)",
                        {"A": b.W_Q[h].detach(), "B": b.W_K[h].T.detach()}))
        if model.cfg.vocab_size > model.cfg.d_head:  # W_E W_V and W_O W_E^T: rank d_head below V
            out.append(Case(f"{label}, head {head_label(l, h)}'s OV circuit from the tokens (W_E W_V, W_O W_E^T)",
                            {"A": (model.W_E @ b.W_V[h]).detach(), "B": (b.W_O[h] @ model.W_E.T).detach()}))
    return out


def _svals(A, B, how="ok"):
    from core.reading.factored import FactoredMatrix

    S = FactoredMatrix(A, B).S.double()
    if how == "squared":
        return S ** 2
    if how == "ascending":
        return S.flip(-1)
    if how == "factors":
        return torch.linalg.svdvals(A.double()) * torch.linalg.svdvals(B.double())
    return S


def _formed(A, B):
    """What the check returns for a function that made a tensor as large as A @ B: NaN in every place."""
    return torch.full((A.shape[-1],), float("nan"), dtype=torch.float64)


class _Watch(torch.overrides.TorchFunctionMode):
    """Notes whether any torch call makes a tensor with at least `limit` elements (the size of A @ B)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.formed = limit, False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() >= self.limit:
                self.formed = True
        return out


def _fact_run(fn, A, B):
    watch = _Watch(A.shape[0] * B.shape[-1])
    with watch:
        out = fn(A=A, B=B)
    return _formed(A, B) if watch.formed else out


CHECKS["factored_svals"] = Check(_fact_cases, _svals, ("r, the singular values",), [
    ("You formed the full m x n product (a tensor as large as A @ B): take the singular values of the r x r "
     "matrix R_A R_B^T from the QR decompositions of A and B^T", _formed),
    ("Those are the squared singular values (the eigenvalues of M^T M): take the singular values themselves "
     "(torch.linalg.svdvals)", lambda A, B: _svals(A, B, "squared")),
    ("Smallest first: return the singular values largest first, as torch.linalg.svdvals gives them",
     lambda A, B: _svals(A, B, "ascending")),
    ("That is the product of each factor's own singular values: the singular values of a product depend on "
     "how the factors' directions line up, so take those of R_A R_B^T", lambda A, B: _svals(A, B, "factors"))],
    run=_fact_run)


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
    from core.model.rope import apply_rope, rope_cos_sin

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


def _two_block_cases(model, task, label):
    return [] if model.cfg.n_layers < 2 else [Case(f"{label}, block 1 into block 2",
                                                   {"model": model, "writer_layer": 0, "reader_layer": 1})]


def _compositions(model, writer_layer, reader_layer, k_transposed=True, v_order="ok", normalise=True,
                  swap=False, against="ratio"):
    from core.reading.composition import composition_baseline, composition_matrix

    bw, br = model.blocks[writer_layer], model.blocks[reader_layer]
    ov_w = torch.einsum("hdk,hkm->hdm", bw.W_V, bw.W_O)[:, None]
    qk_r = torch.einsum("hdk,hmk->hdm", br.W_Q, br.W_K)[None]
    ov_r = torch.einsum("hdk,hkm->hdm", br.W_V, br.W_O)[None]
    if k_transposed and v_order == "ok" and normalise:
        scores = torch.stack([composition_matrix(model, kind, writer_layer, reader_layer) for kind in "QKV"])
    else:
        pairs = [(ov_w, qk_r), (ov_w, qk_r.transpose(-1, -2) if k_transposed else qk_r),
                 (ov_r, ov_w) if v_order == "swapped" else (ov_w, ov_r)]
        scores = torch.stack([(left @ right).norm(dim=(-2, -1)) / (
            (left.norm(dim=(-2, -1)) * right.norm(dim=(-2, -1))).clamp_min(1e-30) if normalise else 1.0)
            for left, right in pairs])
    if swap:
        scores = scores.transpose(-1, -2)
    base = torch.tensor([composition_baseline(model.cfg.d_model, model.cfg.d_head)[k] for k in "QKV"])[:, None, None]
    return scores, (scores / base if against == "ratio" else scores - base)


CHECKS["composition_scores"] = Check(_two_block_cases, _compositions, (), [
    ("K-composition is the same as Q: the keys read the writer through W_QK's other side, W_OV^w (W_QK^r)^T",
     lambda **a: _compositions(**a, k_transposed=False)),
    ("V-composition multiplied in the wrong order: the writer's output comes first, W_OV^w W_OV^r",
     lambda **a: _compositions(**a, v_order="swapped")),
    ("Not normalised: divide ||left right||_F by ||left||_F ||right||_F",
     lambda **a: _compositions(**a, normalise=False)),
    ("Rows and columns swapped: axis 1 is the writer head and axis 2 the reader head",
     lambda **a: _compositions(**a, swap=True)),
    ("Subtracted the baseline: the ratios are each score divided by the random baseline of its kind",
     lambda **a: _compositions(**a, against="difference"))])


def _pair_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    pairs = [(planted.PREV, planted.INDUCTION)] if label.startswith("the planted") else [((0, 0), (1, 0)),
                                                                                         ((0, 1), (1, 1))]
    return [Case(f"{label}, {head_label(*w)} into {head_label(*r)}", {"model": model, "writer": w, "reader": r})
            for w, r in pairs]


def _ov(model, layer, head):
    b = model.blocks[layer]
    return b.W_V[head] @ b.W_O[head]


def _qk(model, layer, head):
    b = model.blocks[layer]
    return b.W_Q[head] @ b.W_K[head].T


def _composed(model, writer, reader, how="ok"):
    from core.reading.attribution import composed_ov_circuit

    E = model.W_E
    if how == "ok":
        return composed_ov_circuit(model, tuple(writer), tuple(reader))
    if how == "reader-first":
        return E @ _ov(model, *reader) @ _ov(model, *writer) @ E.T
    if how == "reader-only":
        return E @ _ov(model, *reader) @ E.T
    if how == "no-unembedding":
        return E @ _ov(model, *writer) @ _ov(model, *reader)
    raise ValueError(how)


CHECKS["composed_ov_circuit"] = Check(_pair_cases, _composed, ("V, the attended token a", "V, the logit b"), [
    ("Multiplied in the wrong order: the writer's W_OV comes first (it writes, then the reader's values read "
     "it), W_E W_OV^writer W_OV^reader W_E^T", lambda **a: _composed(**a, how="reader-first")),
    ("Rows and columns swapped: row a is the token the writer attends to and column b the logit",
     lambda **a: _composed(**a).T),
    ("The writer is missing: that is the reader's own OV copying matrix; put W_OV^writer between W_E and the "
     "reader's W_OV", lambda **a: _composed(**a, how="reader-only")),
    ("You stopped at the stream [V, D]: multiply by W_E^T to reach the logits",
     lambda **a: _composed(**a, how="no-unembedding"))])


def _full_k(model, writer, reader, how="ok"):
    from core.reading.attribution import full_k_circuit

    E = model.W_E
    if how == "ok":
        return full_k_circuit(model, tuple(writer), tuple(reader))
    if how == "query-side":  # the writer's output on the query side: the Q-composition circuit
        return E @ _ov(model, *writer) @ _qk(model, *reader) @ E.T
    if how == "scaled":
        return full_k_circuit(model, tuple(writer), tuple(reader)) / math.sqrt(model.cfg.d_head)
    if how == "no-writer":
        return E @ _qk(model, *reader) @ E.T
    raise ValueError(how)


CHECKS["full_k_circuit"] = Check(_pair_cases, _full_k, ("V, the query's token a", "V, the key's token b"), [
    ("That is the Q-composition circuit (the writer's output on the query side): the keys read the writer, "
     "W_E W_QK (W_E W_OV)^T", lambda **a: _full_k(**a, how="query-side")),
    ("Rows and columns swapped: row a is the query's token and column b the key's",
     lambda **a: _full_k(**a).T),
    ("Scaled by 1/sqrt(d_head): the circuit is the score before the scaling", lambda **a: _full_k(**a, how="scaled")),
    ("The writer is missing: the key reads the writer's output for token b, W_E[b] W_OV^writer",
     lambda **a: _full_k(**a, how="no-writer"))])


def _strongest(model, task, layer, score):
    """The head of block `layer` with the highest `score` on a seeded batch."""
    from core.reading.heads import head_scores

    tokens, periods = batch(model, task)
    return int(head_scores(_patterns(model, tokens)["pattern"][layer], periods)[score].argmax())


def _parts_cases(model, task, label):
    if model.cfg.n_layers < 2 or model.cfg.bias:
        return []
    if label.startswith("the planted"):
        head, what = planted.INDUCTION[1], "the induction head"
    else:
        head, what = _strongest(model, task, 1, "induction"), "the strongest block-2 induction head"
    tokens, _ = batch(model, task, n=1, seed=2)
    return [Case(f"{label}, {what} {head_label(1, head)}", {"model": model, "tokens": tokens[0], "head": head})]


def _parts(model, tokens, head, rope=True, scale=True, mask=False):
    from core.reading.score_terms import score_terms

    if rope and scale and not mask:
        return score_terms(model, tokens, 1, head)["terms"]
    _, cache = model.run_with_cache(tokens[None])
    parts = torch.cat([model.W_E[tokens][None], cache["head_out"][0][0]])
    block, T, dh = model.blocks[1], tokens.shape[0], model.cfg.d_head
    q, k = parts @ block.W_Q[head], parts @ block.W_K[head]
    if rope:
        from core.model.rope import apply_rope, rope_cos_sin

        cos, sin = rope_cos_sin(T, dh, 10000.0)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    out = torch.einsum("pid,sjd->psij", q, k) / (math.sqrt(dh) if scale else 1.0)
    return out.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")) if mask else out


CHECKS["score_parts"] = Check(_parts_cases, _parts, ("the query's part p", "the key's part s", "T, the query i",
                                                     "T, the key j"), [
    ("No rotary positions: rotate each part's q and k with apply_rope (RoPE is linear, so each part rotates alone)",
     lambda **a: _parts(**a, rope=False)),
    ("The scores are not scaled: divide q . k by sqrt(d_head)", lambda **a: _parts(**a, scale=False)),
    ("Query and key parts swapped: axis 0 is the part the query reads, axis 1 the part the key reads",
     lambda **a: _parts(**a).transpose(0, 1)),
    ("Rows and columns swapped: axis 2 is the query i and axis 3 the key j", lambda **a: _parts(**a).transpose(-1, -2)),
    ("Masked: return the terms before the causal mask (the parts add up to the score, which the mask then hides)",
     lambda **a: _parts(**a, mask=True))])


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


def _knock_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    tokens, periods = batch(model, task, n=8)
    if label.startswith("the planted"):
        head, what = planted.PREV[1], "the previous-token head"
    elif label.startswith("a small"):
        head, what = 0, "head"
    else:
        head, what = _strongest(model, task, 0, "prev_token"), "the strongest previous-token head"
    return [Case(f"{label}, {what} {head_label(0, head)} {mode}-ablated",
                 {"model": model, "tokens": tokens, "periods": periods, "head": head, "mode": mode})
            for mode in ("zero", "mean")]


def _knock(model, tokens, periods, head, mode, score="induction", layer=1, clean=False):
    from core.reading.ablation import ablation_edits
    from core.reading.heads import head_scores

    name = f"blocks.{layer}.attn.hook_pattern"
    edits = {} if clean else ablation_edits({(0, head % model.cfg.n_heads): mode})
    _, cache = model.run_with_hooks(tokens, edits=edits, cache=[name])
    return head_scores(cache[name], periods)[score]


CHECKS["knockout_rescore"] = Check(_knock_cases, _knock, ("H, the block-2 head",), [
    ("Those are the clean run's scores: block 2's patterns must come from the run with the head knocked out",
     lambda **a: _knock(**a, clean=True)),
    ("Scored the wrong block: the knocked-out head sits in block 1; score block 2's heads (layer 1)",
     lambda **a: _knock(**a, layer=0)),
    ("Zero-ablated although the mode is 'mean': replace the head's z by its batch mean at each position",
     lambda **a: _knock(**(a | {"mode": "zero"}))),
    ("Knocked out the wrong head: head is 0-based (head 1.3 is head 2)",
     lambda **a: _knock(**(a | {"head": a["head"] + 1}))),
    ("Knocked out the wrong head: head is 0-based (head 1.3 is head 2)",
     lambda **a: _knock(**(a | {"head": a["head"] - 1}))),
    ("Score on the wrong copy: that counts every earlier copy (induction_any); induction_score is the latest "
     "copy's, j = i + 1 - L", lambda **a: _knock(**a, score="induction_any"))])
