"""Starting a training process, torch-free: the server imports this (core.pool.backend), the worker's code
(core.pool.worker, which imports torch) only runs in the child. A forkserver (or spawn) child finds the target,
train_process, by name, and imports the worker there; so pressing Train imports no torch in the server
(bench/class.py run: `import torch` was 1.1 of the click's 1.4 server CPU-s)."""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
from contextlib import contextmanager
from multiprocessing import spawn
from pathlib import Path

from core.training.heap import TRAINING_ENV
from core.training.run_config import RunConfig

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository: core/ is importable from here

_MAIN_LOCK = threading.Lock()


@contextmanager
def main_script_hidden():
    """A new process re-runs the parent's main script first (multiprocessing.spawn.prepare, from the
    start data's init_main_from_path or _name). Here that is Streamlit's (or pytest's) command line,
    which the worker does not need: importing it again cost about 0.5 s and tens of MB per worker. So
    the start data is written without it; the worker's code is all in core.pool.worker.

    The start data leaves the main module out, rather than the main module hiding its __file__ while
    it is written: Streamlit makes each script run's module sys.modules["__main__"] while it runs, so
    with several students on one server the module read could be another session's, named after
    dashboard.py, and the worker ran the app's script and died (exit code 1 before its first step:
    1 of 4 trainings started together, twice; bench/README.md, "A class on one server")."""
    with _MAIN_LOCK:
        written = spawn.get_preparation_data

        def without_main(name):
            data = written(name)
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
            return data

        spawn.get_preparation_data = without_main
        pythonpath = os.environ.get("PYTHONPATH")
        # Python 3.11's forkserver ignores the sys.path it is given: without the repository on its
        # PYTHONPATH its preload fails silently unless the server runs from the repository's folder
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([pythonpath] if pythonpath else [])])
        try:
            yield
        finally:
            spawn.get_preparation_data = written
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath


def context(method: str | None):
    """forkserver where the platform has it (torch, core and what a training touches first preloaded
    once, shared by every worker: core.pool.preload).

    Workers' OpenMP threads sleep instead of spinning while they wait (OMP_WAIT_POLICY=PASSIVE, read
    when torch loads, so set before the forkserver starts): with the server busy on the other core, a
    spinning 2-thread training ran at 2.9 steps/s, a sleeping one at 11.6 (bench/README.md). MKL keeps
    no buffers of its own (core.training.heap.TRAINING_ENV, also read when it starts)."""
    for name, value in {"OMP_WAIT_POLICY": "PASSIVE", **TRAINING_ENV}.items():
        os.environ.setdefault(name, value)
    method = method or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["core.pool.preload"])
    return ctx


def warm_up(ctx) -> None:
    """Start the forkserver now (it imports torch and core once), so the first Train press does not
    wait for it. Nothing to do for spawn."""
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with main_script_hidden():
            forkserver.ensure_running()


def rest(ctx) -> bool:
    """Stop the forkserver, if one runs (the next start begins a new one, 1.6-1.9 CPU-s): an idle
    forkserver holds about 160 MB of PSS (bench/README.md, "Server memory"). True if one was stopped. Uses
    multiprocessing's ForkServer._stop, which CPython keeps for its own tests (3.8 to 3.13)."""
    if ctx.get_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if getattr(server, "_forkserver_pid", None) is None:
        return False
    server._stop()
    return True


def train_process(conn, settings: RunConfig, threads: int) -> None:
    """A training process's whole life: core.pool.worker.train_process, imported here, in the child (the
    forkserver has it preloaded: core.pool.preload)."""
    from core.pool import worker

    worker.train_process(conn, settings, threads)


def start(ctx, settings: RunConfig, threads: int, name: str):
    """Start `train` in a new daemon process of `ctx`; returns (process, the server's end of the Pipe)."""
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=train_process, args=(child, settings, threads), daemon=True, name=name)
    try:
        with main_script_hidden():
            proc.start()
    except BaseException:
        parent.close()
        raise
    finally:
        child.close()  # the worker holds its own copy; once it exits, the server's end reads end-of-file
    return proc, parent
