"""Part 3's checks (the logit lens, attribution, patching and detectors): each exercise's cases, the lab's answer and
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


def _dla_cases(model, task, label):
    tokens, _ = batch(model, task, n=4)
    out = [Case(label, {"model": model, "tokens": tokens})]
    if label.startswith("a small random"):  # each block's b_O is a part of its own
        m = _biased_model()
        out.append(Case("a small random model with biases", {"model": m, "tokens": batch(m, task, n=4)[0]}))
    return out


def _dla(model, tokens, shift=1, centred=False, drop_embedding=False, biases=True, shares=False):
    from core.reading.attribution import direct_logit_attribution, stream_parts

    if shift and not (centred or drop_embedding or shares) and biases:
        terms = direct_logit_attribution(model, tokens)
    else:
        parts = stream_parts(model, tokens)[:, :, :-1]  # [P, B, T-1, D]
        if not biases and model.cfg.bias:
            parts = parts[:-model.cfg.n_layers]
        if drop_embedding:
            parts = parts[1:]
        W = model.W_E - model.W_E.mean(0) if centred else model.W_E
        terms = (parts * W[tokens[:, 1:] if shift else tokens[:, :-1]]).sum(-1)
        if shares:
            terms = terms / terms.sum(0)
    return terms


def _dla_run(fn, model, tokens):
    """The student's terms and their sum over the parts, set against the lab's and the right token's logit."""
    out = fn(model=model, tokens=tokens)
    return out, torch.as_tensor(out).sum(0)


def _dla_ref(**a):
    terms = _dla(**a)
    return terms, terms.sum(0)


def _dla_wrong(**kw):
    def wrong(**a):
        terms = _dla(**a, **kw)
        return terms, terms.sum(0)
    return wrong


CHECKS["direct_logit_attribution"] = Check(_dla_cases, _dla_ref, (), [
    ("Off by one position: the logits at position t - 1 predict the next token x_t; dot with W_E[x_t], the "
     "target's row, not the current token's", _dla_wrong(shift=0)),
    ("Centred: the terms of the right token's logit itself (W_E[x_t]), not of the logit minus the mean logit",
     _dla_wrong(centred=True)),
    ("The embedding part is missing: the direct path W_E[x] is part 0 of the stream",
     _dla_wrong(drop_embedding=True)),
    ("The biases are missing: with model.cfg.bias each block's b_O is a part of its own (the last parts)",
     _dla_wrong(biases=False)),
    ("Normalised: return each part's term of the logit, not its share of the total", _dla_wrong(shares=True))],
    run=_dla_run)


def _ld_cases(model, task, label):
    clean, corrupted, periods = _patch_inputs(model, task)
    out = [Case(label, {"model": model, "clean": clean, "corrupted": corrupted, "periods": periods})]
    if label.startswith("a small random"):
        m = _biased_model()
        clean, corrupted, periods = _patch_inputs(m, task)
        out.append(Case("a small random model with biases",
                        {"model": m, "clean": clean, "corrupted": corrupted, "periods": periods}))
    return out


def _ld(model, clean, corrupted, periods, wrong="offered", sign=1.0, targets="second", run="clean", pool="mean"):
    from core.causal.attribution import logit_diff_attribution
    from core.causal.patching import target_mask
    from core.model.task import copy_masks
    from core.reading.attribution import stream_parts

    if (wrong, sign, targets, run, pool) == ("offered", 1.0, "second", "clean", "mean"):
        return logit_diff_attribution(model, clean, corrupted, periods)
    parts = stream_parts(model, clean if run == "clean" else corrupted)
    mask = target_mask(periods, clean.shape[1]) if targets == "second" else copy_masks(periods, clean.shape[1])["later"]
    b, i = mask.nonzero(as_tuple=True)
    other = corrupted[b, i + 1 - periods[b]] if wrong == "offered" else corrupted[b, i + 1]
    terms = sign * (parts[:, b, i] * (model.W_E[clean[b, i + 1]] - model.W_E[other])).sum(-1)
    return terms.mean(-1) if pool == "mean" else terms.sum(-1)


def _ld_run(fn, **a):
    out = fn(**a)
    return out, torch.as_tensor(out).sum()


def _ld_ref(**a):
    terms = _ld(**a)
    return terms, terms.sum()


def _ld_wrong(**kw):
    def wrong(**a):
        terms = _ld(**a, **kw)
        return terms, terms.sum()
    return wrong


CHECKS["logit_diff_attribution"] = Check(_ld_cases, _ld_ref, (), [
    ("The wrong token is the one the corrupted run's first copy offers at that place, corrupted[t - L], not "
     "corrupted[t] (which the corruption left as it was)", _ld_wrong(wrong="same-place")),
    ("The sign is flipped: the logit difference is the right token's logit minus the wrong one's",
     _ld_wrong(sign=-1.0)),
    ("Scored every later-copy target: M's targets, and the logit difference's, are the second copy's, L+1 <= t < 2L",
     _ld_wrong(targets="later")),
    ("Read on the corrupted run: the attribution splits the clean run's stream", _ld_wrong(run="corrupted")),
    ("Not normalised: average the terms over the targets, do not sum them", _ld_wrong(pool="sum"))], run=_ld_run)


def _patch_inputs(model, task):
    from core.causal.corruptions import corrupt
    from core.model.task import sample_batch

    g = torch.Generator().manual_seed(0)
    tokens, periods = sample_batch(task, 6, model.cfg.vocab_size, generator=g)
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


def _ppi_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    out = []
    models = [(model, label)] + ([(_biased_model(), "a small random model with biases")]
                                 if label.startswith("a small random") else [])
    for m, name in models:
        clean, corrupted, periods = _patch_inputs(m, task)
        pairs = [(planted.PREV, planted.INDUCTION)] if name.startswith("the planted") else [((0, 0), (1, 1)),
                                                                                             ((0, 1), (1, 0))]
        out += [Case(f"{name}, {head_label(*s)} into the {'queries' if p == 'q' else 'values'} of {head_label(*r)}",
                     {"model": m, "clean": clean, "corrupted": corrupted, "periods": periods, "sender": s,
                      "receiver": r, "path": p}) for s, r in pairs for p in ("q", "v")]
    return out


def _ppi(model, clean, corrupted, periods, sender, receiver, path, inputs=None, direction="noising", whole=False):
    from core.causal import path_patching

    if inputs is None and not whole:
        return path_patching.path_effect(model, _runs(model, clean, corrupted, periods), tuple(sender),
                                         tuple(receiver), path, direction)
    if whole:
        return _pp(model, clean, corrupted, periods, sender, receiver, whole=True)
    runs = _runs(model, clean, corrupted, periods)
    (sl, sh), (rl, rh) = sender, receiver
    from core.causal.path_patching import receiver_edits
    from core.model.hooks import hook_name

    delta = (runs.corrupted_cache["head_out"][sl][:, sh] - runs.clean_cache["head_out"][sl][:, sh])[None]
    edits = {}
    for p in inputs:
        edits.update(receiver_edits(model, rl, [rh], p, delta))
    name = hook_name(rl, "attn.hook_result")
    _, cache = model.run_with_hooks(resid=runs.clean_cache["resid"][rl][None], start=rl, stop=rl + 1, edits=edits,
                                    cache=[name])
    h = runs.clean_cache["resid"][rl + 1] + cache[name][0][:, rh] - runs.clean_cache["head_out"][rl][:, rh]
    logits, _ = model.run_with_hooks(resid=h, start=rl + 1)
    from core.causal import patching

    return float(runs.effect(float(patching.metric(logits, clean, periods))))


def _other_input(which):
    return lambda **a: _ppi(**a, inputs=[which] if which != "other" else ["v" if a["path"] == "q" else "q"])


CHECKS["path_patch_inputs"] = Check(_ppi_cases, _ppi, (), [
    ("Patch at the wrong place: that is the path into the receiver's keys; change only the input `path` names",
     _other_input("k")),
    ("Patch at the wrong place: queries and values swapped ('q' is the receiver's queries, 'v' its values)",
     _other_input("other")),
    ("Patch at the wrong place: all three inputs of the receiver read the change; only the input `path` should",
     lambda **a: _ppi(**a, inputs=["q", "k", "v"])),
    ("Patched the wrong way round: noising starts from the clean run and brings in the sender's corrupted "
     "output", lambda **a: _ppi(**a, direction="denoising")),
    ("Patch at the wrong place: you changed the sender's output for every later head; only the receiver's "
     "input `path` should read the change", lambda **a: _ppi(**a, whole=True))])


def _faith_cases(model, task, label):
    if model.cfg.n_layers != 2 or model.cfg.bias:
        return []
    clean, corrupted, periods = _patch_inputs(model, task)
    H = model.cfg.n_heads
    if label.startswith("the planted"):
        circuits = [("the induction circuit (1.1 into the keys, 2.2)", frozenset({("path", planted.PREV[1], "k"),
                                                                                ("head", planted.INDUCTION[1])}))]
    else:
        heads = frozenset(("head", h) for h in range(H))
        circuits = [("every key path and every block-2 head", heads | {("path", h, "k") for h in range(H)}),
                    ("every key and value path, every direct path, block 2's first head",
                     frozenset({("path", h, p) for h in range(H) for p in "kv"} | {("direct", h) for h in range(H)}
                               | {("head", 0)}))]
    return [Case(f"{label}, {what}", {"model": model, "clean": clean, "corrupted": corrupted, "periods": periods,
                                     "circuit": c}) for what, c in circuits]


def _faith(model, clean, corrupted, periods, circuit, how="ok"):
    from core.causal.circuit import elements, faithfulness

    runs = _runs(model, clean, corrupted, periods)
    if how == "zero" or how == "clean-mean":  # the same F with another replacement: a model whose runs are changed
        import dataclasses

        cache = dict(runs.corrupted_cache)
        if how == "zero":  # every head's mean output set to 0: its output times 0 has mean 0
            cache["head_out"] = [x * 0.0 for x in cache["head_out"]]
        else:
            cache["head_out"] = runs.clean_cache["head_out"]
        runs = dataclasses.replace(runs, corrupted_cache=cache)
    f = lambda c: faithfulness(model, runs, c)  # noqa: E731
    f_c, f_none, f_all = f(circuit), f(frozenset()), f(elements(model))
    if how == "raw":
        return f_c
    if how == "gap":
        return (f_c - f_none) / (runs.m_clean - runs.m_corrupted)
    return (f_c - f_none) / (f_all - f_none)


CHECKS["circuit_faithfulness"] = Check(_faith_cases, _faith, (), [
    ("That is F(circuit) itself: return the share recovered, (F(C) - F(none)) / (F(all) - F(none))",
     lambda **a: _faith(**a, how="raw")),
    ("Zero-ablated: an element outside the circuit carries its head's mean output over the corrupted batch, "
     "not 0", lambda **a: _faith(**a, how="zero")),
    ("Averaged over the clean run: the mean output comes from the corrupted batch (the reference distribution)",
     lambda **a: _faith(**a, how="clean-mean")),
    ("Normalised by the patching gap M(clean) - M(corrupted): the share is measured between F(none) and F(all)",
     lambda **a: _faith(**a, how="gap"))])


def _det3(pattern, tokens, sink_from=1, self_back=0, rows="all", normalise=True, prev_back=1):
    from core.reading.detectors import detector_mask, detector_score

    T = pattern.shape[-1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    if (sink_from, self_back, prev_back) == (1, 0, 1):
        masks = [detector_mask(n, tokens) for n in ("previous_token", "first_token", "self")]
    else:
        masks = [j == i - prev_back, (j == 0) & (i >= sink_from), j == i - self_back]
    if not normalise:
        return tuple((pattern * m).sum((-2, -1)) for m in masks)
    return tuple(detector_score(pattern, m, rows=rows) for m in masks)


CHECKS["attention_detectors"] = Check(_det_cases, _det3, ("H",), [
    ("The sink mask counts query 0, which can attend nowhere but key 0: first_token is j = 0 for the queries "
     "i >= 1 only", lambda pattern, tokens: _det3(pattern, tokens, sink_from=0)),
    ("Off by one position: self is the key j = i, the query's own position",
     lambda pattern, tokens: _det3(pattern, tokens, self_back=1)),
    ("Off by one position: the previous token is the key j = i - 1",
     lambda pattern, tokens: _det3(pattern, tokens, prev_back=2)),
    ("Normalised per row: the score is the share of all the head's attention, sum(A M) / sum(A), not a mean of "
     "the rows' shares", lambda pattern, tokens: _det3(pattern, tokens, rows="target")),
    ("Not normalised: divide by the head's whole attention sum(A)",
     lambda pattern, tokens: _det3(pattern, tokens, normalise=False))])
