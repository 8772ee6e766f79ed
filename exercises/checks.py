"""Checks that teach: each runs a student's function on the picked model and on small planted models,
compares it with the lab's own computation (imported from core), and says in one sentence what is
wrong. `check(name, fn)` returns a Verdict; a function that raises gets a sentence of its own.

The picked model: `use_model(path)`, else $ATTENTION_LAB_MODEL, else checkpoints/variable-period-2block.pt.
Every check has a list of typical mistakes, each a wrong computation with its sentence: when the
student's answer matches one, that sentence is the verdict.
"""
from __future__ import annotations

import copy
import math
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from core.model.symbols import head_label
from exercises import planted
from exercises.catalogue import BY_NAME

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "checkpoints" / "variable-period-2block.pt"
MODEL_ENV = "ATTENTION_LAB_MODEL"
NOT_WRITTEN = "not written yet"
TOL = 1e-4


@dataclass
class Verdict:
    name: str
    ok: bool
    message: str

    def __str__(self) -> str:
        return f"{'✅' if self.ok else '❌'} {self.name}: {self.message}"


@dataclass
class Case:
    label: str
    args: dict


@dataclass
class Check:
    cases: Callable  # (model, task, label) -> list[Case]
    reference: Callable  # (**args) -> the right answer
    axes: tuple = ()  # names of the answer's axes, for shape sentences
    mistakes: list = field(default_factory=list)  # [(sentence, fn(**args) -> a wrong answer)]
    run: Callable | None = None  # (student fn, **args) -> what is compared; default fn(**args)


# ---------------------------------------------------------------------------------------------
# The picked model

_PICKED: dict = {}


def use_model(path) -> None:
    """Check on this checkpoint file (a shipped one, or a model you trained and downloaded)."""
    from core.model.checkpoints import read_checkpoint

    model, info = read_checkpoint(str(path))
    _PICKED.update(model=model.eval(), task=info["task"], info=info, label=Path(path).name)


def picked():
    if not _PICKED:
        use_model(os.environ.get(MODEL_ENV) or DEFAULT_MODEL)
    return _PICKED


# ---------------------------------------------------------------------------------------------
# Comparing an answer with the lab's, and saying what differs


def _axis(axes: tuple, i: int) -> str:
    return f"axis {i} ({axes[i]})" if i < len(axes) else f"axis {i}"


def _compare(out, ref, axes: tuple = ()) -> str | None:
    """None when out matches ref, else one sentence (without a full stop) saying how it differs."""
    if ref is None:
        return None if out is None else f"returned {out!r}, where the lab finds none (None)"
    if out is None:
        return "returned None: is the `return` missing?"
    if isinstance(ref, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return f"returned {type(out).__name__}, expected a tuple of {len(ref)} values"
        for i, (o, r) in enumerate(zip(out, ref)):
            why = _compare(o, r)
            if why:
                return f"value {i}: {why}"
        return None
    if isinstance(ref, torch.Tensor):
        try:
            out = torch.as_tensor(out)
        except Exception:
            return f"returned a {type(out).__name__}, expected a tensor of shape {list(ref.shape)}"
        if out.shape != ref.shape:
            names = f" [{', '.join(axes)}] =" if axes else ""
            if out.dim() != ref.dim():
                return (f"wrong shape: got {list(out.shape)}, expected{names} {list(ref.shape)} "
                        f"({out.dim()} axes instead of {ref.dim()})")
            i = next(i for i, (a, b) in enumerate(zip(out.shape, ref.shape)) if a != b)
            return (f"wrong shape: {_axis(axes, i)} has size {out.shape[i]}, expected {ref.shape[i]} "
                    f"(the answer is{names} {list(ref.shape)})")
        if ref.dtype == torch.bool:
            if out.dtype != torch.bool:
                return f"returned dtype {out.dtype}, expected a bool mask"
            return None if torch.equal(out, ref) else "differs from the lab's mask"
        if not ref.is_floating_point():
            if out.is_floating_point() or out.dtype == torch.bool:
                return f"returned dtype {out.dtype}: token ids are whole numbers (torch.long)"
            if torch.equal(out.long(), ref):
                return None
            idx = tuple(int(x) for x in (out.long() != ref).nonzero()[0])
            return f"differs from the lab's at index {list(idx)}"
        out = out.detach().to(ref.dtype)
        if torch.allclose(out, ref, atol=TOL, rtol=1e-3, equal_nan=True):
            return None
        diff = (out - ref).abs().nan_to_num(float("inf"))
        idx = tuple(int(x) for x in (diff == diff.max()).nonzero()[0])
        return f"values differ from the lab's by up to {float(diff.max()):.3g} (at index {list(idx)})"
    if isinstance(ref, bool) or isinstance(ref, int) and not isinstance(ref, float):
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            out = out.item()
        return None if out == ref and not isinstance(out, float) else f"returned {out!r}, the lab finds {ref!r}"
    try:
        value = float(out)
    except Exception:
        return f"returned a {type(out).__name__}, expected a number"
    if math.isclose(value, ref, rel_tol=1e-3, abs_tol=TOL) or (math.isnan(value) and math.isnan(ref)):
        return None
    return f"gives {value:.4g}, the lab gets {ref:.4g}"


def _clone(args: dict) -> dict:
    """Fresh copies of the inputs (models too), so that a function writing into them changes nothing else."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) if isinstance(v, torch.nn.Module)
            else v for k, v in args.items()}


def _student_error(fn, exc: BaseException) -> str:
    """One sentence for an exception the student's function raised, naming their line if it is theirs."""
    if isinstance(exc, NotImplementedError):
        return f"{NOT_WRITTEN}: replace the `raise NotImplementedError` in {fn.__name__} with your code."
    home = getattr(getattr(fn, "__code__", None), "co_filename", None)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == home]
    where = f" at line {frames[-1].lineno} of your function ({frames[-1].line})" if frames else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"Your function raised {type(exc).__name__}{where}: {text}".rstrip(": ") + "."


def check(name: str, fn) -> Verdict:
    """Run the student's `fn` for exercise `name` on every case and say what is wrong, in one sentence."""
    spec = CHECKS[name]
    labels = []
    for case in cases(name):
        ref = spec.reference(**_clone(case.args))
        try:
            with torch.no_grad() if name != "train_step" else torch.enable_grad():
                out = (spec.run or (lambda f, **a: f(**a)))(fn, **_clone(case.args))
        except Exception as exc:  # the student's code: its own sentence, never the lab's traceback
            return Verdict(name, False, _student_error(fn, exc))
        why = _compare(out, ref, spec.axes)
        if why is None:
            labels.append(case.label)
            continue
        for sentence, wrong in spec.mistakes:
            try:
                with torch.enable_grad() if name == "train_step" else torch.no_grad():
                    bad = wrong(**_clone(case.args))
            except Exception:
                continue
            if _compare(bad, ref, spec.axes) is not None and _compare(out, bad, spec.axes) is None:
                return Verdict(name, False, f"{sentence} (on {case.label}).")
        return Verdict(name, False, f"{why[0].upper()}{why[1:]} (on {case.label}).")
    p = picked()
    if not any(label.startswith("the picked model") for label in labels):
        labels.append(f"not on the picked model {p['label']}, which lacks what this exercise needs "
                      "(attention blocks, or a logged history)")
    return Verdict(name, True, f"passed on {', '.join(labels)}.")


_CASES: dict = {}


def cases(name: str) -> list[Case]:
    """Every case of one exercise: the picked model first (when it has what the exercise needs), then
    the planted models. Built once per picked model (each run gets fresh copies of the tensors)."""
    p = picked()
    key = (name, id(p["model"]))
    if key not in _CASES:
        if "planted" not in _CASES:
            _CASES["planted"] = (planted.planted_induction_model(), planted.random_model())
        induction, rand = _CASES["planted"]
        out = []
        for model, task, label in ((p["model"], p["task"], f"the picked model {p['label']}"),
                                   (induction, planted.TASK, "the planted induction model"),
                                   (rand, planted.TASK, "a small random model")):
            with torch.no_grad():
                out += CHECKS[name].cases(model, task, label)
        _CASES[key] = out
    return _CASES[key]


def check_module(module) -> list[Verdict]:
    """Every exercise of a student's module (e.g. `exercises.part1_attention`)."""
    from exercises.catalogue import in_section

    section = module.__name__.rsplit(".", 1)[-1]
    return [check(ex.name, getattr(module, ex.name)) for ex in in_section(section)]


# ---------------------------------------------------------------------------------------------
# Inputs


def _batch(model, task, n: int = 8, seed: int = 0, seq_len: int | None = None):
    from core.model.task import TaskConfig, sample_batch

    if seq_len is not None:
        task = TaskConfig(task.period_min, min(task.period_max, seq_len // 2), seq_len)
    g = torch.Generator().manual_seed(seed)
    return sample_batch(task, n, model.cfg.vocab_size, generator=g)


def _patterns(model, tokens):
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return cache


def _exact(T: int, periods: torch.Tensor, kind: str, H: int = 2) -> torch.Tensor:
    """A planted pattern [B, H, T, T] with a known score: head 0 exactly `kind`, head 1 uniform over j <= i."""
    B = len(periods)
    A = torch.zeros(B, H, T, T)
    A[:, 1] = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    for b in range(B):
        L = int(periods[b])
        for i in range(T):
            j = {"prev": i - 1, "induction": i + 1 - L}[kind]
            A[b, 0, i, j if 0 <= j <= i else 0] = 1.0
    return A


# ---------------------------------------------------------------------------------------------
# Part 1


def _tile_cases(model, task, label):
    from core.model.task import TaskConfig

    if label.startswith("a small"):
        return []
    g = torch.Generator().manual_seed(1)
    periods = torch.randint(task.period_min, task.period_max + 1, (8,), generator=g)
    periods[0] = task.period_min  # at least two periods
    periods[1] = task.period_max
    patterns = torch.randint(0, model.cfg.vocab_size, (8, task.period_max), generator=g)
    del TaskConfig
    return [Case(f"{label}'s task", {"patterns": patterns, "periods": periods, "seq_len": task.seq_len})]


def _gather(patterns, periods, seq_len, shift=0, fixed=None):
    L = periods[:, None] if fixed is None else fixed
    return patterns.gather(1, ((torch.arange(seq_len)[None, :] + shift) % L).expand(len(periods), -1))


def _mask_cases(model, task, label):
    if label.startswith("a small"):
        return []
    _, periods = _batch(model, task)
    return [Case(f"{label}'s task", {"periods": periods, "seq_len": task.seq_len})]


def _later(periods, seq_len, start=1, strict=False):
    t = torch.arange(start, start + seq_len - 1)[None, :]
    return t > periods[:, None] if strict else t >= periods[:, None]


def _qk(model, tokens, layer):
    h = _patterns(model, tokens)["resid"][layer]
    b = model.blocks[layer]
    q = torch.einsum("btd,hde->bhte", h, b.W_Q)
    k = torch.einsum("btd,hde->bhte", h, b.W_K)
    if model.cfg.bias:
        q, k = q + b.b_Q[None, :, None], k + b.b_K[None, :, None]
    return q, k


def _pattern_cases(model, task, label):
    if model.cfg.n_layers == 0 or label.startswith("a small"):
        return []
    tokens, _ = _batch(model, task, n=4)
    out = []
    for layer in range(model.cfg.n_layers):
        q, k = _qk(model, tokens, layer)
        out.append(Case(f"{label}, block {layer + 1}", {"q": q, "k": k}))
    return out


def _pattern_ref(q, k, rope=True, scale=True, axis=-1, mask=1, transpose=False):
    from core.model.tinycharlm import apply_rope, rope_cos_sin

    T, dh = q.shape[-2], q.shape[-1]
    if rope:
        cos, sin = rope_cos_sin(T, dh, 10000.0, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    s = q @ k.transpose(-1, -2) / (math.sqrt(dh) if scale else 1.0)
    if mask is not None:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(mask), float("-inf"))
    A = s.softmax(axis)
    return A.transpose(-1, -2) if transpose else A


def _score_cases(model, task, label, kind="prev"):
    out = []
    if model.cfg.n_layers and not label.startswith("a small"):
        tokens, periods = _batch(model, task)
        cache = _patterns(model, tokens)
        out += [Case(f"{label}, block {l + 1}", {"pattern": cache["pattern"][l], "periods": periods})
                for l in range(model.cfg.n_layers)]
    if label.startswith("the planted"):
        _, periods = _batch(model, task, n=4, seed=3)
        out.append(Case(f"a planted pattern (head 0 exactly {kind}, head 1 uniform)",
                        {"pattern": _exact(task.seq_len, periods, kind), "periods": periods}))
    return out


def _prev_cases(model, task, label):
    return [Case(c.label, {"pattern": c.args["pattern"]}) for c in _score_cases(model, task, label, "prev")]


def _ind_cases(model, task, label):
    return _score_cases(model, task, label, "induction")


def _diag(pattern, back, first=None, pooled=True, total=False):
    """Mean (or sum) of A[i, i - back] over queries i >= first (per sequence: back, first may be [B])."""
    B, H, T, _ = pattern.shape
    back = torch.as_tensor(back).expand(B) if torch.as_tensor(back).dim() == 0 else back
    if first is None:
        first = back
    elif torch.as_tensor(first).dim() == 0:
        first = torch.as_tensor(first).expand(B)
    sums, counts = [], []
    for b in range(B):
        i = torch.arange(int(first[b]), T)
        j = i - int(back[b])
        ok = (j >= 0) & (j <= i)
        vals = torch.zeros(H, len(i))
        vals[:, ok] = pattern[b][:, i[ok], j[ok]]
        sums.append(vals.sum(-1))
        counts.append(len(i))
    S, N = torch.stack(sums), torch.tensor(counts, dtype=torch.float)
    if total:
        return S.sum(0)
    return S.sum(0) / N.sum() if pooled else (S / N[:, None]).mean(0)


def _heads(pattern, periods, score):
    from core.reading.heads import head_scores

    return head_scores(pattern, periods)[score]


def _any(pattern, periods, offset=1, mean_over_copies=False, pooled=True):
    B, H, T, _ = pattern.shape
    sums, counts = [], []
    for b in range(B):
        L = int(periods[b])
        s = torch.zeros(H)
        for i in range(L, T):
            keys = list(range(i + offset - L, -1, -L))
            v = pattern[b, :, i, keys].sum(-1) if keys else torch.zeros(H)
            s += v / max(len(keys), 1) if mean_over_copies else v
        sums.append(s)
        counts.append(T - L)
    S, N = torch.stack(sums), torch.tensor(counts, dtype=torch.float)
    return S.sum(0) / N.sum() if pooled else (S / N[:, None]).mean(0)


# ---------------------------------------------------------------------------------------------
# Part 2


def _head_list(model, label):
    """A few (layer, head) pairs of a model: every head of the last block of the picked model, the
    planted circuit's two heads, two heads of the random model."""
    if model.cfg.n_layers == 0:
        return []
    if label.startswith("the planted"):
        return [planted.PREV, planted.INDUCTION]
    last = model.cfg.n_layers - 1
    return [(last, h) for h in range(min(model.cfg.n_heads, 2))] + ([(0, 0)] if last else [])


def _ov_cases(model, task, label):
    b = model.blocks
    return [Case(f"{label}, head {head_label(l, h)}",
                 {"W_E": model.W_E.detach(), "W_V": b[l].W_V[h].detach(), "W_O": b[l].W_O[h].detach()})
            for l, h in _head_list(model, label)]


def _ov_ref(W_E, W_V, W_O):
    return W_E @ W_V @ W_O @ W_E.T


def _copy_cases(model, task, label):
    from core.reading.copying import ov_copying_matrix

    heads = [planted.INDUCTION] if label.startswith("the planted") else _head_list(model, label)
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


def _rotary_cases(model, task, label):
    from core.reading.circuits import head_qk_vectors

    out = []
    for l, h in _head_list(model, label):
        tokens, _ = _batch(model, task, n=4)
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


def _abl_cases(model, task, label):
    if model.cfg.n_layers == 0:
        return []
    tokens, periods = _batch(model, task, n=8)
    heads = _head_list(model, label)
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

    h = model.W_E[tokens]
    for l, block in enumerate(model.blocks):
        h_out, _, head_out, _ = block.forward_with_cache(h)
        if l == layer:
            out = head_out[:, head]
            h_out = h_out + (out.mean(1, keepdim=True) - out)
        h = h_out
    key = "loss_later_copies"
    return copy_metrics(h @ model.W_E.T, tokens, periods)[key] - copy_metrics(model(tokens), tokens, periods)[key]


# ---------------------------------------------------------------------------------------------
# Part 3


def _lens_cases(model, task, label):
    tokens, _ = _batch(model, task, n=4)
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
            for l, h in _head_list(model, label)]


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
        return float(runs.effect(float(patching.metric(patching.forward_from(model, h, layer + 1), clean, periods))))
    raise ValueError(how)


def _pp_cases(model, task, label):
    if model.cfg.n_layers < 2:
        return []
    clean, corrupted, periods = _patch_inputs(model, task)
    pairs = [(planted.PREV, planted.INDUCTION)] if label.startswith("the planted") else [((0, 0), (1, 1)),
                                                                                          ((0, 1), (1, 0))]
    return [Case(f"{label}, {head_label(*s)} into the keys of {head_label(*r)}",
                 {"model": model, "clean": clean, "corrupted": corrupted, "periods": periods, "sender": s,
                  "receiver": r}) for s, r in pairs]


def _pp(model, clean, corrupted, periods, sender, receiver, path="k", direction="noising", whole=False):
    from core.causal import patching, path_patching

    runs = _runs(model, clean, corrupted, periods)
    if whole:  # the sender's corrupted output everywhere: every later head reads it
        sl, sh = sender
        h = runs.clean_cache["resid"][sl + 1] + (runs.corrupted_cache["head_out"][sl][:, sh]
                                                  - runs.clean_cache["head_out"][sl][:, sh])
        return float(runs.effect(float(patching.metric(patching.forward_from(model, h, sl + 1), clean, periods))))
    return path_patching.path_effect(model, runs, tuple(sender), tuple(receiver), path, direction)


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
    return [Case(f"{label}, block {l + 1} on a pattern repeated 3 times",
                 {"pattern": p.reshape(-1, *p.shape[-2:]), "tokens": tokens}) for l, p in enumerate(pats)]


def _det(pattern, tokens, mask_name="induction", rows="all", normalise=True):
    from core.reading.detectors import detector_mask, detector_score

    mask = detector_mask(mask_name, tokens)
    if not normalise:
        return (pattern * mask).sum((-2, -1))
    return detector_score(pattern, mask, rows=rows)


# ---------------------------------------------------------------------------------------------
# Part 4


def _train_cases(model, task, label):
    if label.startswith("the planted"):
        return []
    batches = [_batch(model, task, n=4, seed=s, seq_len=min(task.seq_len, 64))[0] for s in (0, 1)]
    return [Case(f"{label}, two steps of SGD", {"model": model, "batches": batches})]


def _train_run(fn, model, batches):
    """Two steps with the student's step function on a fresh copy of the model: (loss 1, loss 2, weights)."""
    model = copy.deepcopy(model).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)  # plain SGD: a wrong loss shows in the weights
    losses = tuple(fn(model, opt, b) for b in batches)
    return (*losses, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


def _lab_step(shift=1, zero=True, step=True, reduction="mean"):
    def one(model, optimizer, tokens):
        logits = model(tokens)
        V = logits.shape[-1]
        pred = logits[:, :-1] if shift else logits
        target = tokens[:, 1:] if shift else tokens
        loss = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction=reduction)
        if zero:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        return loss.item()
    return one


def _train_wrong(**kw):
    return lambda model, batches: _train_run(_lab_step(**kw), model, batches)


def _drop_cases(model, task, label):
    if label.startswith("a small"):
        return []
    if label.startswith("the planted"):
        V = model.cfg.vocab_size  # ln 16 / 2 = 1.386
        curve = [2.77, 2.7, 2.6, 1.5, 1.2, 1.45, 0.9, 0.3, 0.2]
        steps = list(range(0, 10 * len(curve), 10))
        return [Case("a planted curve that falls at step 40", {"steps": steps, "losses": curve, "vocab_size": V}),
                Case("a planted curve that touches ln V / 2 exactly", {
                    "steps": [0, 25, 50, 75], "losses": [2.7, math.log(V) / 2, 1.0, 0.5], "vocab_size": V}),
                Case("a planted curve that never falls", {
                    "steps": [0, 100, 200], "losses": [2.7, 2.5, 2.2], "vocab_size": V})]
    history = picked()["info"].get("history") or []
    rows = [r for r in history if isinstance(r.get("loss_later_copies"), (int, float))
            and not math.isnan(r["loss_later_copies"])] if model is picked()["model"] else []
    if not rows:
        return []
    return [Case(f"{label}'s training history", {"steps": [int(r["step"]) for r in rows],
                                                  "losses": [float(r["loss_later_copies"]) for r in rows],
                                                  "vocab_size": model.cfg.vocab_size})]


def _drop(steps, losses, vocab_size, limit=None, index=False, last=False, strict=True):
    from core.model.drop import drop_step, drop_threshold

    limit = drop_threshold(vocab_size) if limit is None else limit
    below = [i for i, l in enumerate(losses) if (l < limit if strict else l <= limit)]
    if not below:
        return None
    if not (index or last or not strict) and limit == drop_threshold(vocab_size):
        return drop_step(steps, losses, vocab_size)
    i = below[-1] if last else below[0]
    return i if index else steps[i]


# ---------------------------------------------------------------------------------------------

PATTERN_AXES = ("B", "H", "T, the query i", "T, the key j")
CHECKS: dict[str, Check] = {
    "tile_patterns": Check(_tile_cases, lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len),
                           ("B", "T"), [
        ("Every row is tiled with the longest period: use each sequence's own L_b (t mod periods[b])",
         lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, fixed=patterns.shape[1])),
        ("Off by one position: position t holds patterns[b, t mod L_b], so position 0 holds the pattern's "
         "first token", lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, shift=1)),
        ("Off by one position: position t holds patterns[b, t mod L_b], so position 0 holds the pattern's "
         "first token", lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, shift=-1))]),
    "later_copy_mask": Check(_mask_cases, lambda periods, seq_len: _later(periods, seq_len),
                             ("B", "t - 1, the targets t = 1..T-1"), [
        ("Off by one position: column c is the target t = c + 1, and the target t = L (the second copy's first "
         "token) is a later-copy target too, so use t >= L", lambda periods, seq_len: _later(periods, seq_len,
                                                                                            strict=True)),
        ("That is the second copy only (L <= t < 2L): the later copies run to the end of the sequence",
         lambda periods, seq_len: _later(periods, seq_len) & (torch.arange(1, seq_len)[None] < 2 * periods[:, None])),
        ("That is the first copy (t < L): the later copies are the targets t >= L",
         lambda periods, seq_len: ~_later(periods, seq_len))]),
    "causal_pattern": Check(_pattern_cases, _pattern_ref, PATTERN_AXES, [
        ("No rotary positions: rotate q and k with apply_rope before the dot product",
         lambda q, k: _pattern_ref(q, k, rope=False)),
        ("The scores are not scaled: divide q . k by sqrt(d_head)", lambda q, k: _pattern_ref(q, k, scale=False)),
        ("Normalised over the wrong axis: the softmax runs over the keys j (the last axis), so that each "
         "row sums to 1", lambda q, k: _pattern_ref(q, k, axis=-2)),
        ("No causal mask: a query i may not attend to the keys j > i", lambda q, k: _pattern_ref(q, k, mask=None)),
        ("Off by one position: the mask must keep j = i (a query also attends to its own position)",
         lambda q, k: _pattern_ref(q, k, mask=0)),
        ("Rows and columns swapped: axis 2 is the query i and axis 3 the key j (A[..., i, j])",
         lambda q, k: _pattern_ref(q, k, transpose=True))]),
    "prev_token_score": Check(_prev_cases, lambda pattern: _diag(pattern, 1), ("H",), [
        ("Off by one position: that is A[i, i], the self score; the previous token is the key j = i - 1",
         lambda pattern: _diag(pattern, 0, 1)),
        ("Off by one position: that is two tokens back, A[i, i-2]; the previous token is the key j = i - 1",
         lambda pattern: _diag(pattern, 2)),
        ("Not normalised: average over the batch and the queries i >= 1, do not sum",
         lambda pattern: _diag(pattern, 1, total=True)),
        ("Averaged over all T queries: query 0 has no previous token, so average over the T - 1 queries i >= 1",
         lambda pattern: _diag(pattern, 1) * (pattern.shape[-1] - 1) / pattern.shape[-1]),
        ("Rows and columns swapped: A[i, i-1] is query i (axis 2) attending to key i - 1 (axis 3)",
         lambda pattern: pattern.diagonal(1, dim1=-2, dim2=-1).mean((0, 2)))]),
    "induction_score": Check(_ind_cases, lambda pattern, periods: _heads(pattern, periods, "induction"), ("H",), [
        ("Off by one position: A[i, i-L] is the earlier copy of the current token itself (the duplicate "
         "score); induction looks at the token after it, j = i + 1 - L",
         lambda pattern, periods: _heads(pattern, periods, "duplicate")),
        ("Score on the wrong copy: this counts every earlier copy (induction_any); this exercise asks for the "
         "latest copy only, j = i + 1 - L", lambda pattern, periods: _heads(pattern, periods, "induction_any")),
        ("Averaged over the wrong queries: start at i = L, the first query whose token has an earlier copy",
         lambda pattern, periods: _diag(pattern, periods - 1, periods - 1)),
        ("Averaged per sequence first: pool every (sequence, query) pair, since sequences with a shorter period "
         "have more queries", lambda pattern, periods: _diag(pattern, periods - 1, periods, pooled=False))]),
    "induction_any_score": Check(_ind_cases, lambda pattern, periods: _heads(pattern, periods, "induction_any"),
                                 ("H",), [
        ("Score on the wrong copy: that is the latest copy only; induction_any adds the token after every "
         "earlier copy, j = i + 1 - kL", lambda pattern, periods: _heads(pattern, periods, "induction")),
        ("Off by one position: A[i, i-kL] are the earlier copies themselves; take the token after each, "
         "j = i + 1 - kL", lambda pattern, periods: _any(pattern, periods, offset=0)),
        ("Divided by the number of copies: sum the attention over the copies k, then average over the queries",
         lambda pattern, periods: _any(pattern, periods, mean_over_copies=True)),
        ("Averaged per sequence first: pool every (sequence, query) pair",
         lambda pattern, periods: _any(pattern, periods, pooled=False))]),
    "ov_copying_matrix": Check(_ov_cases, _ov_ref, ("V, the attended token a", "V, the logit b"), [
        ("Rows and columns swapped: row a is the attended token and column b the logit it raises, "
         "C = W_E W_V W_O W_E^T (not its transpose)", lambda W_E, W_V, W_O: _ov_ref(W_E, W_V, W_O).T),
        ("Rows centred: return C itself (the eigenvalue score centres it, in the next exercise)",
         lambda W_E, W_V, W_O: _ov_ref(W_E, W_V, W_O) - _ov_ref(W_E, W_V, W_O).mean(-1, keepdim=True)),
        ("You stopped at W_E W_V W_O [V, D]: multiply by W_E^T to reach the logits",
         lambda W_E, W_V, W_O: W_E @ W_V @ W_O),
        ("The unembedding is missing on the right and the embedding on the left: C = W_E W_V W_O W_E^T",
         lambda W_E, W_V, W_O: W_V @ W_O)]),
    "copying_scores": Check(_copy_cases, _copy_ref, (), [
        ("Rows and columns swapped in ov_diag_top1: take each row's largest entry, C.argmax(-1) (row = the "
         "attended token)", lambda C: _copy_ref(C, axis=0)),
        ("ov_copying_eig is not centred: remove every row's mean before the eigenvalues",
         lambda C: _copy_ref(C, centred=False)),
        ("ov_copying_eig is not normalised: divide Re(sum of eigenvalues) by the sum of their absolute values",
         lambda C: _copy_ref(C, normalise=False)),
        ("ov_diag_top1 is not normalised: return the share of rows, not their count",
         lambda C: _copy_ref(C, count=True))]),
    "rotary_profile": Check(_rotary_cases, _rotary, ("n_offsets, the offset t",), [
        ("Rotated the key instead of the query: that puts the key t positions ahead; rotate q by t",
         lambda q, k, n_offsets: _rotary(q, k, n_offsets, which="k")),
        ("Rotated both q and k by t: a common rotation cancels out; rotate only q by the offset",
         lambda q, k, n_offsets: _rotary(q, k, n_offsets, which="both")),
        ("The scores are not scaled: divide by sqrt(d_head)",
         lambda q, k, n_offsets: _rotary(q, k, n_offsets, scale=False)),
        ("Off by one position: the offsets start at t = 0, the query's own position",
         lambda q, k, n_offsets: _rotary(q, k, n_offsets, start=1))]),
    "k_composition": Check(_comp_cases, _comp, (), [
        ("That is Q-composition (W_OV W_QK, the queries read the writer): for keys use W_OV W_QK^T",
         lambda W_OV, W_QK: _comp(W_OV, W_QK, kind="Q")),
        ("Not normalised: divide ||W_OV W_QK^T||_F by ||W_OV||_F ||W_QK||_F",
         lambda W_OV, W_QK: _comp(W_OV, W_QK, normalise=False)),
        ("Used the spectral norm: the composition score uses Frobenius norms (.norm())",
         lambda W_OV, W_QK: _comp(W_OV, W_QK, ord=2)),
        ("Multiplied in the wrong order: the writer's output comes first, W_OV W_QK^T",
         lambda W_OV, W_QK: _comp(W_OV, W_QK, order="swapped"))]),
    "ablation_delta": Check(_abl_cases, _abl_ref, (), [
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
         lambda **a: _abl_ref(**(a | {"layer": a["layer"] + 1, "head": a["head"] + 1})))]),
    "logit_lens": Check(_lens_cases, _lens, ("stage, 0 = the embedding", "B", "T - 1, the target t at t - 1"), [
        ("Off by one position: the logits at position t - 1 predict the next token x_t, not the current x_{t-1}",
         lambda model, tokens: _lens(model, tokens, shift=0)),
        ("Not normalised: return the softmax probability of the right token, not its logit",
         lambda model, tokens: _lens(model, tokens, kind="logit")),
        ("That is the log-probability: return the probability (softmax, not log_softmax)",
         lambda model, tokens: _lens(model, tokens, kind="logprob")),
        ("The embedding stage is missing: cache['resid'] holds n_layers + 1 streams, stage 0 is the embedding",
         lambda model, tokens: _lens(model, tokens, drop=1))]),
    "head_patch_effect": Check(_hp_cases, _hp, (), [
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
         lambda **a: _hp(**(a | {"layer": a["layer"] + 1})))]),
    "path_patch_keys": Check(_pp_cases, _pp, (), [
        ("Patch at the wrong place: that is the path into the receiver's queries; change its keys only",
         lambda **a: _pp(**a, path="q")),
        ("Patch at the wrong place: that is the path into the receiver's values; change its keys only",
         lambda **a: _pp(**a, path="v")),
        ("Patched the wrong way round: noising starts from the clean run and brings in the sender's "
         "corrupted output", lambda **a: _pp(**a, direction="denoising")),
        ("Patch at the wrong place: you changed the sender's output for every later head; only the "
         "receiver's keys should read the change", lambda **a: _pp(**a, whole=True))]),
    "induction_detector": Check(_det_cases, _det, ("H",), [
        ("Off by one position: that mask marks the earlier copies themselves (duplicate-token); the induction "
         "key is the token after one, token_{j-1} == token_i", lambda pattern, tokens: _det(pattern, tokens,
                                                                                            "duplicate_token")),
        ("Normalised per row: the score is the share of all the head's attention, sum(A M) / sum(A), not a "
         "mean of the rows' shares", lambda pattern, tokens: _det(pattern, tokens, rows="target")),
        ("Not normalised: divide by the head's whole attention sum(A)",
         lambda pattern, tokens: _det(pattern, tokens, normalise=False))]),
    "train_step": Check(_train_cases, _train_wrong(), (), [
        ("Off by one position: the logits at position t - 1 predict x_t, so compare logits[:, :-1] with "
         "tokens[:, 1:]", _train_wrong(shift=0)),
        ("The gradients pile up from step to step: call optimizer.zero_grad() before backward",
         _train_wrong(zero=False)),
        ("The weights did not change: call optimizer.step() after backward", _train_wrong(step=False)),
        ("Not normalised: the loss is the mean cross-entropy over the targets, not their sum",
         _train_wrong(reduction="sum"))], run=lambda fn, model, batches: _train_run(fn, model, batches)),
    "find_drop": Check(_drop_cases, _drop, (), [
        ("The line is ln V / 2, half the loss of a uniform guess, not ln V",
         lambda steps, losses, vocab_size: _drop(steps, losses, vocab_size, limit=math.log(vocab_size))),
        ("Returned the position in the list, not the logged step", lambda **a: _drop(**a, index=True)),
        ("Returned the last step below the line: the drop step is the first", lambda **a: _drop(**a, last=True)),
        ("A loss exactly at ln V / 2 has not dropped yet: use <, not <=", lambda **a: _drop(**a, strict=False)),
        ("Used log base 2: losses are in nats, so use the natural log (math.log)",
         lambda steps, losses, vocab_size: _drop(steps, losses, vocab_size, limit=math.log2(vocab_size) / 2))]),
}
assert set(CHECKS) == set(BY_NAME), set(CHECKS) ^ set(BY_NAME)
