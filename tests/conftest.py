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
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from core.model.checkpoints import save_checkpoint
from core.model.task import TaskConfig

from helpers import ROOT, tiny_model, write_bad_files

# The test models are tiny: one thread is faster for them than two, and it does not fight the other
# work on this 2-core machine (two threads on a busy machine made small ops 30x slower).
torch.set_num_threads(1)
# the compiled attention's build ($ATTENTION_LAB_CACHE/ext, core/model/attention_cpp.py) goes to a folder of the run
os.environ.setdefault("ATTENTION_LAB_CACHE", tempfile.mkdtemp(prefix="attention-lab-cache-"))
# pages draw what answers each predict-first question only after an answer (ui/quiz.py); the page tests read
# those charts and tables, so here they are drawn at once, as after a skip. tests/test_quiz.py and
# tests/e2e/test_e2e_predict.py set "on" to test the questions themselves (servers inherit the environment).
os.environ.setdefault("ATTENTION_LAB_PREDICT", "off")


HEAVY = ("app", "worker", "e2e", "slow", "ray")  # pytest.ini describes each; a test with none of them is fast


def pytest_addoption(parser):
    parser.addoption("--tier", choices=("fast", "rest", "all"), default="fast",
                     help="fast: tests with none of the markers app, worker, e2e, slow (the default); rest: the "
                          "others; all: everything (README; .ci/run runs fast, then rest)")


# The rest tier's longest files (seconds on 2 busy cores, 5 Dec): `--dist loadfile` hands each file to one worker
# whole, in collection order, so these go first and the many short files fill in behind them; handed out last, a
# 70 s file left the other worker idle for most of it. xdist's own order (most tests first) put them late.
LONGEST_FIRST = ("tests/e2e/test_e2e_pixels.py", "tests/e2e/test_e2e_train.py", "tests/test_python_panels.py",
                 "tests/test_cpu_kinds.py", "tests/test_markov_shipped.py", "tests/test_shipped_views.py",
                 "tests/test_notebook.py", "tests/e2e/test_e2e_pins.py", "tests/e2e/test_e2e_predict.py",
                 "tests/e2e/test_e2e_workers.py", "tests/test_pages_causal.py", "tests/test_hardening.py",
                 "tests/test_ray.py", "tests/test_view_names.py", "tests/e2e/test_e2e_upload.py",
                 "tests/test_patching.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Keep the tier --tier asks for (an explicit -m expression chooses by itself); the longest files first."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest as collected
    tier = config.getoption("--tier")
    if tier == "all" or config.getoption("markexpr"):
        return
    keep, drop = [], []
    for item in items:
        heavy = any(item.get_closest_marker(m) for m in HEAVY)
        (keep if heavy == (tier == "rest") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """(path, model, task): a 2-block file on a short task (periods 4-8, length 24) so reports take milliseconds."""
    path = tmp_path_factory.mktemp("report") / "small.pt"
    model = tiny_model(2, seed=1)
    task = TaskConfig(period_min=4, period_max=8, seq_len=24)
    save_checkpoint(model, path, task=task)
    return path, model, task
