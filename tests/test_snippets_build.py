"""Every "In Python" snippet builder (ui/snippets/), fast: built with representative page values, its
code and checks compile, and every `core` name it imports or uses exists. Nothing is run here;
tests/test_python_panels.py runs the snippets the pages show and compares their numbers."""
from __future__ import annotations

import ast
import importlib
import types

import numpy as np
import pytest

from core.training.run_config import RunConfig
from ui import snippets
from ui.model_keys import SHIPPED, shipped_key
from ui.python_panel import Snippet
from ui.snippets.fill import Code, fill

SHIPPED_KEY = shipped_key("variable-period-2block.pt")
AT_STEP = SHIPPED_KEY + "@step120"  # a snapshot of it (ui.model_keys.STEP_TAG)
SESSION = "session:abc"  # a model trained or uploaded in the session
SETTINGS = RunConfig.of(n_layers=2, period_min=4, period_max=8, seq_len=24, bias=False, lr=0.01, batch_size=4,
                        steps=60, seed=0)
TYPED, DRAWN = snippets.typed_pattern("abcd"), snippets.drawn_pattern("abcxyz", 5, 2)

# builder -> argument tuples, covering each branch (task sequence or typed text, snapshot step, session model)
CASES: dict[str, list[tuple]] = {
    "attention_pattern": [(SHIPPED_KEY, 20, 3, None, "2.1", True),
                          (AT_STEP, np.int64(20), np.int64(3), None, "1.2", False),  # numpy numbers as the pages have
                          (SESSION, None, None, "abcabc", "1.1", True)],
    "attention_scores": [(SHIPPED_KEY, 20, 3, None), (SHIPPED_KEY, None, None, "abcabc")],
    "attention_offsets": [(AT_STEP, 20, 3, None), (SHIPPED_KEY, None, None, "abcabc")],
    "period_probe": [(SHIPPED_KEY, 24)],
    "head_circuits": [(AT_STEP, "2.3")],
    "rotary_profile": [(SHIPPED_KEY, "1.1")],
    "copying": [(SHIPPED_KEY, "2.2")],
    "copying_table": [(SHIPPED_KEY,)],
    "composition": [(SHIPPED_KEY,)],
    "ablation": [(SHIPPED_KEY, ["1.2", "2.1"], "mean"), (SHIPPED_KEY, [], "zero")],
    "ablation_grid": [(SHIPPED_KEY, "zero")],
    "zero_block": [(shipped_key("zero-block.pt"),)],
    "logit_paths": [(SHIPPED_KEY, 4, 17, "target"), (SHIPPED_KEY, 0, 0, "top")],
    "skip_trigrams": [(SHIPPED_KEY, 1, 3, 5, 4), (SHIPPED_KEY, 0, 0, 15, 4)],
    "mean_paths": [(SHIPPED_KEY,)],
    "depth_composition": [(SHIPPED_KEY,)],
    "score_terms": [(SHIPPED_KEY, 2)],
    "icl_predictions": [(SHIPPED_KEY, TYPED, True), (SESSION, DRAWN, False)],
    "restart_curve": [(SHIPPED_KEY, 64)],
    "restart_example": [(SHIPPED_KEY, 3)],
    "in_context_check": [(SHIPPED_KEY, 32)],
    "archetype_pattern": [("Bob and Ann met. Bob smiled", "induction", 6.0, 0.8)],
    "detector_table": [("Bob and Ann met. Bob smiled", np.float64(3.5), 0.8, "target")],
    "model_detectors": [(SHIPPED_KEY, "abcabc", "target")],
    "causal": [(SHIPPED_KEY, 7, 1, None, 8, sweeps, section) for sweeps in (None, True)
               for section in snippets.CAUSAL_SECTIONS]
              + [(SESSION, None, 1, "abcdeabcde", 8, None, "lens", "resample"),
                 (SESSION, None, 1, "abcdeabcde", 8, True, "graddrop", "resample"),
                 (SHIPPED_KEY, 7, 1, None, 8, None, "paths", "resample")],
    "overview": [(SHIPPED_KEY, 64, 0)],
    "training_run": [(SETTINGS, 60)],
    "shipped_curves": [(["variable-period-2block.pt", "variable-period-1block.pt"],)],
    "head_scores_over_training": [(SHIPPED_KEY,)],
    "run_timeline": [(SESSION,), (SHIPPED_KEY,)],
    "transition_study": [()],
    "law_sweep": [(name,) for name in ("context", "seqlen", "batch", "vocab")],
    "law_depth_and_start": [()],
    "law_clamps": [()],
    "law_readings": [()],
    "law_stages": [()],
    "law_power": [()],
}
BUILDERS = sorted(name for name in snippets.__all__ if callable(getattr(snippets, name))
                  and getattr(snippets, name).__annotations__.get("return") == "Snippet")


def test_every_builder_has_a_case():
    assert BUILDERS and set(CASES) == set(BUILDERS)


class CoreNames(ast.NodeVisitor):
    """Resolves every `core` import of a snippet and every attribute read from an imported `core`
    module; `missing` lists the names that do not exist."""

    def __init__(self):
        self.bound: dict[str, object] = {}
        self.missing: list[str] = []
        self.used: list[str] = []

    def _lookup(self, module: types.ModuleType, name: str) -> object | None:
        self.used.append(f"{module.__name__}.{name}")
        if hasattr(module, name):
            return getattr(module, name)
        try:  # a submodule not imported by its package
            return importlib.import_module(f"{module.__name__}.{name}")
        except ModuleNotFoundError:
            self.missing.append(f"{module.__name__}.{name}")
            return None

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] == "core":
                module = importlib.import_module(alias.name)
                self.bound[alias.asname or "core"] = module if alias.asname else importlib.import_module("core")

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.module and node.module.split(".")[0] == "core":
            module = importlib.import_module(node.module)
            for alias in node.names:
                self.bound[alias.asname or alias.name] = self._lookup(module, alias.name)

    def resolve(self, node: ast.expr) -> object | None:
        if isinstance(node, ast.Name):
            return self.bound.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.resolve(node.value)
            if isinstance(owner, types.ModuleType) and owner.__name__.split(".")[0] == "core":
                return self._lookup(owner, node.attr)
        return None

    def visit_Attribute(self, node: ast.Attribute):
        self.resolve(node)
        self.generic_visit(node)


def built() -> list[tuple[str, Snippet]]:
    return [(f"{name}{args!r:.60}", getattr(snippets, name)(*args)) for name in BUILDERS for args in CASES[name]]


@pytest.mark.parametrize("name,snippet", built(), ids=lambda x: x if isinstance(x, str) else "")
def test_snippet_compiles_and_its_core_names_exist(name, snippet):
    assert isinstance(snippet, Snippet) and snippet.title and snippet.code.endswith("\n")
    tree = compile(snippet.code, f"<snippet {name}>", "exec", ast.PyCF_ONLY_AST)
    compile(tree, f"<snippet {name}>", "exec")
    assert snippet.checks, "a snippet's checks say which shown numbers it reproduces"
    for check in snippet.checks.values():
        compile(check, f"<check of {name}>", "eval")
    names = CoreNames()
    names.visit(tree)
    for check in snippet.checks.values():
        names.visit(ast.parse(check, mode="eval"))
    assert names.used, "a snippet calls core"
    assert not names.missing, names.missing
    assert "@step" not in snippet.code and SHIPPED not in snippet.code  # keys never leak into code


def test_fill_writes_literals_and_comments():
    def piece(model, N, WHICH, TEXT, SPEC):
        value = model.WHICH(N, TEXT, SPEC)  # N times WHICH on TEXT, NOT N_ALL
        return {"value": value}

    code = fill(piece, N=np.int64(3), WHICH=Code("raw"), TEXT="it's", SPEC={"1.2": "zero"})
    assert code == "value = model.raw(3, \"it's\", {'1.2': 'zero'})  # 3 times raw on it's, NOT N_ALL\n"
    code = fill(piece, N=1, WHICH=Code("raw"), TEXT="a\nb", SPEC=None)  # a line break stays inside a literal
    assert code.count("\n") == 1 and code.endswith("# 1 times raw on 'a\\nb', NOT N_ALL\n"), code
    with pytest.raises(TypeError):
        fill(piece, N=1, WHICH=Code("raw"), TEXT="x")  # SPEC missing
