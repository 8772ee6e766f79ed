"""Checks that teach, the student's entry point: `check(name, fn)` runs a student's function on the
picked model and on small planted models, compares it with the lab's own computation (imported from
core), and says in one sentence what is wrong. A function that raises gets a sentence of its own.

The picked model: `use_model(path)`, else $ATTENTION_LAB_MODEL, else checkpoints/variable-period-2block.pt.
Part 5 (Markov chains) checks on the picked model when it is of the Markov-chain task, else on the shipped
checkpoints/markov/markov-2block.pt; parts 1-4 refuse a Markov-chain model.
The engine is exercises/engine.py; each section's cases, answers and typical mistakes are in
exercises/cases/<section>.py.
"""
from __future__ import annotations

import importlib

from exercises import engine
from exercises.catalogue import BY_NAME, SECTIONS, in_section
from exercises.engine import MODEL_ENV, NOT_WRITTEN, Check, Verdict, picked, use_model

__all__ = ["CHECKS", "MODEL_ENV", "NOT_WRITTEN", "Verdict", "check", "check_module", "picked", "use_model"]

CHECKS: dict[str, Check] = {}
for _section in SECTIONS:
    _checks = importlib.import_module(f"exercises.cases.{_section}").CHECKS
    assert all(BY_NAME[n].section == _section for n in _checks), f"exercises/cases/{_section}.py: {list(_checks)}"
    CHECKS.update(_checks)
assert set(CHECKS) == set(BY_NAME), set(CHECKS) ^ set(BY_NAME)


def check(name: str, fn) -> Verdict:
    """Run the student's `fn` for exercise `name` on every case and say what is wrong, in one sentence."""
    return engine.check(name, CHECKS[name], fn)


def check_module(module) -> list[Verdict]:
    """Every exercise of a student's module (e.g. `exercises.part1_attention`)."""
    section = module.__name__.rsplit(".", 1)[-1]
    return [check(ex.name, getattr(module, ex.name)) for ex in in_section(section)]
