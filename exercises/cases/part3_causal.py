"""Part 3's checks (the logit lens, patching and a detector): each exercise's cases, the lab's answer and
the typical mistakes, each a wrong computation with its sentence."""
from __future__ import annotations

import copy
import functools

import torch

from core.model.config import ModelConfig
from core.model.symbols import block_label, head_label
from core.model.tinycharlm import TinyCharLM
from exercises import planted
from exercises.cases.inputs import batch, head_list
from exercises.engine import Case, Check

CHECKS: dict[str, Check] = {}  # exercise name -> its check, each one written below the functions it uses


def _lens_cases(model, task, label):
    tokens, _ = batch(model, task, n=4)
    return [Case(label, {"model": model, "tokens": tokens})]


def _lens(model, tokens, shift=1, kind="prob", drop=0):
    from core.causal.logit_lens import lens

    if shift == 1 and kind == "prob":
        return lens(model, tokens)[0][drop:]
    _, cache = model.run_with_cache(tokens)
    target = tokens[:, 1:] if shift else tokens[:, :-1]
    out = []
    for h in cache["resid"]:
        logits = h[:, :-1] @ model.W_E.T
        x = {"prob": logits.softmax(-1), "logit": logits, "logprob": logits.log_softmax(-1)}[kind]
        out.append(x.gather(-1, target[..., None])[..., 0])
    return torch.stack(out)[drop:]


CHECKS["logit_lens"] = Check(_lens_cases, _lens, ("stage, 0 = the embedding", "B", "T - 1, the target t at t - 1"), [
    ("Off by one position: the logits at position t - 1 predict the next token x_t, not the current x_{t-1}",
     lambda model, tokens: _lens(model, tokens, shift=0)),
    ("Not normalised: return the softmax probability of the right token, not its logit",
     lambda model, tokens: _lens(model, tokens, kind="logit")),
    ("That is the log-probability: return the probability (softmax, not log_softmax)",
     lambda model, tokens: _lens(model, tokens, kind="logprob")),
    ("The embedding stage is missing: cache['resid'] holds n_layers + 1 streams, stage 0 is the embedding",
     lambda model, tokens: _lens(model, tokens, drop=1))])


def _patch_inputs(model, task, n=6, seed=0):
    from core.causal.corruptions import corrupt

    g = torch.Generator().manual_seed(seed)
    from core.model.task import sample_batch

    tokens, periods = sample_batch(task, n, model.cfg.vocab_size, generator=g)
    corrupted = corrupt(tokens, periods, model.cfg.vocab_size, g)
    T = 2 * int(periods.max())
    return tokens[:, :T], corrupted[:, :T], periods


def _runs(model, clean, corrupted, periods):
    from core.causal.patching import prepare

    return prepare(model, clean, corrupted, periods)


def _hp_cases(model, task, label):
    if model.cfg.n_layers == 0:
        return []
    clean, corrupted, periods = _patch_inputs(model, task)
    return [Case(f"{label}, head {head_label(l, h)}", {"model": model, "clean": clean, "corrupted": corrupted,
                                                     "periods": periods, "layer": l, "head": h})
            for l, h in head_list(model, label)]


def _hp(model, clean, corrupted, periods, layer, head, how="ok"):
    from core.causal import patching

    if not (0 <= layer < model.cfg.n_layers):
        raise ValueError("no such block")
    runs = _runs(model, clean, corrupted, periods)
    if how == "ok":
        return float(runs.effect(patching.patch_heads(model, runs, [(layer, head)])))
    if how == "block":
        return float(runs.effect(patching.patch_heads(model, runs, [(layer, h) for h in range(model.cfg.n_heads)])))
    if how == "stream":
        return patching.resid_all_positions_effect(model, runs, layer)
    m = patching.patch_heads(model, runs, [(layer, head)])
    if how == "raw":
        return m
    if how == "diff":
        return m - runs.m_corrupted
    if how == "reverse":  # the corrupted head output into the clean run
        h = runs.clean_cache["resid"][layer + 1] + (runs.corrupted_cache["head_out"][layer][:, head]
                                                     - runs.clean_cache["head_out"][layer][:, head])
        logits, _ = model.run_with_hooks(resid=h, start=layer + 1)
        return float(runs.effect(float(patching.metric(logits, clean, periods))))
    raise ValueError(how)


CHECKS["head_patch_effect"] = Check(_hp_cases, _hp, (), [
    ("Patched the wrong way round: put the head's clean output into the corrupted run",
     lambda **a: _hp(**a, how="reverse")),
    ("Not normalised: return (M(patched) - M(corrupted)) / (M(clean) - M(corrupted))",
     lambda **a: _hp(**a, how="diff")),
    ("That is M(patched) itself: return the patch effect (M(patched) - M(corrupted)) / (M(clean) - M(corrupted))",
     lambda **a: _hp(**a, how="raw")),
    ("Patch at the wrong place: you patched every head of the block; patch only head `head`",
     lambda **a: _hp(**a, how="block")),
    ("Patch at the wrong place: you patched the whole stream entering the block; patch one head's output",
     lambda **a: _hp(**a, how="stream")),
    ("Patch at the wrong place: one block off (layer is 0-based: block 2 is layer 1)",
     lambda **a: _hp(**(a | {"layer": a["layer"] - 1}))),
    ("Patch at the wrong place: one block off (layer is 0-based: block 2 is layer 1)",
     lambda **a: _hp(**(a | {"layer": a["layer"] + 1})))])


@functools.cache
def _biased_model() -> TinyCharLM:
    """A small random two-block model with biases: random b_Q, b_K, b_V and b_O, large enough that a
    receiver recomputed without them moves the patch effect."""
    g = torch.Generator().manual_seed(1)
    model = TinyCharLM(ModelConfig(vocab_size=planted.V,
                                   d_model=32, n_heads=2, n_layers=2, bias=True)).eval()
    with torch.no_grad():
        model.reset_parameters(generator=g)
        for block in model.blocks:
            block.W_O.mul_(6.0)  # heads that matter, as in planted.random_model
            for bias in (block.b_Q, block.b_K, block.b_V, block.b_O):
                bias.normal_(0.0, 0.5, generator=g)
    return model


def _pp_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    out = []
    models = [(model, label)]
    if label.startswith("a small random"):  # b_Q, b_K, b_V must be in the receiver's q, k, v
        models.append((_biased_model(), "a small random model with biases"))
    for m, name in models:
        clean, corrupted, periods = _patch_inputs(m, task)
        pairs = [(planted.PREV, planted.INDUCTION)] if name.startswith("the planted") else [((0, 0), (1, 1)),
                                                                                             ((0, 1), (1, 0))]
        out += [Case(f"{name}, {head_label(*s)} into the keys of {head_label(*r)}",
                     {"model": m, "clean": clean, "corrupted": corrupted, "periods": periods, "sender": s,
                      "receiver": r}) for s, r in pairs]
    return out


def _pp(model, clean, corrupted, periods, sender, receiver, path="k", direction="noising", whole=False,
        biases=True):
    from core.causal import patching, path_patching

    runs = _runs(model, clean, corrupted, periods)
    if not biases and model.cfg.bias:  # the receiver's q, k, v recomputed without b_Q, b_K, b_V; the runs keep them
        model = copy.deepcopy(model)
        block, rh = model.blocks[receiver[0]], receiver[1]
        with torch.no_grad():
            for bias in (block.b_Q, block.b_K, block.b_V):
                bias[rh] = 0.0
    if whole:  # the sender's corrupted output everywhere: every later head reads it
        sl, sh = sender
        h = runs.clean_cache["resid"][sl + 1] + (runs.corrupted_cache["head_out"][sl][:, sh]
                                                  - runs.clean_cache["head_out"][sl][:, sh])
        logits, _ = model.run_with_hooks(resid=h, start=sl + 1)
        return float(runs.effect(float(patching.metric(logits, clean, periods))))
    return path_patching.path_effect(model, runs, tuple(sender), tuple(receiver), path, direction)


CHECKS["path_patch_keys"] = Check(_pp_cases, _pp, (), [
    ("Patch at the wrong place: that is the path into the receiver's queries; change its keys only",
     lambda **a: _pp(**a, path="q")),
    ("Patch at the wrong place: that is the path into the receiver's values; change its keys only",
     lambda **a: _pp(**a, path="v")),
    ("Patched the wrong way round: noising starts from the clean run and brings in the sender's "
     "corrupted output", lambda **a: _pp(**a, direction="denoising")),
    ("The biases are missing: with model.cfg.bias the receiver's q, k and v add b_Q, b_K and b_V",
     lambda **a: _pp(**a, biases=False)),
    ("Patch at the wrong place: you changed the sender's output for every later head; only the "
     "receiver's keys should read the change", lambda **a: _pp(**a, whole=True))])


def _det_cases(model, task, label):
    from core.archetypes.head_matches import model_patterns, random_char_prompt
    from core.model.symbols import encode_text

    if model.cfg.n_layers == 0:
        return []
    if label.startswith("the planted") or label.startswith("a small"):
        g = torch.Generator().manual_seed(5)
        tokens = torch.randint(0, model.cfg.vocab_size, (7,), generator=g).repeat(3)
    else:
        tokens = torch.as_tensor(encode_text(random_char_prompt(period=10, copies=3, vocab_size=model.cfg.vocab_size),
                                               model.cfg.vocab_size))
    pats = model_patterns(model, tokens)
    return [Case(f"{label}, {block_label(l)} on a pattern repeated 3 times",
                 {"pattern": p.reshape(-1, *p.shape[-2:]), "tokens": tokens}) for l, p in enumerate(pats)]


def _det(pattern, tokens, mask_name="induction", rows="all", normalise=True):
    from core.reading.detectors import detector_mask, detector_score

    mask = detector_mask(mask_name, tokens)
    if not normalise:
        return (pattern * mask).sum((-2, -1))
    return detector_score(pattern, mask, rows=rows)


CHECKS["induction_detector"] = Check(_det_cases, _det, ("H",), [
    ("Off by one position: that mask marks the earlier copies themselves (duplicate-token); the induction "
     "key is the token after one, token_{j-1} == token_i", lambda pattern, tokens: _det(pattern, tokens,
                                                                                        "duplicate_token")),
    ("Normalised per row: the score is the share of all the head's attention, sum(A M) / sum(A), not a "
     "mean of the rows' shares", lambda pattern, tokens: _det(pattern, tokens, rows="target")),
    ("Not normalised: divide by the head's whole attention sum(A)",
     lambda pattern, tokens: _det(pattern, tokens, normalise=False))])
