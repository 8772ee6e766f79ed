"""The check engine: runs a student's function on an exercise's cases, compares each answer with the
lab's, and says in one sentence what is wrong. What each exercise computes (its cases, reference and
typical mistakes) lives in exercises/cases/; exercises/checks.py is the student's entry point.

The picked model: `use_model(path)`, else $ATTENTION_LAB_MODEL, else checkpoints/variable-period-2block.pt.
Parts 1-4 check on a model of the repeat task and refuse a Markov-chain model (ValueError saying what to
pick). Part 5 (the Markov chains) checks on a Markov-chain model: the picked one when it is of that task,
else the shipped checkpoints/markov/markov-2block.pt, whatever repeat-task model is picked.
Every check has a list of typical mistakes, each a wrong computation with its sentence: when the
student's answer matches one, that sentence is the verdict. The match is tried on the failing case
with the largest reference values, where mistakes differ most (on a block whose scores are all near 0
every wrong computation agrees within the tolerance).
"""
from __future__ import annotations

import copy
import math
import numbers
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from core.model.markov import KIND as MARKOV  # a Markov-chain model's task is named this
from exercises import catalogue, planted

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "checkpoints" / "variable-period-2block.pt"
MARKOV_MODEL = ROOT / catalogue.MARKOV_MODEL  # part 5's cases when a repeat-task model is picked
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
    grad: bool = False  # run with autograd on (a training step)
    task: str = "repeat"  # "markov": cases from a Markov-chain model (markov_source), the planted ones included

    def autograd(self):
        return torch.enable_grad() if self.grad else torch.no_grad()


# ---------------------------------------------------------------------------------------------
# The picked model

_PICKED: dict = {}


def use_model(path) -> None:
    """Check on this checkpoint file (a shipped one, or a model you trained and downloaded). A model of the
    Markov-chain task is checked by part 5 only: parts 1-4 refuse it (their cases are the repeat task's)."""
    from core.model.checkpoints import read_checkpoint

    model, info = read_checkpoint(str(path))
    _PICKED.update(model=model.eval(), task=info["task"], info=info, label=Path(path).name)


def picked():
    if not _PICKED:
        use_model(os.environ.get(MODEL_ENV) or DEFAULT_MODEL)
    return _PICKED


def refuse_markov(name: str) -> None:
    """ValueError when the picked model is of the Markov-chain task: exercise `name` computes on the repeat
    task's batches."""
    p = picked()
    if p["task"].name == MARKOV:
        raise ValueError(f"{p['label']} was trained on the Markov-chain task; {name} checks on a model of the "
                         f"repeat task (e.g. {DEFAULT_MODEL.relative_to(ROOT)}, or one you trained on it). "
                         "Part 5's exercises check on a Markov-chain model.")


def markov_source():
    """(model, task, label) that part 5's checks run on: the picked model when it is of the Markov-chain task,
    else the shipped MARKOV_MODEL (read once)."""
    from core.model.checkpoints import read_checkpoint

    p = picked()
    if p["task"].name == MARKOV:
        return p["model"], p["task"], f"the picked model {p['label']}"
    if "markov" not in _CASES:
        model, info = read_checkpoint(str(MARKOV_MODEL))
        _CASES["markov"] = (model.eval(), info["task"])
    model, task = _CASES["markov"]
    return model, task, f"the shipped Markov run {MARKOV_MODEL.name}"


# ---------------------------------------------------------------------------------------------
# Comparing an answer with the lab's, and saying what differs


def _axis(axes: tuple, i: int) -> str:
    return f"axis {i} ({axes[i]})" if i < len(axes) else f"axis {i}"


def compare(out, ref, axes: tuple = ()) -> str | None:
    """None when out matches ref, else one sentence (without a full stop) saying how it differs."""
    if ref is None:
        return None if out is None else f"returned {out!r}, where the lab finds none (None)"
    if out is None:
        return "returned None: is the `return` missing?"
    if isinstance(ref, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(ref):
            return f"returned {type(out).__name__}, expected a tuple of {len(ref)} values"
        for i, (o, r) in enumerate(zip(out, ref)):
            why = compare(o, r)
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
    if isinstance(ref, int):  # a step or a count (bool too): a whole number, 225.0 as good as 225
        if isinstance(out, torch.Tensor):
            if out.numel() != 1:
                return f"returned a tensor of shape {list(out.shape)}, expected a whole number"
            out = out.item()
        if isinstance(out, float) and out.is_integer():
            out = int(out)
        return None if isinstance(out, numbers.Integral) and out == ref else f"returned {out!r}, the lab finds {ref!r}"
    try:
        value = float(out)
    except Exception:
        return f"returned a {type(out).__name__}, expected a number"
    if math.isclose(value, ref, rel_tol=1e-3, abs_tol=TOL) or (math.isnan(value) and math.isnan(ref)):
        return None
    return f"gives {value:.4g}, the lab gets {ref:.4g}"


def size(ref) -> float:
    """How large a reference answer is (its largest absolute value; 0 for masks and token ids): the case
    where wrong computations differ most."""
    if isinstance(ref, (tuple, list)):
        return max((size(r) for r in ref), default=0.0)
    if isinstance(ref, torch.Tensor):
        if not ref.is_floating_point() or ref.numel() == 0:
            return 0.0
        return float(ref.detach().abs().nan_to_num(0.0, 0.0, 0.0).max())
    if isinstance(ref, (int, float)) and not isinstance(ref, bool) and math.isfinite(ref):
        return abs(float(ref))
    return 0.0


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


# ---------------------------------------------------------------------------------------------
# Running a check


@dataclass
class Failure:
    case: Case
    ref: object
    out: object
    why: str  # compare's sentence


def check(name: str, spec: Check, fn) -> Verdict:
    """Run the student's `fn` on every case of exercise `name` and say what is wrong, in one sentence."""
    passed, failures = [], []
    for case in cases(name, spec):
        with spec.autograd():
            ref = spec.reference(**_clone(case.args))
            try:
                out = (spec.run or (lambda f, **a: f(**a)))(fn, **_clone(case.args))
            except Exception as exc:  # the student's code: its own sentence, never the lab's traceback
                return Verdict(name, False, _student_error(fn, exc))
        why = compare(out, ref, spec.axes)
        if why is None:
            passed.append(case.label)
        else:
            failures.append(Failure(case, ref, out, why))
    if failures:
        return Verdict(name, False, diagnose(spec, failures))
    p = picked()
    if not any(label.startswith("the picked model") for label in passed):
        why = ("a model of the repeat task" if spec.task == "markov" else
               "which lacks what this exercise needs (attention blocks, or a logged history)")
        passed.append(f"not on the picked model {p['label']}, {why}")
    return Verdict(name, True, f"passed on {', '.join(passed)}.")


def diagnose(spec: Check, failures: list[Failure]) -> str:
    """The sentence for a wrong answer, read on the failing case with the largest reference values: the
    first typical mistake the answer matches there (and the lab's answer does not), else how it differs."""
    f = max(failures, key=lambda f: size(f.ref))  # the first of the largest
    for sentence, wrong in spec.mistakes:
        try:
            with spec.autograd():
                bad = wrong(**_clone(f.case.args))
        except Exception:
            continue
        if compare(bad, f.ref, spec.axes) is not None and compare(f.out, bad, spec.axes) is None:
            return f"{sentence} (on {f.case.label})."
    return f"{f.why[0].upper()}{f.why[1:]} (on {f.case.label})."


_CASES: dict = {}


def cases(name: str, spec: Check) -> list[Case]:
    """Every case of one exercise: the picked model first (when it has what the exercise needs), then
    the planted models. Built once per picked model (each run gets fresh copies of the tensors). Part 5's
    come from markov_source's model alone: its cases function adds planted cases of its own."""
    if spec.task == "markov":
        sources = [markov_source()]
    else:
        refuse_markov(name)
        p = picked()
        if "planted" not in _CASES:
            _CASES["planted"] = (planted.planted_induction_model(), planted.random_model())
        induction, rand = _CASES["planted"]
        sources = [(p["model"], p["task"], f"the picked model {p['label']}"),
                   (induction, planted.TASK, "the planted induction model"),
                   (rand, planted.TASK, "a small random model")]
    key = (name, id(sources[0][0]))
    if key not in _CASES:
        with torch.no_grad():
            _CASES[key] = [case for model, task, label in sources for case in spec.cases(model, task, label)]
    return _CASES[key]
