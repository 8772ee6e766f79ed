"""The pool's Ray backend (core.pool.backend's seam): each training is a Ray actor running the same
worker loop (core.pool.worker.train), for a server pointed at a cluster (ATTENTION_LAB_RAY_ADDRESS:
"auto", "host:port" or "ray://host:port"). Ray is imported only here, and only when a RayBackend
is made; it is optional (requirements-ray.txt).

    backend = RayBackend("auto")                  # ray.init(address) once per process, token auth kept
    handle = backend.start(settings, threads=1, name="attention-lab-training-1234")
    backend.wait([handle], timeout=0.05)          # one ray.wait over every handle's pending fetch

Inside the actor the worker loop runs on a thread, on one end of a local Pipe; the actor's `fetch`
long-polls the other end (up to FETCH_SECONDS) and returns every message written so far, so each
handle has one fetch in flight and the monitor's wait is a single ray.wait over them. `send` is an
actor call too (a threaded actor: a command never waits behind a fetch). kill() and close() end the
actor (ray.kill), so no actor outlives its training. A dead actor or a lost node surfaces as the
fetch's RayActorError: the handle reads end-of-file and exit_reason says what happened.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from pathlib import Path

from core.training.heap import TRAINING_ENV
from core.training.run_config import RunConfig

log = logging.getLogger(__name__)

ADDRESS_ENV = "ATTENTION_LAB_RAY_ADDRESS"
FETCH_SECONDS = 0.5  # an actor's fetch returns after this long even with nothing to say
CORE_DIR = Path(__file__).resolve().parents[1]  # shipped to the cluster's workers (runtime_env py_modules)


def connect(address: str | None):
    """ray.init(address) once per process (None: a cluster found through RAY_ADDRESS, else a new local
    one), with this checkout's `core` package shipped to the workers; returns the ray module. Token
    authentication stays as Ray sets it (on by default in ray 2.60: the token comes from RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)."""
    import ray

    if not ray.is_initialized():
        env = {"py_modules": [str(CORE_DIR)], "env_vars": {"OMP_WAIT_POLICY": "PASSIVE", **TRAINING_ENV}}
        ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level=logging.WARNING)
    return ray


class _TrainingActor:
    """One training in a Ray worker process (made a Ray actor class by _actor_class)."""

    def __init__(self, settings: RunConfig, threads: int, name: str):
        import multiprocessing as mp

        from core.pool import worker
        from core.training.heap import keep_freed_memory

        keep_freed_memory()  # the actor's process only trains
        self._conn, child = mp.Pipe(duplex=True)
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(target=worker.train, args=(child, settings, threads), name=name, daemon=True)
        self._thread.start()

    def pid(self) -> int:
        return os.getpid()

    def send(self, message: tuple) -> bool:
        with self._send_lock:
            try:
                self._conn.send(message)
                return True
            except (OSError, ValueError):
                return False

    def fetch(self, timeout: float) -> tuple[list, bool]:
        """Every message the worker wrote so far (waiting up to `timeout` for the first), and whether
        its end has closed (the worker returned)."""
        messages = []
        try:
            if self._conn.poll(timeout):
                while self._conn.poll():
                    messages.append(self._conn.recv())
        except (EOFError, OSError):
            return messages, True
        return messages, False


_ACTOR = None


def _actor_class(ray):
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = ray.remote(max_concurrency=4, max_restarts=0)(_TrainingActor)
    return _ACTOR


class RayHandle:
    """A WorkerHandle (core.pool.backend) on a training actor: one fetch in flight, its messages kept
    in a local queue that poll and recv read. poll, alive and exit_reason never block."""

    def __init__(self, ray, actor, name: str, pid: int | None):
        self.name, self.pid = name, pid
        self._ray, self._actor = ray, actor
        self._inbox: deque = deque()
        self._eof = False
        self._lost: str | None = None  # why the actor ended, if it died under us
        self._ended_by_us: str | None = None  # "kill" or "close"
        self._closed = False
        self._lock = threading.Lock()  # fetch bookkeeping: the monitor's wait and poll
        self._fetch = actor.fetch.remote(FETCH_SECONDS)

    # -- reading (the monitor) --

    def _collect(self, block: float = 0.0) -> None:
        """Take the pending fetch's answer if it is there (waiting at most `block` s) and ask again."""
        with self._lock:
            if self._fetch is None:
                return
            ready, _ = self._ray.wait([self._fetch], timeout=block)
            if ready:
                self._take(self._fetch)

    def _take(self, ref) -> None:
        """Under the lock: the answer of `ref` (the pending fetch) into the inbox."""
        ray = self._ray
        self._fetch = None
        try:
            messages, eof = ray.get(ref)
        except ray.exceptions.RayError as e:  # RayActorError: the actor died, or its node was lost
            messages, eof = [], True
            if self._ended_by_us is None:
                self._lost = _lost_sentence(e)
        self._inbox.extend(messages)
        if eof:
            self._eof = True
        elif not self._closed:
            self._fetch = self._actor.fetch.remote(FETCH_SECONDS)

    def poll(self) -> bool:
        if not self._inbox and not self._eof:
            self._collect()
        return bool(self._inbox) or self._eof

    def recv(self) -> tuple:
        if not self._inbox and not self._eof:
            self._collect(block=FETCH_SECONDS + 5.0)
        if self._inbox:
            return self._inbox.popleft()
        raise EOFError("the training actor's end is closed")

    # -- commands --

    def send(self, message: tuple) -> bool:
        if self._closed or self._eof:
            return False
        try:
            return bool(self._ray.get(self._actor.send.remote(message), timeout=10.0))
        except Exception:  # noqa: BLE001 -- the actor is gone: as a closed Pipe
            return False

    @property
    def closed(self) -> bool:
        return self._closed

    def alive(self) -> bool:
        """Whether the actor runs the training: not once it said end-of-file, died, or was ended."""
        if self._ended_by_us is not None or self._lost is not None:
            return False
        return not self._eof or bool(self._inbox)

    def exit_reason(self) -> str | None:
        if self.alive():
            return None
        if self._lost is not None:
            return self._lost
        if self._ended_by_us == "kill":
            return "was killed (its Ray actor was ended)"
        return "returned"

    def kill(self) -> None:
        self._end("kill")

    def join(self, timeout: float) -> bool:
        """True once the actor is ended or its worker returned; waits at most `timeout` for that."""
        if not self.alive():
            return True
        self._collect(block=timeout)
        return not self.alive()

    def close(self) -> None:
        """Stop reading and end the actor (its training has ended, or nobody follows it)."""
        self._closed = True
        self._end("close")

    def _end(self, how: str) -> None:
        if self._ended_by_us is None:
            self._ended_by_us = how
        try:
            self._ray.kill(self._actor, no_restart=True)
        except Exception as e:  # noqa: BLE001 -- already gone
            log.info("Ending a training actor: %s", e)


def _lost_sentence(error: Exception) -> str:
    """What follows "The training process" when its actor died: the first line of Ray's reason."""
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if len(detail) > 160:
        detail = detail[:157] + "..."
    return f"was lost with its Ray actor (the actor died or its node left the cluster: {detail})"


class RayBackend:
    """Trainings as Ray actors on the cluster at `address` (ATTENTION_LAB_RAY_ADDRESS), each asking
    for `threads` CPUs. Connects on warm_up or the first start."""

    def __init__(self, address: str | None = None):
        self.address = address
        self.started: list[RayHandle] = []  # every handle, for tests

    def _ray(self):
        return connect(self.address)

    def start(self, settings: RunConfig, threads: int, name: str) -> RayHandle:
        ray = self._ray()
        actor = _actor_class(ray).options(num_cpus=max(1, int(threads))).remote(settings, threads, name)
        try:
            pid = ray.get(actor.pid.remote(), timeout=120.0)
        except BaseException:
            ray.kill(actor, no_restart=True)
            raise
        handle = RayHandle(ray, actor, name, pid)
        self.started.append(handle)
        return handle

    def wait(self, handles: list, timeout: float) -> list:
        """The handles with something to read: those with queued messages at once, else one ray.wait
        over the pending fetches (at most `timeout` s)."""
        live = [h for h in handles if not h.closed]
        ready = [h for h in live if h._inbox or h._eof]
        if ready:
            return ready
        pending = {}
        for h in live:
            ref = h._fetch
            if ref is not None:
                pending[ref] = h
        if not pending:
            time.sleep(timeout)
            return []
        done, _ = self._ray().wait(list(pending), num_returns=1, timeout=timeout)
        if not done:
            return []
        done, _ = self._ray().wait(list(pending), num_returns=len(pending), timeout=0)
        out = []
        for ref in done:
            h = pending[ref]
            with h._lock:
                if h._fetch is ref:
                    h._take(ref)
            if h._inbox or h._eof:
                out.append(h)
        return out

    def warm_up(self) -> None:
        self._ray()


def backend_from_env():
    """A RayBackend when ATTENTION_LAB_RAY_ADDRESS is set, else None (the pool's own default)."""
    address = os.environ.get(ADDRESS_ENV, "").strip()
    return RayBackend(address) if address else None
