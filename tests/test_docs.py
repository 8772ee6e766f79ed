"""Documentation that runs: every ```python block of README.md and docs/*.md runs in a fresh
interpreter from the repository root, and every dotted `core.` name those files give exists.

A block that trains is marked slow (the rest tier); the others take an interpreter start each.
"""
from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
TRAINS = ("Trainer(", "train_to_file(")  # a block calling one of these is a training: slow


def python_blocks(doc: str) -> list[tuple[int, str]]:
    """(line number of the fence, code) for each ```python block of `doc`."""
    text = (ROOT / doc).read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1))
            for m in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.S | re.M)]


def _params():
    for doc in DOCS:
        for i, (line, code) in enumerate(python_blocks(doc), 1):
            marks = [pytest.mark.slow] if any(t in code for t in TRAINS) else []
            yield pytest.param(doc, line, code, id=f"{doc}#{i}", marks=marks)  # the n-th block: stable ids


def test_the_docs_have_python_blocks():
    """The extraction finds README's first example (a changed fence would silently test nothing)."""
    assert any("core.load_checkpoint" in code for _, code in python_blocks("README.md"))
    assert python_blocks("docs/DESIGN.md")


@pytest.mark.parametrize("doc, line, code", list(_params()))
def test_a_python_block_runs(doc, line, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    first = code.strip().splitlines()[0]
    assert out.returncode == 0, f"{doc} line {line} ({first!r}...) exits {out.returncode}:\n{out.stderr[-3000:]}"


def _resolve(dotted: str):
    """The object `dotted` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def dotted_core_names(doc: str) -> set[str]:
    """Every `core.x.y` inside backticks or code blocks of `doc` (a call's arguments left off)."""
    text = (ROOT / doc).read_text()
    code = re.findall(r"`([^`\n]+)`", text) + re.findall(r"^```\w*\n(.*?)^```", text, re.S | re.M)
    return {m for c in code for m in re.findall(r"(?<![\w./])core(?:\.[A-Za-z_]\w*)+", c)}


@pytest.mark.parametrize("doc", DOCS)
def test_every_core_name_the_docs_give_exists(doc):
    names = dotted_core_names(doc)
    assert "core.load_checkpoint" in names or doc != "README.md"
    missing = {}
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as e:
            missing[name] = repr(e)
    assert not missing, f"{doc} names what does not exist: {missing}"


def test_the_public_api_loads_lazily():
    """`import core` loads no submodule; reading a name loads its own module only; __all__ and
    dir(core) list the names, each an object of the module README and DESIGN say."""
    code = ("import sys, core\n"
            "before = sorted(m for m in sys.modules if m.startswith('core.'))\n"
            "core.TaskConfig\n"
            "after = sorted(m for m in sys.modules if m.startswith('core.'))\n"
            "print(before, after, set(core.__all__) <= set(dir(core)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "['core.model',", "'core.model.task',", "'core.model.tasks']", "True"]
    import core
    from core.model.checkpoints import load_checkpoint
    assert core.load_checkpoint is load_checkpoint
    assert all(getattr(core, name).__name__ == name for name in core.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        core.no_such_name  # noqa: B018


def test_ci_runs_readmes_test_commands_in_a_fresh_environment():
    """.ci/run runs README's test line verbatim, after building a new virtual environment from the
    requirements files alone (a package left on the machine must not hide a missing line)."""
    readme = (ROOT / "README.md").read_text()
    line = re.search(r"^(python -m pytest .*?)\s+# run the tests$", readme, re.M)
    assert line, "README's first bash block has no line ending in '# run the tests'"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert line.group(1).strip() in [c.strip() for c in ci]
    venv = next(i for i, c in enumerate(ci) if " -m venv " in c)
    install = next(i for i, c in enumerate(ci) if "pip install" in c)
    tests = ci.index(line.group(1).strip())
    assert any(c.startswith("rm -rf") for c in ci[:venv]) and venv < install < tests
    assert "activate" in "\n".join(ci[venv:install])
