"""core's layout: each subpackage imports only the ones its docstring allows, every module imports
in a fresh interpreter per subpackage, `import core` and core.training.live load without torch, no
core module imports streamlit, altair or ui (not even inside a function), and no module reaches into
another subpackage's private names (modules are split by what changes together, not by length)."""
from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys

import pytest

from helpers import ROOT

# What each subpackage may import besides itself (core/__init__.py states the same order).
ALLOWED = {
    "model": set(),
    "reading": {"model"},
    "causal": {"model", "reading"},
    "archetypes": {"model", "reading"},
    "training": {"model", "reading"},
    "pool": {"model", "reading", "training"},
    "sweeps": {"model", "reading", "training", "pool"},
    "laws": {"model", "reading", "training", "pool", "sweeps"},
    "series": {"model", "reading", "training", "pool", "sweeps", "laws"},
    "quiz": {"model", "reading", "causal", "training", "sweeps", "laws"},
}

_IMPORT_EACH = r"""
import importlib, json, os, pkgutil, sys
import numpy, pandas, torch  # the libraries core uses, once: each subpackage is then imported in a fork
for name in sys.argv[1:]:
    read, write = os.pipe()
    if os.fork() == 0:
        package = importlib.import_module("core." + name)
        for info in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{info.name}")
        os.write(write, json.dumps(sorted({n.split(".")[1] for n in sys.modules
                                          if n.startswith("core.") and n.count(".") >= 1})).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        pulled = f.read()
    _, status = os.wait()
    print(json.dumps({name: json.loads(pulled) if status == 0 else None}))
"""


@functools.cache
def pulled_by_each() -> dict[str, list[str] | None]:
    """The core subpackages each subpackage pulls in, importing all its modules in a fresh interpreter (a
    fork of one that has imported only torch, numpy and pandas: one torch import for the seven)."""
    out = {}
    for line in fresh(_IMPORT_EACH, *sorted(ALLOWED)).splitlines():
        out.update(json.loads(line))
    return out


def fresh(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_subpackages_are_the_ones_documented():
    found = {p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").is_file()}
    assert found == set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_subpackage_imports_only_what_it_may(package):
    pulled = pulled_by_each()[package]
    assert pulled is not None, f"core.{package}'s modules do not all import"
    pulled = set(pulled) - {package}
    assert pulled <= ALLOWED[package], f"core.{package} imports core.{sorted(pulled - ALLOWED[package])}"


def test_core_and_live_load_without_torch():
    code = "import sys, core, core.training.live; print('torch' in sys.modules)"
    assert fresh(code).strip() == "False"


def test_the_page_files_are_the_page_list():
    from ui.pages import ALL_PAGES
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "app_pages").glob("*.py"))
    assert sorted(p.file for p in ALL_PAGES) == files
    assert not list((ROOT / "pages").glob("*.py")), "Streamlit would take pages/*.py for an old-style multipage app"


def test_no_page_file_shadows_a_module_when_its_folder_is_on_sys_path():
    """`python app_pages/x.py` puts app_pages/ first on sys.path: a page named like a module it (or
    anything) imports would be imported instead (pages/exercises.py once hid the exercises package).
    Each stem is looked up from the repository root, without app_pages/ on the path."""
    code = "import importlib.util as u, json, sys; print(json.dumps([n for n in sys.argv[1:] if u.find_spec(n)]))"
    stems = [p.stem for p in (ROOT / "app_pages").glob("*.py")]
    assert json.loads(fresh(code, *stems)) == []


def test_page_files_stay_thin():
    """No page imports torch itself (core does the computing) and none passes 400 lines."""
    for path in (ROOT / "app_pages").glob("*.py"):
        lines = path.read_text().splitlines()
        assert len(lines) <= 400, f"{path.name}: {len(lines)} lines"
        assert not [l for l in lines if l.startswith(("import torch", "from torch"))], f"{path.name} imports torch"


def _imports(path):
    """(module imported, names taken from it) for every import statement in the file, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names]


def _owner(module: str) -> str:
    """The unit a module belongs to: core.<subpackage> (core's command modules: core), ui, ..."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "core" and len(parts) > 2 else parts[0]


SOURCES = sorted({*(ROOT / "core").rglob("*.py"), *(ROOT / "ui").rglob("*.py"), *ROOT.glob("*.py"),
                  *(ROOT / "exercises").rglob("*.py"), *(p for d in ROOT.iterdir() if d.is_dir() and
                  d.name not in ("core", "ui", "exercises", "tests", "bench") for p in d.glob("*.py"))})


def test_no_core_module_imports_streamlit_altair_or_ui():
    bad = {str(p.relative_to(ROOT)): m for p in (ROOT / "core").rglob("*.py") for m, _ in _imports(p)
           if m.split(".")[0] in ("streamlit", "altair", "ui")}
    assert not bad, bad


def test_no_module_takes_a_private_name_from_another_subpackage():
    """`from core.x.y import _z` outside core.x (or from ui into core) couples two places that change
    apart: make the name public or move the code. Within one subpackage private helpers are shared."""
    bad = []
    for path in SOURCES:
        here = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for module, names in _imports(path):
            if module.split(".")[0] in ("core", "ui") and _owner(module) != _owner(here):
                bad += [f"{here}: from {module} import {n}" for n in names if n.startswith("_") and n != "__version__"]
    assert not bad, bad


def test_the_layout_checks_see_the_modules():
    """The two checks above read every package (an empty SOURCES would pass them vacuously)."""
    found = {_owner(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in SOURCES}
    assert {f"core.{name}" for name in ALLOWED} | {"ui", "dashboard"} <= found
    assert any(m == "streamlit" for p in SOURCES for m, _ in _imports(p))


def _module_graph() -> dict[str, set[str]]:
    """core's and ui's modules -> the ones of them each imports, at any depth (an import inside a function
    is as much a dependency as one at the top; hiding a cycle in a function does not remove it)."""
    names = {}
    for path in [*(ROOT / "core").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        names[name] = path
    graph = {}
    for name, path in names.items():
        graph[name] = set()
        for module, taken in _imports(path):
            found = [f"{module}.{t}" for t in taken if f"{module}.{t}" in names]
            graph[name] |= set(found) or ({module} & set(names))
        graph[name].discard(name)  # ui.cache's __main__ imports the module copy of itself: no cycle
    return graph


def test_no_import_cycle_among_core_and_ui_modules():
    graph = _module_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200  # the graph is read, not empty
    cycles, done = [], set()

    def visit(node, path):
        if node in path:
            cycles.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    assert not cycles, [" -> ".join(c) for c in cycles]
