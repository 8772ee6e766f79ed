"""Shared test helpers: the repository on sys.path, tiny models with non-trivial weights, and a
fast runner for `python -m core.<module>` command lines.

Each `python -m` start pays about 2 s of CPU to import torch; the command-line tests run dozens of
them, so `cli` starts one server process that imports torch once and forks a fresh child per
command. The child runs the module exactly as `python -m` does (runpy, `__main__`, cwd on sys.path,
its own stdout/stderr file descriptors, a fresh warnings state), so its exit status and output are
those of the real command; tests/test_cli.py also checks a few against real `python -m` processes.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import ROOT  # noqa: E402  (tests/ is on sys.path: pytest put it there for this file)

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.model.checkpoints import save_checkpoint  # noqa: E402
from core.model.task import TaskConfig  # noqa: E402
from core.model.tinycharlm import ModelConfig, TinyCharLM  # noqa: E402

from helpers import write_bad_files  # noqa: E402

# The test models are tiny: one thread is faster for them than two, and it does not fight the other
# work on this 2-core machine (two threads on a busy machine made small ops 30x slower).
torch.set_num_threads(1)

# A small model keeps every test fast; d_head = 8 still has four rotary frequencies.
TINY = dict(vocab_size=16, d_model=32, n_heads=4)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs a real training to the stopping loss (tens of seconds)")


def pytest_collectstart(collector):
    """Point `conftest` at the conftest.py beside a test module before the module is imported.

    tests/ and tests/e2e/ each hold a plain (non-package) conftest.py; pytest imports both under the
    name `conftest` and sys.modules keeps the last one, so `from conftest import tiny_model` in
    tests/ would otherwise find tests/e2e/conftest.py whenever e2e/ was collected first."""
    if not isinstance(collector, pytest.Module):
        return
    loaded = {Path(m.__file__): m for m in collector.config.pluginmanager.get_plugins()
              if getattr(m, "__name__", None) == "conftest" and getattr(m, "__file__", None)}
    for folder in collector.path.parents:
        if folder / "conftest.py" in loaded:
            sys.modules["conftest"] = loaded[folder / "conftest.py"]
            return


def tiny_model(n_layers: int = 2, bias: bool = False, seed: int = 0, dtype=torch.float32, **overrides) -> TinyCharLM:
    """A TinyCharLM with every parameter (biases included) drawn at a scale where attention is
    far from uniform and every block changes the logits, so a wrong formula shows up."""
    cfg = ModelConfig(**{**TINY, "n_layers": n_layers, "bias": bias, **overrides})
    model = TinyCharLM(cfg).to(dtype)
    g = torch.Generator().manual_seed(seed)
    D, dh = cfg.d_model, cfg.d_head
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = dh if name.endswith("W_O") else D
            scale = 1.0 if name == "W_E" else 0.5 if name.split(".")[-1].startswith("b_") else 1.5 * fan_in ** -0.5
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale)
    return model.eval()


def random_tokens(batch: int, seq: int, vocab: int = TINY["vocab_size"], seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# The naive reference, written from docs/DESIGN.md "TinyCharLM: exact semantics" with explicit loops and
# nothing from core/: it checks the model and the checkpoint format against the spec itself.


def naive_rope(x: torch.Tensor, base: float, pairs: str = "rotate_half") -> torch.Tensor:
    """Rotate each position t of x [T, d] by the angle t * base^(-2j/d) in the pair (j, j + d/2).

    pairs="interleaved" uses the pairs (2j, 2j+1) instead, the other common convention; tests use it
    only to show that they can tell the two apart."""
    T, d = x.shape
    rows = []
    for t in range(T):
        row = x[t].tolist()
        for j in range(d // 2):
            a, b = (j, j + d // 2) if pairs == "rotate_half" else (2 * j, 2 * j + 1)
            theta = t * base ** (-2 * j / d)
            c, s = math.cos(theta), math.sin(theta)
            row[a], row[b] = x[t, a].item() * c - x[t, b].item() * s, x[t, a].item() * s + x[t, b].item() * c
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def naive_forward(weights: dict, config: dict, tokens: torch.Tensor, pairs: str = "rotate_half"):
    """weights: the file's state_dict ({"W_E", "blocks.l.W_Q", ...}); config: the file's config dict;
    tokens [T] -> (logits [T, V], patterns: one [H, T, T] per block), all in float64."""
    P = {k: v.detach().double() for k, v in weights.items()}
    H, bias, base = config["n_heads"], config["bias"], config["rope_base"]
    dh = config["d_model"] // H
    T = tokens.shape[0]
    h = P["W_E"][tokens]
    patterns = []
    for l in range(config["n_layers"]):
        update = torch.zeros_like(h)
        heads = []
        for hd in range(H):
            q, k, v = (h @ P[f"blocks.{l}.W_{n}"][hd] for n in "QKV")
            if bias:
                q, k, v = q + P[f"blocks.{l}.b_Q"][hd], k + P[f"blocks.{l}.b_K"][hd], v + P[f"blocks.{l}.b_V"][hd]
            q, k = naive_rope(q, base, pairs), naive_rope(k, base, pairs)
            A = torch.zeros(T, T, dtype=torch.float64)
            for i in range(T):
                scores = torch.stack([q[i] @ k[j] for j in range(i + 1)]) / math.sqrt(dh)  # keys j <= i only
                A[i, : i + 1] = torch.softmax(scores, 0)
            heads.append(A)
            update = update + (A @ v) @ P[f"blocks.{l}.W_O"][hd]
        h = h + update + (P[f"blocks.{l}.b_O"] if bias else 0.0)
        patterns.append(torch.stack(heads))
    return h @ P["W_E"].T, patterns


@pytest.fixture(autouse=True)
def navigation_apps_only(monkeypatch):
    """AppTest resets PagesManager.uses_pages_directory before every run, and with a pages/ folder
    beside dashboard.py that makes a switched-to page run alone (Streamlit's old multipage mode: no
    dashboard.py, so no sidebar). A real server runs st.navigation once and keeps it off (ui.state
    makes sure), so keep it off here too, for every test."""
    import streamlit.testing.v1.app_test as app_test_module
    from streamlit.runtime.pages_manager import PagesManager

    class Manager(PagesManager):
        pass

    monkeypatch.setattr(app_test_module, "PagesManager", Manager)
    PagesManager.uses_pages_directory = False


@pytest.fixture(scope="session")
def bad_files(tmp_path_factory):
    """(files, marker): the marker is the file a loader that executed a planted object would create."""
    folder = tmp_path_factory.mktemp("bad_checkpoints")
    marker = folder / "MARKER-code-was-executed"
    return write_bad_files(folder, marker), marker


_SERVER = r'''
import json, os, runpy, sys, tempfile
sys.path.insert(0, os.getcwd())  # what `python -m` puts first on sys.path
import torch  # the slow import, paid once
torch.set_num_threads(1)  # the commands under test handle tiny models
try:  # their dependencies too; each child still runs the command module itself afresh as __main__
    import core.reading.report, core.training.train  # noqa: E401,F401
except Exception:
    pass

def run(module, args):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.argv = [module, *args]
            sys.modules.pop(module, None)  # as in a fresh `python -m`, the module is not imported yet
            code = 0
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {"rc": os.waitstatus_to_exitcode(status),
                "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}

for line in sys.stdin:
    module, args = json.loads(line)
    print(json.dumps(run(module, args)), flush=True)
'''


class CliResult:
    def __init__(self, rc: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr

    def __repr__(self):
        return f"CliResult(rc={self.returncode}, stdout={self.stdout[:300]!r}, stderr={self.stderr[:600]!r})"


class CliRunner:
    """cli("core.report", "FILE", "--json") runs `python -m core.report FILE --json` in ROOT."""

    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # default warnings, as a user sees them
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def __call__(self, module: str, *args) -> CliResult:
        self.proc.stdin.write(json.dumps([module, [str(a) for a in args]]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the command-line test server stopped")
        r = json.loads(line)
        return CliResult(r["rc"], r["stdout"], r["stderr"])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def cli():
    runner = CliRunner()
    yield runner
    runner.close()


def python_m(module: str, *args, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """A real `python -m module args` process (slow to start: use for a few cross-checks only)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """(path, model, task): a 2-block file on a short task (periods 4-8, length 24) so reports take milliseconds."""
    path = tmp_path_factory.mktemp("report") / "small.pt"
    model = tiny_model(2, seed=1)
    task = TaskConfig(period_min=4, period_max=8, seq_len=24)
    save_checkpoint(model, path, task=task)
    return path, model, task
