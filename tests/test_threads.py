"""What a class's first pages do at once on a new server's script threads: no import deadlock,
no AST parse on two threads at once."""
from __future__ import annotations

import ast
import subprocess
import sys
import threading
import tomllib

import pytest

from core import ast_parse

from helpers import ROOT

_RACE = r'''
import importlib.machinery, sys, threading, time
import ui.cache, ui.state, core.model.symbols  # what dashboard.py has imported before a page runs (no Altair)
assert "altair" not in sys.modules
in_altair, started = threading.Event(), threading.Event()

class Pausing:
    """altair's loader, but its module is made only once the other thread has begun its import: until
    then this thread holds altair's module lock, and altair is not yet in sys.modules."""
    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        in_altair.set()
        started.wait(5)
        time.sleep(1.0)  # the other thread is inside its import statement by now
        return None

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)


class Pause:
    def find_spec(self, name, path=None, target=None):
        if name != "altair" or threading.current_thread().name != "page":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Pausing(spec.loader)
        return spec

sys.meta_path.insert(0, Pause())
errors = []

def run(module):
    try:
        if threading.current_thread().name == "charts":
            in_altair.wait(5)
            started.set()
        __import__(module)
    except Exception as e:  # _DeadlockError is a RuntimeError
        errors.append(f"{module}: {e!r}")

threads = [threading.Thread(target=run, args=("altair",), name="page"),  # ui/causal_sections.py's import
           threading.Thread(target=run, args=("ui.charts",), name="charts")]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
print(errors or "ok", "alive" if any(t.is_alive() for t in threads) else "")
'''


@pytest.mark.worker  # a fresh interpreter: the rest tier
def test_two_pages_importing_altair_at_once_do_not_deadlock():
    """A class's first pages on a new server: one thread runs `import altair` (a page module) while another
    imports ui.charts. ui.charts imports altair before altair.utils, in the same order, so the second waits
    for the first instead of raising Python's _DeadlockError on the page (seen in a cold 20-student wave)."""
    out = subprocess.run([sys.executable, "-c", _RACE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["ok"], out.stdout + out.stderr[-2000:]


def test_the_app_parses_python_in_one_place_one_thread_at_a_time():
    """Every ast.parse of the app's code goes through core.ast_parse (one lock); Streamlit's magic, which
    parses every page, is off, and no page has a bare expression that magic would have written."""
    calls = []
    for path in [ROOT / "dashboard.py", *[p for d in ("app_pages", "ui", "core", "exercises")
                                          for p in (ROOT / d).rglob("*.py")]]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"):
                calls.append(str(path.relative_to(ROOT)))
    assert calls == ["core/ast_parse.py"]
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["magicEnabled"] is False
    for page in [ROOT / "dashboard.py", *(ROOT / "app_pages").glob("*.py")]:
        tree = ast.parse(page.read_text())
        for parent in ast.walk(tree):
            for i, node in enumerate(getattr(parent, "body", []) if isinstance(getattr(parent, "body", None), list)
                                     else []):
                docstring = i == 0 and isinstance(parent, (ast.Module, ast.FunctionDef)) and \
                    isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                if isinstance(node, ast.Expr) and not docstring:
                    assert isinstance(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)), \
                        f"{page.name}:{node.lineno} is a bare expression: write it with st.write"


def test_a_parse_waits_while_another_thread_parses():
    """core.ast_parse.parse holds one lock: a second thread's parse waits for it, then returns the tree."""
    out = []
    with ast_parse._LOCK:  # as if another thread were parsing
        t = threading.Thread(target=lambda: out.append(ast_parse.parse("x = 1")))
        t.start()
        t.join(0.3)
        assert t.is_alive() and not out
    t.join(10)
    assert isinstance(out[0], ast.Module) and isinstance(out[0].body[0], ast.Assign)
