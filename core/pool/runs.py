"""Trainings in worker processes, seen from the server (the worker side is core.pool.worker).

A RunPool starts one OS process per training, at most `capacity` at a time (one first-come line,
core.pool.slots, and at most one slot per session), and one monitor thread reads what the workers
stream. A page only reads its LiveRun, so drawing never holds a training up, and a training never
holds the server's interpreter lock.

Identical runs are computed once. A run's key is its full settings, its seed, the worker's torch
thread count and a hash of the training and model code (`run_key`); training at a fixed thread count
is bit-reproducible. A second session that starts a run whose key is already training (or waiting)
follows that training: its LiveRun shows the same stream and ends with the same model (`shared` =
"live"). One that already finished on this server is handed back at once (`shared` = "finished").
`start(..., private=True)` trains a copy of its own anyway, which nobody else joins.

Every worker trains at `threads` torch threads (default 1): when trainings queue, one thread each
gives the most steps per CPU-second, and a fixed count keeps runs with the same key bit-identical.

Nothing slow runs under the pool's lock: process starts, kills and joins, and reading a checkpoint
back happen outside it, and the monitor thread is the only reader of the workers' Pipes. The monitor
survives any exception (it logs and goes on) and a connection closed under it; `ensure_monitor()`,
called on every script run, starts it again if it died all the same. It also
- ends a run whose worker died (crash, out of memory, killed) or sent nothing for `hang_seconds`,
  with a sentence in LiveRun.error;
- ends the runs of owners (sessions) that `is_alive` no longer knows.
Workers are daemon processes started with forkserver (spawn where there is none), and each one
returns when its Pipe closes, so none outlives the server.

    pool = RunPool(capacity=2)
    run = pool.start(settings, owner="session id")   # waiting -> starting -> running
    run.history(); run.step; run.status              # streamed rows and progress
    pool.stop(run)                                   # -> stopped: run.result = (model, info, bytes)
    pool.discard(run)                                # reset / retrain / session gone: leave the run
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from core.pool import worker
from core.pool.live_run import LiveRun, _Stream, _Training, run_key, session_of
from core.pool.monitor import Monitor
from core.pool.slots import TrainingSlots
from core.pool.status import RunStatus
from core.training.train_settings import TrainSettings

log = logging.getLogger(__name__)

HANG_SECONDS = 60.0  # a worker silent this long while it should be training is ended
STOP_WAIT = 2.0  # how long stop() waits for the worker's model
OWNER_GRACE = 20.0  # an owner is_alive has not known for this long loses its runs (a reload reconnects sooner)
KILL_WAIT = 1.0  # how long a page's discard waits for a killed worker to be gone (outside the lock)
WORKER_THREADS = 1  # torch threads per worker
FINISHED_KEPT = 16  # finished runs kept for sessions that start the same run later
FINISHED_BYTES = 64 * 2**20  # ... and at most this many checkpoint bytes between them


class RunPool(Monitor):
    """At most `capacity` training processes at once, one per session; the others wait in line."""

    def __init__(self, capacity: int, threads: int = WORKER_THREADS, hang_seconds: float = HANG_SECONDS,
                 is_alive: Callable[[str], bool] | None = None, start_method: str | None = None,
                 tick: float = 0.05, owner_grace: float = OWNER_GRACE):
        self.capacity, self.threads = capacity, max(1, int(threads))
        self.hang_seconds, self.is_alive, self.tick, self.owner_grace = hang_seconds, is_alive, tick, owner_grace
        self.monitor_restarts = 0  # how often ensure_monitor found the monitor dead
        self._ctx = worker.context(start_method)
        self._slots = TrainingSlots(capacity)
        self._trainings: dict[str, _Training] = {}  # waiting, starting or running, by id
        self._by_key: dict[str, _Training] = {}  # the ones a new run of the same key may follow
        self._finished: OrderedDict[str, tuple[bytes, _Stream]] = OrderedDict()  # key -> (checkpoint, stream)
        self._runs: dict[str, LiveRun] = {}  # the followers of live trainings, by id
        self._reap: list[tuple] = []  # (process, connection, since) to close and see gone (monitor)
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._monitor: threading.Thread | None = None
        self._gone_since: dict[str, float] = {}  # owner -> when is_alive first said no
        self._last_owner_check = 0.0

    # -- what pages call ------------------------------------------------------------------------

    def start(self, settings: TrainSettings, owner: str, private: bool = False) -> LiveRun:
        """A run of `settings` for `owner` (its active runs are left first). It follows an identical
        training already going or finished on this server, unless `private`; else a new training
        starts when a slot is free."""
        key = None if private else run_key(settings, self.threads)
        with self._lock:
            kills = [k for old in [r for r in self._runs.values() if r.owner == owner] for k in self._leave(old)]
            training = self._by_key.get(key) if key else None
            if training is not None:
                run = LiveRun(settings, owner, training, shared="live")
                training.followers.append(run)
                self._runs[run.id] = run
                self._positions()
            elif key is not None and key in self._finished:
                self._finished.move_to_end(key)
                data, stream = self._finished[key]
                run = LiveRun(settings, owner, stream, shared="finished")
                self._finish(run, RunStatus.FINISHED, data=data)
            else:
                training = _Training(settings, key, self.threads)
                run = LiveRun(settings, owner, training, private=private)
                training.followers.append(run)
                self._trainings[training.id], self._runs[run.id] = training, run
                if key is not None:
                    self._by_key[key] = training
                self._slots.join(training.id)
                self._positions()
        self._kill(kills, KILL_WAIT)
        self._admit()
        self.ensure_monitor()
        return run

    def stop(self, run: LiveRun, wait_seconds: float = STOP_WAIT) -> None:
        """End the run at its last finished step and keep that model (a run that never trained, or
        still waits, is cancelled). A training other sessions follow goes on for them: the worker
        hands this run the model of its current step. Waits up to `wait_seconds` for the model."""
        kills, command, conn, proc = [], None, None, None
        deadline = time.monotonic() + wait_seconds
        with self._lock:
            training = run._src if isinstance(run._src, _Training) else None
            if run.ended.is_set() or training is None or run not in training.followers:
                return
            if training.status == RunStatus.WAITING or training.conn is None:
                command, kills = None, self._leave(run)  # it never trained: nothing to keep
            else:
                run.stopping, conn = True, training.conn
                if len(training.followers) == 1:
                    command, proc = ("stop",), training.proc
                    if self._by_key.get(training.key) is training:
                        del self._by_key[training.key]  # it will not finish: nobody joins it now
                else:
                    command, training.keeps[run.id] = ("keep", run.id), run
        if command is None:
            self._kill(kills, KILL_WAIT)
            return
        with contextlib.suppress(OSError, ValueError):
            conn.send(command)
        if run.ended.wait(wait_seconds) and proc is not None:  # the worker exits once it sent its model
            with contextlib.suppress(Exception):
                proc.join(max(0.0, deadline - time.monotonic()))

    def discard(self, run: LiveRun) -> None:
        """End the run now without keeping a model (reset, train again, session gone). Its training
        goes on while another session follows it, else its worker is killed."""
        with self._lock:
            kills = self._leave(run)
        self._kill(kills, KILL_WAIT)

    def running(self) -> int:
        with self._lock:
            return self._slots.running()

    def runs_of(self, owner: str) -> list[LiveRun]:
        with self._lock:
            return [r for r in self._runs.values() if r.owner == owner]

    def trainings(self) -> int:
        """Worker trainings waiting or going (followers of one training count once)."""
        with self._lock:
            return len(self._trainings)

    def shutdown(self) -> None:
        """Kill every worker and stop the monitor (the server is stopping)."""
        self._closed.set()
        with self._lock:
            kills = [k for t in list(self._trainings.values()) for k in self._drop(t, RunStatus.CANCELLED)]
            reap, self._reap = self._reap, []
        for proc, conn, *_ in kills + reap:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.join(KILL_WAIT)
            with contextlib.suppress(Exception):
                conn.close()

    def warm_up(self) -> None:
        """Start the worker process server now rather than at the first Train press."""
        worker.warm_up(self._ctx)

    def ensure_monitor(self) -> bool:
        """Start the monitor thread unless it is running (called on every script run); True if it
        was started now."""
        with self._lock:
            if self._closed.is_set() or (self._monitor is not None and self._monitor.is_alive()):
                return False
            if self._monitor is not None:
                self.monitor_restarts += 1
                log.warning("The training monitor had stopped; starting it again (restart %d).", self.monitor_restarts)
            self._monitor = threading.Thread(target=self._watch, name="attention-lab-runs", daemon=True)
            self._monitor.start()
            return True

    # -- bookkeeping (under the lock) -----------------------------------------------------------

    def _finish(self, run: LiveRun, status: str, error: str | None = None, data: bytes | None = None,
                decoded=None, **stream) -> None:
        """End one follower: its stream stops changing, its model (if any) is `data`."""
        run._src = run._src.frozen(**stream)
        run._status, run.error, run._data = status, error, data
        run._result = None if decoded is None else (*decoded, data)
        self._runs.pop(run.id, None)
        run.ended.set()

    def _drop(self, training: _Training, status: str, error: str | None = None, data: bytes | None = None,
              decoded=None) -> list[tuple]:
        """End a training and every follower; returns its (process, connection) for _kill."""
        self._trainings.pop(training.id, None)
        if self._by_key.get(training.key) is training:
            del self._by_key[training.key]
        self._slots.release(training.id)
        training.status, training.frames = status, []
        for i, run in enumerate(training.followers):
            self._finish(run, status, error, data, decoded if i == 0 else None)
        training.followers, training.keeps = [], {}
        out = [(training.proc, training.conn)] if training.proc is not None else []
        training.proc = training.conn = None
        self._positions()
        return out

    def _leave(self, run: LiveRun) -> list[tuple]:
        """Take `run` off its training (ended as cancelled); the training ends if nobody follows it."""
        training = run._src if isinstance(run._src, _Training) else None
        kills = []
        if training is not None and run in training.followers:
            training.followers.remove(run)
            training.keeps.pop(run.id, None)
            if not training.followers:
                kills = self._drop(training, RunStatus.CANCELLED)
            elif self._slots.session_of(training.id) == session_of(run.owner):
                self._slots.hand_over(training.id, session_of(training.followers[0].owner))
        if not run.ended.is_set():
            self._finish(run, RunStatus.CANCELLED)
        return kills

    def _sessions_of(self, training_id: str) -> list[str]:
        training = self._trainings.get(training_id)
        return [] if training is None else [session_of(r.owner) for r in training.followers]

    def _positions(self) -> None:
        for training in self._trainings.values():
            if training.status == RunStatus.WAITING:
                training.position = self._slots.position(training.id)
                training.blocked = self._slots.blocked(training.id, self._sessions_of)

    def _store_finished(self, key: str, data: bytes, stream: _Stream) -> None:
        self._finished[key] = (data, stream)
        self._finished.move_to_end(key)
        while len(self._finished) > FINISHED_KEPT or (
                len(self._finished) > 1 and sum(len(d) for d, _ in self._finished.values()) > FINISHED_BYTES):
            self._finished.popitem(last=False)

    # -- slow work, never under the lock --------------------------------------------------------

    def _kill(self, kills: list[tuple], wait_seconds: float = 0.0) -> None:
        """Kill these workers; their connections are closed (and the processes seen gone) by the monitor."""
        for proc, _conn in kills:
            with contextlib.suppress(Exception):
                proc.kill()
                if wait_seconds:
                    proc.join(wait_seconds)
        if kills:
            with self._lock:
                self._reap += [(proc, conn, time.monotonic()) for proc, conn in kills]

    def _admit(self) -> None:
        """Give free slots to waiting trainings in order and start their workers."""
        with self._lock:
            admitted = [self._trainings[i] for i in self._slots.admit(self._sessions_of) if i in self._trainings]
            for training in admitted:
                training.status, training.position = RunStatus.STARTING, 0
            self._positions()
        for training in admitted:
            try:
                proc, conn = worker.start(self._ctx, training.settings, training.threads,
                                          f"attention-lab-training-{training.id[:8]}")
            except Exception as e:  # noqa: BLE001 -- any failure to start is the run's, in one sentence
                log.exception("Could not start a training process")
                with self._lock:
                    why = f"The server could not start a training process ({e})."
                    kills = self._drop(training, RunStatus.FAILED, why)
                self._kill(kills)
                continue
            with self._lock:
                late = training.status != RunStatus.STARTING  # left while its process started
                if not late:
                    training.proc, training.conn, training.pid = proc, conn, proc.pid
                    training.heard = time.monotonic()
            if late:
                self._kill([(proc, conn)], KILL_WAIT)

    # -- the monitor thread ---------------------------------------------------------------------
