"""The exercises (exercises/, the Exercises page): both sides of every check.

- the solutions pass every check on every shipped file and on the planted models;
- for every exercise at least three typical wrong answers fail with the sentence meant for them;
- the untouched templates fail with "not written yet", and are what exercises/build.py generates;
- a function that raises gets its own sentence, naming its line, not the lab's traceback;
- the notebooks run top to bottom (solutions filled in, or untouched) and give the plain files' verdicts;
- the Exercises page renders in AppTest, and `python -m pytest` from the root does not collect exercises/.
"""
from __future__ import annotations

import copy
import importlib
import json
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from exercises import build, checks, engine
from exercises.catalogue import EXERCISES, SECTIONS, solution_function

from helpers import ROOT, SHIPPED, open_app

NAMES = [ex.name for ex in EXERCISES]
DEFAULT = "variable-period-2block.pt"


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small tensors: one torch thread is several times faster here on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    checks.use_model(ROOT / "checkpoints" / DEFAULT)
    yield
    torch.set_num_threads(before)


def sol(name):
    return solution_function(next(ex for ex in EXERCISES if ex.name == name))


def template(name):
    ex = next(ex for ex in EXERCISES if ex.name == name)
    return getattr(importlib.import_module(f"exercises.{ex.section}"), name)


# ---------------------------------------------------------------------------------------------
# Typical wrong answers, written as a student would, with the start of the sentence each must get


def _tile_longest(patterns, periods, seq_len):
    return patterns.gather(1, (torch.arange(seq_len)[None] % patterns.shape[1]).expand(len(periods), -1))


def _tile_shifted(patterns, periods, seq_len):
    return patterns.gather(1, torch.arange(1, seq_len + 1)[None] % periods[:, None])


def _mask_positions(periods, seq_len):
    return torch.arange(seq_len - 1)[None] >= periods[:, None]


def _mask_strict(periods, seq_len):
    return torch.arange(1, seq_len)[None] > periods[:, None]


def _mask_full(periods, seq_len):
    return torch.arange(seq_len)[None] >= periods[:, None]


def _pattern(q, k, rope=True, scale=True, axis=-1):
    T, dh = q.shape[-2], q.shape[-1]
    if rope:
        from core.model.rope import apply_rope, rope_cos_sin
        cos, sin = rope_cos_sin(T, dh, 10000.0)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    s = q @ k.transpose(-1, -2) / (math.sqrt(dh) if scale else 1)
    return s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(axis)


def _prev_self(pattern):
    return pattern.diagonal(0, dim1=-2, dim2=-1)[..., 1:].mean((0, 2))


def _induction_dup(pattern, periods):
    B, H, T, _ = pattern.shape
    vals = [pattern[b][:, torch.arange(int(L), T), torch.arange(0, T - int(L))] for b, L in enumerate(periods)]
    return torch.cat(vals, -1).mean(-1)


def _induction_per_seq(pattern, periods):
    T = pattern.shape[-1]
    return torch.stack([pattern[b][:, torch.arange(int(L), T), torch.arange(1, T - int(L) + 1)].mean(-1)
                        for b, L in enumerate(periods)]).mean(0)


def _any_mean(pattern, periods):
    B, H, T, _ = pattern.shape
    total, n = torch.zeros(H), 0
    for b in range(B):
        L = int(periods[b])
        for i in range(L, T):
            keys = list(range(i + 1 - L, -1, -L))
            total += pattern[b, :, i, keys].mean(-1)
            n += 1
    return total / n


def _any_offset(pattern, periods):
    B, H, T, _ = pattern.shape
    total, n = torch.zeros(H), 0
    for b in range(B):
        L = int(periods[b])
        for i in range(L, T):
            total += pattern[b, :, i, list(range(i - L, -1, -L))].sum(-1)
            n += 1
    return total / n


def _copy_cols(C):
    d, e = sol("copying_scores")(C)
    return float((C.argmax(0) == torch.arange(C.shape[0])).float().mean()), e


def _copy_uncentred(C):
    eig = torch.linalg.eigvals(C.double())
    return sol("copying_scores")(C)[0], float(eig.sum().real / eig.abs().sum())


def _copy_count(C):
    return float((C.argmax(-1) == torch.arange(C.shape[0])).sum()), sol("copying_scores")(C)[1]


def _rot(q, k, n_offsets, rotate="q", scale=True):
    from core.model.rope import apply_rope, rope_cos_sin
    dh = q.shape[-1]
    cos, sin = rope_cos_sin(n_offsets, dh, 10000.0)
    qq, kk = q.expand(n_offsets, dh), k.expand(n_offsets, dh)
    if rotate in ("q", "both"):
        qq = apply_rope(qq, cos, sin)
    if rotate in ("k", "both"):
        kk = apply_rope(kk, cos, sin)
    return (qq * kk).sum(-1) / (math.sqrt(dh) if scale else 1)


def _ablate(model, tokens, periods, layer, head, mode, over=0, targets="later", sign=1):
    def loss(logits):
        per = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        keep = torch.arange(1, tokens.shape[1])[None] >= periods[:, None]
        return float(per[keep].mean() if targets == "later" else per.mean())
    h = model.W_E[tokens]
    for l, block in enumerate(model.blocks):
        h_out, _, head_out, _ = block.forward_with_cache(h)
        if l == layer:
            out = head_out[:, head]
            new = torch.zeros_like(out) if mode == "zero" else out.mean(over, keepdim=True).expand_as(out)
            h_out = h_out + new - out
        h = h_out
    return sign * (loss(h @ model.W_E.T) - loss(model(tokens)))


def _lens(model, tokens, shift=1, kind="prob", first=0):
    _, cache = model.run_with_cache(tokens)
    target = tokens[:, 1:] if shift else tokens[:, :-1]
    out = []
    for h in cache["resid"][first:]:
        logits = h[:, :-1] @ model.W_E.T
        x = logits.softmax(-1) if kind == "prob" else logits
        out.append(x.gather(-1, target[..., None])[..., 0])
    return torch.stack(out)


def _patch(model, clean, corrupted, periods, layer, head, reverse=False, normalise=True, heads=None):
    from core.causal.patching import metric
    cl, cc = model.run_with_cache(clean)
    kl, kc = model.run_with_cache(corrupted)
    mc, mk = float(metric(cl, clean, periods)), float(metric(kl, clean, periods))
    base, donor = (cc, kc) if reverse else (kc, cc)
    which = [head] if heads is None else heads
    h = base["resid"][layer + 1] + sum(donor["head_out"][layer][:, x] - base["head_out"][layer][:, x] for x in which)
    for block in model.blocks[layer + 1:]:
        h = block(h)
    m = float(metric(h @ model.W_E.T, clean, periods))
    return (m - mk) / (mc - mk) if normalise else m - mk


def _path(model, clean, corrupted, periods, sender, receiver, which="k", direction="noising", biases=True):
    """The solution's path patch with the patched inputs ("k", "qv", ...), the direction and the biases as
    parameters."""
    from core.causal.patching import metric
    from core.model.rope import apply_rope, rope_cos_sin
    (sl, sh), (rl, rh) = sender, receiver
    cl, cc = model.run_with_cache(clean)
    kl, kc = model.run_with_cache(corrupted)
    mc, mk = float(metric(cl, clean, periods)), float(metric(kl, clean, periods))
    base, donor = (cc, kc) if direction == "noising" else (kc, cc)
    h = base["resid"][rl]
    moved = h + donor["head_out"][sl][:, sh] - base["head_out"][sl][:, sh]
    blk = model.blocks[rl]
    x = {p: (moved if p in which else h) for p in "qkv"}  # which: the inputs that read the change
    q, k, v = x["q"] @ blk.W_Q[rh], x["k"] @ blk.W_K[rh], x["v"] @ blk.W_V[rh]
    if model.cfg.bias and biases:
        q, k, v = q + blk.b_Q[rh], k + blk.b_K[rh], v + blk.b_V[rh]
    T, dh = clean.shape[1], model.cfg.d_head
    cos, sin = rope_cos_sin(T, dh, 10000.0)
    s = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).transpose(-1, -2) / math.sqrt(dh)
    A = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    h = base["resid"][rl + 1] + A @ v @ blk.W_O[rh] - base["head_out"][rl][:, rh]
    for later in model.blocks[rl + 1:]:
        h = later(h)
    return (float(metric(h @ model.W_E.T, clean, periods)) - mk) / (mc - mk)


def _detector(pattern, tokens, shift=True, per_row=False, normalise=True):
    T = tokens.shape[0]
    same = tokens[None, :] == tokens[:, None]
    mask = torch.zeros(T, T, dtype=torch.bool)
    if shift:
        mask[:, 1:] = same[:, :-1]
    else:
        mask = same & (torch.arange(T)[None] < torch.arange(T)[:, None])
    mask &= torch.ones(T, T, dtype=torch.bool).tril()
    on = pattern * mask
    if per_row:
        rows = mask.any(-1)
        return (on.sum(-1)[:, rows] / pattern.sum(-1)[:, rows]).mean(-1)
    return on.sum((-2, -1)) / (pattern.sum((-2, -1)) if normalise else 1)


def _step(shift=True, zero=True, step=True, reduction="mean"):
    def train_step(model, optimizer, tokens):
        logits = model(tokens)
        V = logits.shape[-1]
        pred, target = (logits[:, :-1], tokens[:, 1:]) if shift else (logits, tokens)
        loss = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction=reduction)
        if zero:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        return loss.item()
    return train_step


def _spectral(M):
    return torch.linalg.matrix_norm(M, 2)


def _drop_lnv(steps, losses, vocab_size):
    return next((s for s, l in zip(steps, losses) if l < math.log(vocab_size)), None)


def _drop_index(steps, losses, vocab_size):
    return next((i for i, l in enumerate(losses) if l < math.log(vocab_size) / 2), None)


def _drop_last(steps, losses, vocab_size):
    below = [s for s, l in zip(steps, losses) if l < math.log(vocab_size) / 2]
    return below[-1] if below else None


def _drop_le(steps, losses, vocab_size):
    return next((s for s, l in zip(steps, losses) if l <= math.log(vocab_size) / 2), None)


# The second set of exercises: hooks, attribution, composition, knock-outs, path patching into q and v, faithfulness


def _hooked_loop_var(model, tokens, periods):
    """A hook made in a loop that reads the loop variable when it runs."""
    scores = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    edits = {}
    for l in range(model.cfg.n_layers):
        def hook(pattern):
            scores[l] = sol("induction_score")(pattern, periods)  # noqa: B023 (the mistake it shows)
            return pattern
        edits[f"blocks.{l}.attn.hook_pattern"] = hook
    model.run_with_hooks(tokens, edits=edits)
    return scores


def _hooked(score_fn, transpose=False):
    def hooked_induction_scores(model, tokens, periods):
        scores = {}

        def store(l):
            def hook(pattern):
                scores[l] = score_fn(pattern, periods)
                return pattern
            return hook
        model.run_with_hooks(tokens, edits={f"blocks.{l}.attn.hook_pattern": store(l)
                                            for l in range(model.cfg.n_layers)})
        out = torch.stack([scores[l] for l in range(model.cfg.n_layers)])
        return out.T if transpose else out
    return hooked_induction_scores


def _core_of(A, B):
    return torch.linalg.qr(A.double())[1] @ torch.linalg.qr(B.T.double())[1].T


def _svals_squared(A, B):
    M = _core_of(A, B)
    return torch.linalg.eigvalsh(M.T @ M).flip(0)


def _comps(model, writer_layer, reader_layer, k_transposed=True, v_swapped=False, readers_first=False, diff=False):
    from core.reading.composition import composition_baseline
    bw, br = model.blocks[writer_layer], model.blocks[reader_layer]
    ov_w = torch.einsum("hdk,hkm->hdm", bw.W_V, bw.W_O)[:, None]
    qk = torch.einsum("hdk,hmk->hdm", br.W_Q, br.W_K)[None]
    ov_r = torch.einsum("hdk,hkm->hdm", br.W_V, br.W_O)[None]
    pairs = [(ov_w, qk), (ov_w, qk.transpose(-1, -2) if k_transposed else qk),
             (ov_r, ov_w) if v_swapped else (ov_w, ov_r)]
    s = torch.stack([(a @ b).norm(dim=(-2, -1)) / (a.norm(dim=(-2, -1)) * b.norm(dim=(-2, -1))).clamp_min(1e-30)
                     for a, b in pairs])
    s = s.transpose(-1, -2) if readers_first else s
    base = composition_baseline(model.cfg.d_model, model.cfg.d_head)
    base = torch.tensor([base[k] for k in "QKV"])[:, None, None]
    return s, s - base if diff else s / base


def _ov_of(model, layer, head):
    return model.blocks[layer].W_V[head] @ model.blocks[layer].W_O[head]


def _qk_of(model, layer, head):
    return model.blocks[layer].W_Q[head] @ model.blocks[layer].W_K[head].T


def _parts_wrong(model, tokens, head, rope=True, scale=True, mask=False, swap=False):
    from core.model.rope import apply_rope, rope_cos_sin
    _, cache = model.run_with_cache(tokens[None])
    parts = torch.cat([model.W_E[tokens][None], cache["head_out"][0][0]])
    T, dh = tokens.shape[0], model.cfg.d_head
    q, k = parts @ model.blocks[1].W_Q[head], parts @ model.blocks[1].W_K[head]
    if rope:
        cos, sin = rope_cos_sin(T, dh, 10000.0)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    out = torch.einsum("sid,pjd->psij" if swap else "pid,sjd->psij", q, k) / (math.sqrt(dh) if scale else 1)
    return out.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")) if mask else out


def _knock_wrong(model, tokens, periods, head, mode, clean=False, block=1, always_zero=False, shift=0, score=None):
    def knock(z):
        z = z.clone()
        h = head + shift
        z[:, h] = 0.0 if mode == "zero" or always_zero else z[:, h].mean(0, keepdim=True)
        return z
    name = f"blocks.{block}.attn.hook_pattern"
    _, cache = model.run_with_hooks(tokens, edits={} if clean else {"blocks.0.attn.hook_z": knock}, cache=[name])
    return (score or sol("induction_score"))(cache[name], periods)


def _dla_wrong(model, tokens, current=False, centred=False, embedding=True, biases=True):
    _, cache = model.run_with_cache(tokens)
    B, T = tokens.shape
    parts = ([model.W_E[tokens]] if embedding else []) + [o[:, h] for o in cache["head_out"]
                                                         for h in range(model.cfg.n_heads)]
    if model.cfg.bias and biases:
        parts += [b.b_O.expand(B, T, -1) for b in model.blocks]
    W = model.W_E - model.W_E.mean(0) if centred else model.W_E
    rows = W[tokens[:, :-1] if current else tokens[:, 1:]]
    return torch.stack([(p[:, :-1] * rows).sum(-1) for p in parts])


def _ld_wrong(model, clean, corrupted, periods, same_place=False, sign=1, later=False, pool_sum=False):
    _, cache = model.run_with_cache(clean)
    B, T = clean.shape
    parts = [model.W_E[clean]] + [o[:, h] for o in cache["head_out"] for h in range(model.cfg.n_heads)]
    if model.cfg.bias:
        parts += [b.b_O.expand(B, T, -1) for b in model.blocks]
    total, n = torch.zeros(len(parts)), 0
    for b in range(B):
        L = int(periods[b])
        t = torch.arange(L, T) if later else torch.arange(L + 1, 2 * L)
        wrong = corrupted[b, t] if same_place else corrupted[b, t - L]
        d = sign * (model.W_E[clean[b, t]] - model.W_E[wrong])
        total += torch.stack([(p[b, t - 1] * d).sum() for p in parts])
        n += len(t)
    return total if pool_sum else total / n


def _path_in(model, clean, corrupted, periods, sender, receiver, path, inputs=None, direction="noising"):
    """path_patch_inputs with the inputs that read the change as a parameter (default: `path` alone)."""
    return _path(model, clean, corrupted, periods, sender, receiver, which=path if inputs is None else inputs,
                 direction=direction)


def _faith_wrong(model, clean, corrupted, periods, circuit, replace="corrupted-mean", result="share"):
    """circuit_faithfulness with the replacement and what is returned as parameters."""
    from core.causal.patching import metric
    from core.model.rope import apply_rope, rope_cos_sin
    H, T, dh = model.cfg.n_heads, clean.shape[1], model.cfg.d_head
    cl, cc = model.run_with_cache(clean)
    kl, kc = model.run_with_cache(corrupted)
    src = {"corrupted-mean": kc, "clean-mean": cc}.get(replace, kc)
    c1, c2 = cc["head_out"][0], cc["head_out"][1]
    m1, m2 = (src["head_out"][0].mean(0, keepdim=True), src["head_out"][1].mean(0, keepdim=True))
    if replace == "zero":
        m1, m2 = m1 * 0, m2 * 0
    cos, sin = rope_cos_sin(T, dh, 10000.0)
    blk = model.blocks[1]

    def F(kept):
        x = {p: cc["resid"][1] + sum(m1[:, h] - c1[:, h] for h in range(H) if ("path", h, p) not in kept)
             for p in "qkv"}
        final = cc["resid"][2].clone()
        for h in range(H):
            if ("direct", h) not in kept:
                final = final + m1[:, h] - c1[:, h]
            if ("head", h) in kept:
                q, k = apply_rope(x["q"] @ blk.W_Q[h], cos, sin), apply_rope(x["k"] @ blk.W_K[h], cos, sin)
                s = (q @ k.transpose(-1, -2) / math.sqrt(dh)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                          float("-inf"))
                A = s.softmax(-1)
                final = final + A @ (x["v"] @ blk.W_V[h]) @ blk.W_O[h] - c2[:, h]
            else:
                final = final + m2[:, h] - c2[:, h]
        return float(metric(final @ model.W_E.T, clean, periods))

    every = {("path", h, p) for h in range(H) for p in "qkv"} | {(k, h) for k in ("direct", "head") for h in range(H)}
    f_c, f_none = F(set(circuit)), F(set())
    if result == "raw":
        return f_c
    if result == "gap":
        mc, mk = float(metric(cl, clean, periods)), float(metric(kl, clean, periods))
        return (f_c - f_none) / (mc - mk)
    return (f_c - f_none) / (F(every) - f_none)


def _detectors_wrong(pattern, tokens, sink_all=False, self_back=0, per_row=False, normalise=True):
    T = pattern.shape[-1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    masks = [j == i - 1, (j == 0) if sink_all else (j == 0) & (i >= 1), j == i - self_back]
    out = []
    for m in masks:
        on = pattern * m
        if per_row:
            rows = m.any(-1)
            out.append((on.sum(-1)[:, rows] / pattern.sum(-1)[:, rows]).mean(-1))
        else:
            out.append(on.sum((-2, -1)) / (pattern.sum((-2, -1)) if normalise else 1))
    return tuple(out)


def _bigram_student(tokens, n_states, alpha, ahead=0, prior=True, unigram=False, k_alpha=True):
    """A student's bigram loop: counts[b, a, j] of the transitions seen through token t + ahead."""
    B, T = tokens.shape
    out = torch.zeros(B, T, n_states, dtype=torch.float64)
    for b in range(B):
        x = tokens[b].tolist()
        for t in range(T):
            row = torch.zeros(n_states, dtype=torch.float64)
            if unigram:
                for i in range(t + 1):
                    row[x[i]] += 1
            else:
                for i in range(min(t + ahead, T - 1)):
                    if x[i] == x[t]:
                        row[x[i + 1]] += 1
            if not prior:
                out[b, t] = row / row.sum()
            else:
                out[b, t] = (row + alpha) / (row.sum() + (n_states if k_alpha else 1) * alpha)
    return out


def _kl_student(logits, strategy_probs, reverse=False, renormalise=True, naive_log=False, over_t=False):
    k = strategy_probs.shape[-1]
    log_q = F.log_softmax(logits[..., :k].double(), -1) if renormalise else F.log_softmax(logits.double(), -1)[..., :k]
    p = strategy_probs.double()
    if reverse:
        kl = (log_q.exp() * (log_q - p.log())).sum(-1)
    elif naive_log:
        kl = (p * (p.log() - log_q)).sum(-1)
    else:
        kl = (torch.xlogy(p, p) - p * log_q).sum(-1)
    return kl.mean() if over_t else kl.mean(0)


def _successor_student(pattern, tokens, back=1, strict=False, every_query=False, roll=False):
    """A student's successor score: keys j <= i (j < i when strict) with tokens[j - back] == tokens[i]."""
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H), 0
    for b in range(B):
        x = tokens[b].roll(back).tolist() if roll else None
        for i in range(T):
            top = i if strict else i + 1
            if roll:
                keys = [j for j in range(top) if x[j] == int(tokens[b, i])]
            else:
                keys = [j for j in range(top) if 0 <= j - back < T and int(tokens[b, j - back]) == int(tokens[b, i])]
            if keys or every_query:
                total += pattern[b, :, i, keys].sum(-1) if keys else 0.0
                count += 1
    return total / count


WRONG = {  # exercise -> [(id, wrong function, the start of the sentence it must get)]
    "tile_patterns": [
        ("longest-period", _tile_longest, "Every row is tiled with the longest period"),
        ("shifted", _tile_shifted, "Off by one position: position t holds"),
        ("float", lambda **a: sol("tile_patterns")(**a).float(), "Returned dtype torch.float32"),
        ("one-short", lambda patterns, periods, seq_len: sol("tile_patterns")(patterns, periods, seq_len - 1),
         "Wrong shape: axis 1 (T) has size")],
    "later_copy_mask": [
        ("positions", _mask_positions, "Off by one position: column c is the target t = c + 1"),
        ("first-copy", lambda periods, seq_len: ~_mask_strict(periods - 1, seq_len), "That is the first copy"),
        ("full-length", _mask_full, "Wrong shape: axis 1 (t - 1, the targets t = 1..T-1) has size"),
        ("second-only", lambda periods, seq_len: _mask_strict(periods - 1, seq_len)
         & (torch.arange(1, seq_len)[None] < 2 * periods[:, None]), "That is the second copy only")],
    "causal_pattern": [
        ("no-rope", lambda q, k: _pattern(q, k, rope=False), "No rotary positions"),
        ("no-scale", lambda q, k: _pattern(q, k, scale=False), "The scores are not scaled"),
        ("query-softmax", lambda q, k: _pattern(q, k, axis=-2), "Normalised over the wrong axis"),
        ("transposed", lambda q, k: _pattern(q, k).transpose(-1, -2), "Rows and columns swapped")],
    "prev_token_score": [
        ("self", _prev_self, "Off by one position: that is A[i, i]"),
        ("sum", lambda pattern: pattern.diagonal(-1, dim1=-2, dim2=-1).sum((0, 2)), "Not normalised"),
        ("all-queries", lambda pattern: pattern.diagonal(-1, dim1=-2, dim2=-1).sum((0, 2))
         / (pattern.shape[0] * pattern.shape[-1]), "Averaged over all T queries"),
        ("per-sequence", lambda pattern: pattern.diagonal(-1, dim1=-2, dim2=-1).mean(-1),
         "Wrong shape: got [")],
    "induction_score": [
        ("duplicate", _induction_dup, "Off by one position: A[i, i-L] is the earlier copy"),
        ("any-copy", lambda pattern, periods: sol("induction_any_score")(pattern, periods),
         "Score on the wrong copy: this counts every earlier copy"),
        ("per-sequence", _induction_per_seq, "Averaged per sequence first")],
    "induction_any_score": [
        ("latest", lambda pattern, periods: sol("induction_score")(pattern, periods),
         "Score on the wrong copy: that is the latest copy only"),
        ("mean-over-copies", _any_mean, "Divided by the number of copies"),
        ("copies-themselves", _any_offset, "Off by one position: A[i, i-kL]")],
    "ov_copying_matrix": [
        ("transposed", lambda W_E, W_V, W_O: (W_E @ W_V @ W_O @ W_E.T).T, "Rows and columns swapped"),
        ("centred", lambda W_E, W_V, W_O: (lambda C: C - C.mean(-1, keepdim=True))(W_E @ W_V @ W_O @ W_E.T),
         "Rows centred"),
        ("no-unembedding", lambda W_E, W_V, W_O: W_E @ W_V @ W_O, "You stopped at W_E W_V W_O"),
        ("raises", lambda W_E, W_V, W_O: W_E @ W_O @ W_V @ W_E.T, "Your function raised RuntimeError")],
    "copying_scores": [
        ("columns", _copy_cols, "Rows and columns swapped in ov_diag_top1"),
        ("uncentred", _copy_uncentred, "ov_copying_eig is not centred"),
        ("count", _copy_count, "ov_diag_top1 is not normalised")],
    "rotary_profile": [
        ("key-rotated", lambda q, k, n_offsets: _rot(q, k, n_offsets, "k"), "Rotated the key instead of the query"),
        ("both", lambda q, k, n_offsets: _rot(q, k, n_offsets, "both"), "Rotated both q and k"),
        ("no-scale", lambda q, k, n_offsets: _rot(q, k, n_offsets, scale=False), "The scores are not scaled")],
    "k_composition": [
        ("q-composition", lambda W_OV, W_QK: float((W_OV @ W_QK).norm() / (W_OV.norm() * W_QK.norm())),
         "That is Q-composition"),
        ("unnormalised", lambda W_OV, W_QK: float((W_OV @ W_QK.T).norm()), "Not normalised"),
        ("spectral", lambda W_OV, W_QK: float(_spectral(W_OV @ W_QK.T) / (_spectral(W_OV) * _spectral(W_QK))),
         "Used the spectral norm")],
    "ablation_delta": [
        ("sign", lambda **a: _ablate(**a, sign=-1), "The sign is flipped"),
        ("positions-mean", lambda **a: _ablate(**a, over=1), "Mean taken over the positions"),
        ("all-targets", lambda **a: _ablate(**a, targets="all"), "Scored every target")],
    "logit_lens": [
        ("no-shift", lambda model, tokens: _lens(model, tokens, shift=0), "Off by one position"),
        ("logits", lambda model, tokens: _lens(model, tokens, kind="logit"), "Not normalised"),
        ("no-embedding", lambda model, tokens: _lens(model, tokens, first=1), "The embedding stage is missing")],
    "head_patch_effect": [
        ("reverse", lambda **a: _patch(**a, reverse=True), "Patched the wrong way round"),
        ("unnormalised", lambda **a: _patch(**a, normalise=False), "Not normalised"),
        ("whole-block", lambda **a: _patch(**a, heads=list(range(a["model"].cfg.n_heads))),
         "Patch at the wrong place: you patched every head of the block")],
    "path_patch_keys": [
        ("queries", lambda **a: _path(**a, which="q"), "Patch at the wrong place: that is the path into the receiver's "
         "queries"),
        ("values", lambda **a: _path(**a, which="v"), "Patch at the wrong place: that is the path into the receiver's "
         "values"),
        ("denoising", lambda **a: _path(**a, direction="denoising"), "Patched the wrong way round"),
        ("no-biases", lambda **a: _path(**a, biases=False), "The biases are missing")],
    "induction_detector": [
        ("duplicate-mask", lambda pattern, tokens: _detector(pattern, tokens, shift=False), "Off by one position"),
        ("per-row", lambda pattern, tokens: _detector(pattern, tokens, per_row=True), "Normalised per row"),
        ("unnormalised", lambda pattern, tokens: _detector(pattern, tokens, normalise=False), "Not normalised")],
    "train_step": [
        ("no-shift", _step(shift=False), "Off by one position"),
        ("no-zero-grad", _step(zero=False), "The gradients pile up"),
        ("no-step", _step(step=False), "The weights did not change"),
        ("sum", _step(reduction="sum"), "Not normalised")],
    "find_drop": [
        ("ln-V", _drop_lnv, "The line is ln V / 2"),
        ("index", _drop_index, "Returned the position in the list"),
        ("last", _drop_last, "Returned the last step below the line"),
        ("less-or-equal", _drop_le, "A loss exactly at ln V / 2 has not dropped yet")],
    "hooked_induction_scores": [
        ("loop-variable", _hooked_loop_var, "Every hook wrote into the last block's row"),
        ("duplicate", _hooked(_induction_dup), "Off by one position: A[i, i-L]"),
        ("any-copy", _hooked(lambda p, periods: sol("induction_any_score")(p, periods)), "Score on the wrong copy"),
        ("transposed", _hooked(lambda p, periods: sol("induction_score")(p, periods), transpose=True),
         "Rows and columns swapped: row l is block l")],
    "factored_svals": [
        ("formed", lambda A, B: torch.linalg.svdvals((A @ B).double())[:A.shape[1]],
         "You formed the full m x n product"),
        ("squared", _svals_squared, "Those are the squared singular values"),
        ("ascending", lambda A, B: torch.linalg.svdvals(_core_of(A, B)).flip(0), "Smallest first"),
        ("factors", lambda A, B: torch.linalg.svdvals(A.double()) * torch.linalg.svdvals(B.double()),
         "That is the product of each factor's own singular values")],
    "composition_scores": [
        ("k-as-q", lambda **a: _comps(**a, k_transposed=False), "K-composition is the same as Q"),
        ("v-order", lambda **a: _comps(**a, v_swapped=True), "V-composition multiplied in the wrong order"),
        ("readers-first", lambda **a: _comps(**a, readers_first=True), "Rows and columns swapped"),
        ("difference", lambda **a: _comps(**a, diff=True), "Subtracted the baseline")],
    "composed_ov_circuit": [
        ("reader-first", lambda model, writer, reader: model.W_E @ _ov_of(model, *reader) @ _ov_of(model, *writer)
         @ model.W_E.T, "Multiplied in the wrong order"),
        ("transposed", lambda **a: sol("composed_ov_circuit")(**a).T, "Rows and columns swapped"),
        ("reader-only", lambda model, writer, reader: model.W_E @ _ov_of(model, *reader) @ model.W_E.T,
         "The writer is missing")],
    "full_k_circuit": [
        ("query-side", lambda model, writer, reader: model.W_E @ _ov_of(model, *writer) @ _qk_of(model, *reader)
         @ model.W_E.T, "That is the Q-composition circuit"),
        ("scaled", lambda model, writer, reader: sol("full_k_circuit")(model, writer, reader)
         / math.sqrt(model.cfg.d_head),
         "Scaled by 1/sqrt(d_head)"),
        ("transposed", lambda **a: sol("full_k_circuit")(**a).T, "Rows and columns swapped")],
    "score_parts": [
        ("no-rope", lambda **a: _parts_wrong(**a, rope=False), "No rotary positions"),
        ("no-scale", lambda **a: _parts_wrong(**a, scale=False), "The scores are not scaled"),
        ("swapped-parts", lambda **a: _parts_wrong(**a, swap=True), "Query and key parts swapped"),
        ("masked", lambda **a: _parts_wrong(**a, mask=True), "Masked")],
    "knockout_rescore": [
        ("clean", lambda **a: _knock_wrong(**a, clean=True), "Those are the clean run's scores"),
        ("block-1", lambda **a: _knock_wrong(**a, block=0), "Scored the wrong block"),
        ("always-zero", lambda **a: _knock_wrong(**a, always_zero=True), "Zero-ablated although the mode is 'mean'"),
        ("any-copy", lambda **a: _knock_wrong(**a, score=lambda p, periods: sol("induction_any_score")(p, periods)),
         "Score on the wrong copy")],
    "direct_logit_attribution": [
        ("current-token", lambda **a: _dla_wrong(**a, current=True), "Off by one position"),
        ("centred", lambda **a: _dla_wrong(**a, centred=True), "Centred"),
        ("no-embedding", lambda **a: _dla_wrong(**a, embedding=False), "The embedding part is missing"),
        ("no-biases", lambda **a: _dla_wrong(**a, biases=False), "The biases are missing")],
    "logit_diff_attribution": [
        ("same-place", lambda **a: _ld_wrong(**a, same_place=True), "The wrong token is the one"),
        ("sign", lambda **a: _ld_wrong(**a, sign=-1), "The sign is flipped"),
        ("later-copies", lambda **a: _ld_wrong(**a, later=True), "Scored every later-copy target"),
        ("sum", lambda **a: _ld_wrong(**a, pool_sum=True), "Not normalised")],
    "path_patch_inputs": [
        ("keys", lambda **a: _path_in(**a, inputs="k"), "Patch at the wrong place: that is the path into the "
         "receiver's keys"),
        ("q-v-swapped", lambda **a: _path_in(**a, inputs="v" if a["path"] == "q" else "q"),
         "Patch at the wrong place: queries and values swapped"),
        ("all-inputs", lambda **a: _path_in(**a, inputs="qkv"), "Patch at the wrong place: all three inputs"),
        ("denoising", lambda **a: _path_in(**a, direction="denoising"), "Patched the wrong way round")],
    "circuit_faithfulness": [
        ("raw", lambda **a: _faith_wrong(**a, result="raw"), "That is F(circuit) itself"),
        ("zero", lambda **a: _faith_wrong(**a, replace="zero"), "Zero-ablated"),
        ("clean-mean", lambda **a: _faith_wrong(**a, replace="clean-mean"), "Averaged over the clean run"),
        ("gap", lambda **a: _faith_wrong(**a, result="gap"), "Normalised by the patching gap")],
    "bigram_strategy": [
        ("no-prior", lambda **a: _bigram_student(**a, prior=False), "No pseudo-count"),
        ("future", lambda **a: _bigram_student(**a, ahead=1), "Looking at the future"),
        ("unigram", lambda **a: _bigram_student(**a, unigram=True), "That counts the occurrences of j"),
        ("alpha-once", lambda **a: _bigram_student(**a, k_alpha=False), "The prior adds alpha to each of the k"),
        ("one-short", lambda **a: sol("bigram_strategy")(**a)[:, :-1], "Wrong shape: axis 1 (T, the position t)")],
    "strategy_kl": [
        ("reversed", lambda **a: _kl_student(**a, reverse=True), "The KL the wrong way round"),
        ("not-renormalised", lambda **a: _kl_student(**a, renormalise=False), "Not renormalised over the states"),
        ("mean-over-T", lambda **a: _kl_student(**a, over_t=True), "Averaged over the positions too"),
        ("nan-at-zero", lambda **a: _kl_student(**a, naive_log=True), "A strategy probability of 0 gives")],
    "successor_score": [
        ("duplicate", lambda pattern, tokens: _successor_student(pattern, tokens, back=0, strict=True),
         "That is the duplicate-token score"),
        ("every-query", lambda pattern, tokens: _successor_student(pattern, tokens, every_query=True),
         "Averaged over every query"),
        ("key-before", lambda pattern, tokens: _successor_student(pattern, tokens, back=-1),
         "Off by one position: that is the key before"),
        ("strict", lambda pattern, tokens: _successor_student(pattern, tokens, strict=True),
         "Off by one position: the key j = i counts too"),
        ("roll", lambda pattern, tokens: _successor_student(pattern, tokens, roll=True),
         "Key 0 has no previous token")],
    "attention_detectors": [
        ("sink-query-0", lambda pattern, tokens: _detectors_wrong(pattern, tokens, sink_all=True),
         "The sink mask counts query 0"),
        ("self-previous", lambda pattern, tokens: _detectors_wrong(pattern, tokens, self_back=1),
         "Off by one position: self is the key j = i"),
        ("per-row", lambda pattern, tokens: _detectors_wrong(pattern, tokens, per_row=True), "Normalised per row"),
        ("unnormalised", lambda pattern, tokens: _detectors_wrong(pattern, tokens, normalise=False), "Not normalised")],
}
WRONG_CASES = [(name, wid, fn, start) for name, items in WRONG.items() for wid, fn, start in items]


def test_every_exercise_has_three_wrong_answers():
    assert set(WRONG) == set(NAMES)
    assert all(len(items) >= 3 for items in WRONG.values())


@pytest.mark.parametrize("name,wid,fn,start", WRONG_CASES, ids=[f"{c[0]}-{c[1]}" for c in WRONG_CASES])
def test_wrong_answer_gets_its_sentence(name, wid, fn, start):
    fn.__name__ = name
    verdict = checks.check(name, fn)
    assert not verdict.ok
    assert verdict.message.startswith(start), verdict.message
    assert "Traceback" not in verdict.message and verdict.message.count(". ") <= 1, verdict.message


# ---------------------------------------------------------------------------------------------
# Solutions, templates, students' exceptions


@pytest.mark.parametrize("file", SHIPPED)
def test_solutions_pass_on_every_shipped_file_and_the_planted_models(file):
    checks.use_model(ROOT / "checkpoints" / file)
    try:
        for ex in EXERCISES:
            verdict = checks.check(ex.name, solution_function(ex))
            assert verdict.ok, verdict
            assert "planted" in verdict.message or ex.name == "train_step", verdict
    finally:
        checks.use_model(ROOT / "checkpoints" / DEFAULT)


MARKOV_FILES = sorted(p.name for p in (ROOT / "checkpoints" / "markov").glob("*.pt"))


@pytest.mark.parametrize("file", MARKOV_FILES)
def test_a_markov_model_runs_part_5_on_itself_and_parts_1_to_4_refuse_it(file):
    """A Markov-chain model picked: part 5's solutions pass on it (every block) and on the planted cases; every
    exercise of parts 1-4 refuses it with a sentence naming what to pick."""
    from core.model.checkpoints import read_checkpoint
    from exercises.catalogue import MARKOV_SECTION

    assert len(MARKOV_FILES) >= 3
    checks.use_model(ROOT / "checkpoints" / "markov" / file)
    try:
        for ex in EXERCISES:
            if ex.section == MARKOV_SECTION:
                verdict = checks.check(ex.name, solution_function(ex))
                assert verdict.ok and f"the picked model {file}" in verdict.message, verdict
                assert "planted" in verdict.message, verdict
            else:
                with pytest.raises(ValueError, match=f"{file} was trained on the Markov-chain task; {ex.name} checks "
                                                     "on a model of the repeat task"):
                    checks.check(ex.name, solution_function(ex))
        n_layers = read_checkpoint(ROOT / "checkpoints" / "markov" / file)[0].cfg.n_layers
        verdict = checks.check("successor_score", sol("successor_score"))
        assert verdict.message.count(f"the picked model {file}, block") == n_layers, verdict
    finally:
        checks.use_model(ROOT / "checkpoints" / DEFAULT)


def test_part_5_on_a_repeat_model_checks_on_the_shipped_markov_run():
    verdict = checks.check("successor_score", sol("successor_score"))
    assert verdict.ok, verdict
    assert "the shipped Markov run markov-2block.pt, block 2" in verdict.message, verdict
    assert f"not on the picked model {DEFAULT}, a model of the repeat task" in verdict.message, verdict
    model, task, label = engine.markov_source()
    assert label == "the shipped Markov run markov-2block.pt" and task.n_states == model.cfg.vocab_size == 3


def test_part_5_solutions_agree_with_core_and_the_planted_answers():
    """bigram_strategy is core's bigram strategy (each row sums to 1, a state never left is uniform);
    strategy_kl at the positions with a target is core's strategy_kl, and 0 for a model that predicts the
    strategy; the planted pattern's successor scores are 1 (exactly on a successor key) and 0 (on key 0)."""
    from core.model.markov import MarkovTask, head_scores, sample_markov, strategy_kl, strategy_probs
    from exercises.cases import part5_markov as p5

    task = MarkovTask(n_states=4, concentration=0.5, seq_len=40)
    tokens, _ = sample_markov(task, 6, generator=torch.Generator().manual_seed(2))
    probs = sol("bigram_strategy")(tokens, 4, 0.5)
    assert torch.allclose(probs, strategy_probs(tokens, task)["bigram"])
    assert torch.allclose(probs.sum(-1), torch.ones(6, 40, dtype=torch.float64))
    assert torch.allclose(probs[:, 0], torch.full((6, 4), 0.25, dtype=torch.float64))  # nothing seen yet
    # by hand: tokens 0 1 0 1 1, alpha 1, 2 states; at t = 4 (x = 1) the transitions out of 1 seen are 1->0, 1->1
    hand = sol("bigram_strategy")(torch.tensor([[0, 1, 0, 1, 1]]), 2, 1.0)
    assert hand[0, 4].tolist() == pytest.approx([2 / 4, 2 / 4]) and hand[0, 2].tolist() == pytest.approx([1 / 3, 2 / 3])
    logits = torch.randn(6, 40, 7, generator=torch.Generator().manual_seed(3))
    kl = sol("strategy_kl")(logits, probs)
    assert kl.shape == (40,)
    assert torch.allclose(kl[:-1], strategy_kl(logits, tokens, task)["bigram"]["per_position"])
    exact = torch.cat([probs.log(), torch.randn(6, 40, 2, dtype=torch.float64)], -1)
    assert float(sol("strategy_kl")(exact, probs).abs().max()) < 1e-12
    planted_tokens = p5.markov_batch(MarkovTask(n_states=3, seq_len=30), n=4, seed=3)
    pattern = p5._planted_pattern(planted_tokens)
    score = sol("successor_score")(pattern, planted_tokens)
    assert score[:2].tolist() == pytest.approx([1.0, 0.0])
    assert torch.allclose(score, head_scores(pattern, planted_tokens)["induction"])
    assert torch.allclose(p5._successor(pattern, planted_tokens), score)


def test_untouched_templates_say_not_written_yet():
    for name in NAMES:
        verdict = checks.check(name, template(name))
        assert not verdict.ok and verdict.message.startswith("not written yet"), verdict


def test_templates_are_generated_from_the_solutions():
    for section in SECTIONS:
        assert (ROOT / "exercises" / f"{section}.py").read_text() == build.template_source(section), (
            f"exercises/{section}.py is stale: python -m exercises.build")


def test_a_raising_function_gets_its_own_sentence():
    def prev_token_score(pattern):
        scores = pattern[:, :, 1:, 0].mean((0, 2))
        return scores[99]  # a student's bug

    verdict = checks.check("prev_token_score", prev_token_score)
    assert verdict.message.startswith("Your function raised IndexError at line"), verdict.message
    assert "return scores[99]" in verdict.message and "core/" not in verdict.message

    def returns_nothing(pattern):
        pattern.diagonal(-1, dim1=-2, dim2=-1).mean((0, 2))

    assert checks.check("prev_token_score", returns_nothing).message.startswith("Returned None")


def test_a_student_writing_into_the_inputs_changes_nothing_else():
    def prev_token_score(pattern):
        pattern.zero_()
        return pattern[0, :, 0, 0]

    assert not checks.check("prev_token_score", prev_token_score).ok
    assert checks.check("prev_token_score", sol("prev_token_score")).ok


def test_a_mistake_is_read_on_the_failing_case_with_the_largest_answers():
    """Block 1's induction scores are all about 0: there every wrong sum agrees with the first listed
    mistake within the tolerance. A sum over the two latest copies only is not "the latest copy only"."""
    def induction_any_score(pattern, periods):
        B, H, T, _ = pattern.shape
        total, count = torch.zeros(H), 0
        for b in range(B):
            L = int(periods[b])
            for i in range(L, T):
                total += pattern[b, :, i, list(range(i + 1 - L, -1, -L))[:2]].sum(-1)
                count += 1
        return total / count

    verdict = checks.check("induction_any_score", induction_any_score)
    assert not verdict.ok
    assert not verdict.message.startswith("Score on the wrong copy"), verdict.message
    assert "block 1" not in verdict.message, verdict.message
    assert engine.size((torch.tensor([0.5, -2.0]), 1.5)) == 2.0 and engine.size(torch.tensor([True])) == 0.0


def test_a_whole_number_returned_as_a_float_is_a_step():
    """find_drop returning 225.0 for the step 225 passes; 225.5 does not."""
    def find_drop(steps, losses, vocab_size):
        step = sol("find_drop")(steps, losses, vocab_size)
        return None if step is None else float(step) + shift

    shift = 0.0
    assert checks.check("find_drop", find_drop).ok
    shift = 0.5
    verdict = checks.check("find_drop", find_drop)
    assert not verdict.ok and verdict.message.startswith("Returned ") and ".5, the lab finds" in verdict.message


# ---------------------------------------------------------------------------------------------
# Notebooks: run top to bottom, same verdicts as the plain files

RUNNER = r"""
import json, sys
for path in sys.argv[1:]:
    nb = json.load(open(path))
    ns = {"__name__": "__main__"}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"<{path} cell {i}>", "exec"), ns)
    print("NOTEBOOK RAN", path, flush=True)
"""


@pytest.mark.slow
def test_notebooks_run_top_to_bottom_with_the_plain_files_verdicts(tmp_path):
    paths, expected = [], []
    for section in SECTIONS:
        for filled in (True, False):
            nb = json.loads(build.notebook_bytes(section, f"checkpoints/{DEFAULT}", "the 2-block model"))
            assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 5
            for cell in nb["cells"]:
                src = "".join(cell["source"])
                if filled and cell["cell_type"] == "code" and "NotImplementedError" in src:
                    name = src.split("def ", 1)[1].split("(", 1)[0]
                    cell["source"] = [build._solution_source(name)]
            path = tmp_path / f"{section}-{'solved' if filled else 'blank'}.ipynb"
            path.write_text(json.dumps(nb))
            paths.append(str(path))
            module = importlib.import_module(f"exercises.{'solutions.' if filled else ''}{section}")
            expected += [str(v) for v in checks.check_module(module)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS", checks.MODEL_ENV)}
    env["OMP_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", RUNNER, *paths], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("NOTEBOOK RAN") == len(paths)
    printed = [line for line in out.stdout.splitlines() if line.startswith(("✅", "❌"))]
    assert printed == expected
    assert sum(line.startswith("✅") for line in printed) == len(NAMES)


PROBE = r"""
def pytest_ignore_collect(collection_path, config):
    if collection_path.is_file() and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        print("WOULD COLLECT", collection_path.relative_to(config.rootpath).as_posix(), flush=True)
        return True  # listed, not imported: the probe costs no test module's imports
    return None
"""


@pytest.mark.worker  # a second pytest collecting the whole suite: the rest tier
def test_the_suite_from_the_root_leaves_the_templates_alone(tmp_path):
    """`python -m pytest` from the root (no paths, as .ci/run calls it) walks tests/ and never reaches
    exercises/test_*.py, whose untouched templates fail. A plugin lists every test file pytest would collect."""
    (tmp_path / "collect_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", checks.MODEL_ENV)}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "collect_probe"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    files = [line.split(" ", 2)[2] for line in out.stdout.splitlines() if line.startswith("WOULD COLLECT ")]
    assert "tests/test_exercises.py" in files, out.stdout[-2000:] + out.stderr[-2000:]
    assert not [f for f in files if not f.startswith("tests/")], files


# ---------------------------------------------------------------------------------------------
# The page


@pytest.mark.app
def test_exercises_page_lists_the_path_with_downloads_hints_and_solutions():
    at = open_app("app_pages/exercise_page.py", DEFAULT)
    assert [h.value for h in at.header] == list(SECTIONS.values())
    assert [h.value for h in at.subheader][1:] == [f"{i}. {ex.title}" for i, ex in enumerate(EXERCISES, 1)]
    assert len(at.table) == 1  # the path at a glance
    labels = [e.label for e in at.expander]
    assert labels.count("Solution") == len(EXERCISES)
    assert sum(label.startswith("Hint") for label in labels) == sum(len(ex.hints) for ex in EXERCISES)
    downloads = [b.proto.label for b in at.get("download_button")]
    assert sum(d.startswith("📓") for d in downloads) == len(SECTIONS) == sum(d.startswith("🐍") for d in downloads)
    text = " ".join(m.value for m in at.markdown)
    assert "difficulty 🔴" in text and "python -m pytest exercises" in text
    notebooks = [d for d in downloads if d.startswith("📓")]
    assert len(set(notebooks[:4])) == 1 and notebooks[4] == "📓 Notebook for the shipped Markov run", notebooks
    assert "checkpoints/markov/markov-2block.pt" in " ".join(c.value for c in at.caption)
    assert not at.exception


@pytest.mark.app
def test_exercises_page_with_a_markov_model_offers_part_5_on_it():
    """markov/markov-2block.pt picked: part 5's notebook checks on it, parts 1-4's on the default model."""
    at = open_app("app_pages/exercise_page.py", "markov/markov-2block.pt")
    label = at.session_state["picked_model"]
    info = " ".join(x.value for x in at.info)
    assert "was trained on the Markov-chain task: part 5's notebook checks on it" in info, info
    notebooks = [b.proto.label for b in at.get("download_button") if b.proto.label.startswith("📓")]
    assert notebooks[:4] == ["📓 Notebook for the default model"] * 4, notebooks
    assert len(notebooks) == 5 and notebooks[4] != notebooks[0] and "default" not in notebooks[4], (label, notebooks)
    assert [h.value for h in at.header][-1] == SECTIONS["part5_markov"]
    assert not at.exception


def test_the_part_5_notebook_picks_the_markov_model_it_is_made_for():
    nb = build.notebook("part5_markov", "checkpoints/markov/markov-1block.pt", "the 1-block Markov run")
    setup = "".join(nb["cells"][1]["source"])
    assert 'checks.use_model("checkpoints/markov/markov-1block.pt")' in setup
    assert [ex.name for ex in EXERCISES if ex.section == "part5_markov"] == [
        "bigram_strategy", "strategy_kl", "successor_score"]


def test_the_notebook_for_a_session_model_asks_for_its_file():
    nb = build.notebook("part1_attention", None, "my run")
    setup = "".join(nb["cells"][1]["source"])
    assert 'MODEL = "my-model.pt"' in setup and "checks.use_model(MODEL)" in setup


def test_solution_copies_the_model_it_trains():
    model = copy.deepcopy(checks.picked()["model"])
    before = model.W_E.clone()
    assert checks.check("train_step", sol("train_step")).ok
    assert torch.equal(model.W_E, before) and torch.equal(checks.picked()["model"].W_E, before)


def test_the_planted_model_gives_the_solutions_its_known_answers():
    """exercises/planted.py's induction circuit: 1.1 is a previous-token head, 2.2 an induction head that
    copies (its OV copying matrix is a multiple of the identity), 1.1 K-composes into 2.2 well above
    chance, patching 2.2 restores M fully and the key path 1.1 -> 2.2 is needed."""
    from core.causal.corruptions import corrupt
    from core.model.task import sample_batch
    from core.reading.composition import composition_baseline
    from exercises import planted

    m = planted.planted_induction_model()
    g = torch.Generator().manual_seed(0)
    tokens, periods = sample_batch(planted.TASK, 16, planted.V, generator=g)
    with torch.no_grad():
        _, cache = m.run_with_cache(tokens)
        b0, b1 = m.blocks
        assert float(sol("prev_token_score")(cache["pattern"][0])[0]) > 0.99
        assert float(sol("induction_any_score")(cache["pattern"][1], periods)[1]) > 0.6
        C = sol("ov_copying_matrix")(m.W_E, b1.W_V[1], b1.W_O[1])
        assert sol("copying_scores")(C) == pytest.approx((1.0, 1.0))
        k = sol("k_composition")(b0.W_V[0] @ b0.W_O[0], b1.W_Q[1] @ b1.W_K[1].T)
        assert k > 2 * composition_baseline(planted.D, planted.D // planted.H)["K"]
        corrupted = corrupt(tokens, periods, planted.V, g)
        T = 2 * int(periods.max())
        args = (m, tokens[:, :T], corrupted[:, :T], periods)
        assert sol("head_patch_effect")(*args, *planted.INDUCTION) > 0.95
        assert sol("path_patch_keys")(*args, planted.PREV, planted.INDUCTION) < 0.3


@pytest.mark.slow
def test_pytest_on_a_student_file_reports_not_written_yet():
    """The plain-file way, as a student runs it from the root: each untouched function is one failure
    whose line says "not written yet", and nothing errors."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS", checks.MODEL_ENV)}
    env["OMP_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf",
                          "exercises/test_part4_training.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.rstrip().splitlines()[-1].startswith("2 failed in"), out.stdout[-2000:]  # no errors
    assert out.stdout.count("not written yet: replace the `raise NotImplementedError`") >= 2, out.stdout[-2000:]


def test_the_model_to_check_on_comes_from_the_environment(monkeypatch):
    """`ATTENTION_LAB_MODEL=my-model.pt python -m pytest exercises` checks on the student's own file."""
    monkeypatch.setenv(checks.MODEL_ENV, str(ROOT / "checkpoints" / "variable-period-1block.pt"))
    engine._PICKED.clear()
    try:
        assert checks.picked()["label"] == "variable-period-1block.pt"
        verdict = checks.check("prev_token_score", sol("prev_token_score"))
        assert verdict.ok and "variable-period-1block.pt, block 1" in verdict.message
    finally:
        checks.use_model(ROOT / "checkpoints" / DEFAULT)


def test_the_k_composition_hint_states_the_baseline_the_circuits_page_uses():
    """The exercise "K-composition against a random baseline" computes one: its hint
    names core.reading.composition.composition_baseline and its value at the shipped models' shapes."""
    import re

    from core.reading.composition import composition_baseline

    hint = next(e for e in EXERCISES if e.name == "k_composition").hints[-1]
    value, d_model, d_head = re.search(r"\((\d\.\d+) at d_model (\d+), d_head (\d+)\)", hint).groups()
    assert float(value) == round(composition_baseline(int(d_model), int(d_head))["K"], 2)
    from core.model.checkpoints import read_checkpoint

    model, _ = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    assert (model.cfg.d_model, model.cfg.d_head) == (int(d_model), int(d_head))


def test_the_page_reads_each_solution_as_python_would():
    """The Exercises page reads the solutions as text (exercises/catalogue.py: importing them imports torch): each
    statement and solution it shows is the docstring and source inspect gives of the imported function."""
    import inspect

    from exercises.catalogue import EXERCISES, solution_function

    for ex in EXERCISES:
        fn = solution_function(ex)
        assert ex.solution() == inspect.getsource(fn), ex.name
        assert ex.statement() == inspect.cleandoc(fn.__doc__ or ""), ex.name


def test_the_readme_counts_the_exercises():
    """README.md's self-study section says how many functions there are to write: the catalogue's count."""
    import re

    said = re.search(r"\*\*✍️ Exercises\.\*\* (\d+) functions", (ROOT / "README.md").read_text())
    assert said and int(said.group(1)) == len(EXERCISES)
