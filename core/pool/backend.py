"""The pool's seam to its workers (core.pool.runs): a Backend starts trainings and waits on them, a
WorkerHandle is one started training. Nothing of how a worker runs (a process, a thread, later a Ray
actor) passes this seam: the pool sees only these two protocols and the messages of core.pool.worker.

    backend = ProcessBackend()                    # or ThreadBackend() (tests, the fast tier)
    handle = backend.start(settings, threads=1, name="attention-lab-training-1234")
    for h in backend.wait([handle], timeout=0.05):    # the handles with something to read
        while h.poll():
            message = h.recv()                    # EOFError once the worker's end is closed
    handle.send(("stop",))                        # safe from any thread: one write at a time
    handle.alive(), handle.exit_reason()          # "was killed by signal 9", ... (None while alive)
    handle.kill(); handle.join(1.0); handle.close()

Both backends here run the same worker loop (core.pool.worker.train) on one end of a Pipe. A handle
serialises its sends (one lock per handle), so two page threads pressing Stop cannot interleave
their bytes on one connection; reading and closing are the pool monitor's alone.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import socket
import threading
import time
from multiprocessing.connection import wait as wait_any
from typing import Protocol

from core.pool import launch
from core.training.run_config import RunConfig

log = logging.getLogger(__name__)


class WorkerHandle(Protocol):
    """One started training, whatever runs it. `pid`: the worker's id as the student sees it (an OS
    process id; a thread's native id for ThreadBackend). poll, alive and exit_reason never block:
    the pool calls them under its lock."""

    name: str
    pid: int | None

    def send(self, message: tuple) -> bool:
        """Write one command (thread-safe); False if the worker's end is gone."""

    def poll(self) -> bool:
        """Whether recv() would return (a message, or EOFError) at once."""

    def recv(self) -> tuple:
        """The next message; EOFError (or OSError) once the worker's end is closed."""

    @property
    def closed(self) -> bool:
        """Whether close() was called."""

    def alive(self) -> bool:
        """Whether the worker still runs."""

    def exit_reason(self) -> str | None:
        """How it ended, a phrase that follows "The training process" ("was killed by signal 9",
        "exited with code 1"); None while it runs."""

    def kill(self) -> None:
        """End it now, whatever it is doing (a thread: at its next step)."""

    def join(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for it to end; True if it has."""

    def close(self) -> None:
        """Close the server's end (the worker then reads end-of-file and returns)."""


class Backend(Protocol):
    def start(self, settings: RunConfig, threads: int, name: str) -> WorkerHandle:
        """Start a training of `settings` at `threads` torch threads; may take seconds (never call
        it under the pool's lock or on the monitor thread)."""

    def wait(self, handles: list[WorkerHandle], timeout: float) -> list[WorkerHandle]:
        """The handles with something to read, at most `timeout` seconds from now (a handle closed
        meanwhile is left out, or the round returns none)."""

    def warm_up(self) -> None:
        """Prepare what the first start needs, so a Train press does not wait for it."""

    # optional: rest() -> bool, to free what only starts need (the pool calls it after rest_seconds idle)


class _PipeHandle:
    """The server's end of a worker's duplex Pipe: one lock for writes, reads by one thread."""

    def __init__(self, conn, name: str):
        self.name, self.pid = name, None
        self._conn = conn
        self._send_lock = threading.Lock()

    def send(self, message: tuple) -> bool:
        with self._send_lock:
            try:
                self._conn.send(message)
                return True
            except (OSError, ValueError):  # the worker's end is gone, or ours was closed
                return False

    def poll(self) -> bool:
        return self._conn.poll()

    def recv(self) -> tuple:
        return self._conn.recv()

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def close(self) -> None:
        self._conn.close()


def _wait_pipes(handles: list, timeout: float) -> list:
    by_conn = {h._conn: h for h in handles if not h.closed}
    if not by_conn:
        time.sleep(timeout)
        return []
    try:
        return [by_conn[c] for c in wait_any(list(by_conn), timeout=timeout)]
    except (OSError, ValueError) as e:  # one was closed since the snapshot: the next round skips it
        log.info("A training connection closed while the monitor waited on it (%s); going on", e)
        return []


class ProcessHandle(_PipeHandle):
    def __init__(self, proc, conn, name: str):
        super().__init__(conn, name)
        self._proc, self.pid = proc, proc.pid

    def alive(self) -> bool:
        return self._proc.is_alive()

    def exit_reason(self) -> str | None:
        code = self._proc.exitcode
        if code is None:
            return None
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"

    def kill(self) -> None:
        self._proc.kill()

    def join(self, timeout: float) -> bool:
        self._proc.join(timeout)
        return not self._proc.is_alive()


class ProcessBackend:
    """One daemon OS process per training (forkserver where the platform has it, else spawn;
    core.pool.launch.context)."""

    def __init__(self, start_method: str | None = None):
        self._ctx = launch.context(start_method)
        self._guard = threading.Lock()  # held briefly: the count below, and rest() against a start
        self._starting = 0  # starts in flight

    def start(self, settings: RunConfig, threads: int, name: str) -> ProcessHandle:
        with self._guard:
            self._starting += 1
        try:
            proc, conn = launch.start(self._ctx, settings, threads, name)
        finally:
            with self._guard:
                self._starting -= 1
        return ProcessHandle(proc, conn, name)

    def rest(self) -> bool:
        """Stop the forkserver unless a start is under way (the pool calls it when nothing has trained
        for a while); True if it stopped one."""
        with self._guard:
            return False if self._starting else launch.rest(self._ctx)

    def wait(self, handles: list, timeout: float) -> list:
        return _wait_pipes(handles, timeout)

    def warm_up(self) -> None:
        launch.warm_up(self._ctx)


class ThreadHandle(_PipeHandle):
    """core.pool.worker.train in a daemon thread of this process. kill() sets a flag the worker's
    loop reads between steps: it returns at once, without a word, as a killed process would. kill()
    also shuts the worker's end of the pipe down, as a killed process's end closes: a worker blocked
    sending into a pipe nobody reads any more (a cancelled run's checkpoint) gets a broken pipe and
    returns at once, instead of when the monitor closes the server's end (1.03 s in 2 of 8 tries)."""

    def __init__(self, settings: RunConfig, threads: int, name: str):
        parent, child = mp.Pipe(duplex=True)  # a socket pair
        super().__init__(parent, name)
        self._child_end = socket.socket(fileno=os.dup(child.fileno()))  # ours: kill() shuts it down
        self._killed = threading.Event()
        self._raised: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(child, settings, threads), name=name, daemon=True)
        self._thread.start()
        self.pid = self._thread.native_id

    def _run(self, child, settings: RunConfig, threads: int) -> None:
        from core.pool import worker  # torch: a thread worker trains in this process

        try:
            worker.train(child, settings, threads, killed=self._killed.is_set)
        except BaseException as e:  # noqa: BLE001 -- becomes the exit reason, as a crash's exit code would
            self._raised = e

    def alive(self) -> bool:
        return self._thread.is_alive()

    def exit_reason(self) -> str | None:
        if self._thread.is_alive():
            return None
        if self._killed.is_set():
            return "was killed"
        if self._raised is not None:
            return f"raised {type(self._raised).__name__}: {self._raised}"
        return "returned"

    def kill(self) -> None:
        self._killed.set()
        with contextlib.suppress(OSError):  # already shut down
            self._child_end.shutdown(socket.SHUT_RDWR)

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        super().close()
        self._child_end.close()


class ThreadBackend:
    """Each training in a thread of this process, on the same worker loop and messages as a process:
    for the tests (no process start, so pool tests run in the fast tier). The trainings share this
    process's torch thread count (the worker sets it to `threads`)."""

    def __init__(self):
        self.started: list[ThreadHandle] = []  # every handle, for tests to look up by pid

    def start(self, settings: RunConfig, threads: int, name: str) -> ThreadHandle:
        handle = ThreadHandle(settings, threads, name)
        self.started.append(handle)
        return handle

    def wait(self, handles: list, timeout: float) -> list:
        return _wait_pipes(handles, timeout)

    def warm_up(self) -> None:
        pass
