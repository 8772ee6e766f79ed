"""Trainings in workers, seen from the server (the worker side is core.pool.worker).

A RunPool starts one worker per training through its backend (core.pool.backend: OS processes by
default, threads in tests), at most `capacity` at a time (one first-come line, core.pool.slots, and
at most one slot per session), and its monitor (core.pool.monitor, a part of the pool) reads what
the workers stream. A page only reads its LiveRun, so drawing never holds a training up, and a
training never holds the server's interpreter lock.

Identical runs are computed once. A run's key is its full settings, its seed, the worker's torch
thread count and a hash of the training and model code (`run_key`); training at a fixed thread count
is bit-reproducible. A second session that starts a run whose key is already training (or waiting)
follows that training: its LiveRun shows the same stream and ends with the same model (`shared` =
"live"). One that already finished on this server is handed back at once (`shared` = "finished").
`start(..., private=True)` trains a copy of its own anyway, which nobody else joins.

Every worker trains at `threads` torch threads (default 1): when trainings queue, one thread each
gives the most steps per CPU-second, and a fixed count keeps runs with the same key bit-identical.

Nothing slow runs under the pool's lock (a plain Lock: nothing re-enters it). Worker starts run on a
thread each, off the caller and the monitor, with a deadline (`start_seconds`: past it the run fails
with a sentence, the others go on); kills, joins and reading a checkpoint back happen outside the
lock; the monitor is the only reader of the workers' connections, and commands go through the
worker's handle, which writes one at a time. A run's end is published whole (one Ending, then
`ended`). The monitor survives any exception (it logs and goes on) and a connection closed under it;
`ensure_monitor()`, called on every script run, replaces it if it died or is stuck in a round (its
heartbeat is older than `stuck_seconds`; the stuck one acts on nothing once it wakes). It also
- ends a run whose worker died (crash, out of memory, killed) or sent nothing for `hang_seconds`,
  with a sentence in LiveRun.error;
- ends the runs of owners (sessions) that `is_alive` no longer knows.
Process workers are daemon processes started with forkserver (spawn where there is none), and each
one returns when its Pipe closes, so none outlives the server.

    pool = RunPool(capacity=2)                       # RunPool(2, backend=ThreadBackend()) in tests
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
from collections.abc import Callable

from core.pool.backend import Backend, ProcessBackend, WorkerHandle
from core.pool.finished import FinishedRuns
from core.pool.live_run import Ending, LiveRun, _Training, run_key, session_of
from core.pool.monitor import STUCK_SECONDS, Monitor
from core.pool.slots import TrainingSlots
from core.pool.status import RunStatus
from core.training.frames import keep_frame
from core.training.run_config import RunConfig

log = logging.getLogger(__name__)

HANG_SECONDS = 60.0  # a worker silent this long while it should be training is ended
START_SECONDS = 60.0  # a worker not started this long after it got its slot is given up
STOP_WAIT = 2.0  # how long stop() waits for the worker's model
OWNER_GRACE = 20.0  # an owner is_alive has not known for this long loses its runs (a reload reconnects sooner)
KILL_WAIT = 1.0  # how long a page's discard waits for a killed worker to be gone (outside the lock)
EXIT_GRACE = 5.0  # a worker whose Pipe closed, or that said "done", gets this long to exit before it is killed
WORKER_THREADS = 1  # torch threads per worker
# nothing training or waiting this long: the backend may free what starts need (its forkserver, 160-215 MB of
# PSS at rest, 1.6-1.9 CPU-s to start again: bench/README.md, "Server memory"). Longer than the gap between two runs
# of a seed series or a sweep (the next starts as the last ends: milliseconds); shorter than a student takes to
# press Train again, so a server's helpers are over their 450 MB only for these seconds after a training
REST_SECONDS = 2.0


class RunPool:
    """At most `capacity` trainings at once, one per session; the others wait in line. `backend`
    runs the workers (core.pool.backend: processes by default, threads in tests)."""

    def __init__(self, capacity: int, threads: int = WORKER_THREADS, hang_seconds: float = HANG_SECONDS,
                 is_alive: Callable[[str], bool] | None = None, start_method: str | None = None,
                 tick: float = 0.05, owner_grace: float = OWNER_GRACE, backend: Backend | None = None,
                 start_seconds: float = START_SECONDS, stuck_seconds: float = STUCK_SECONDS,
                 rest_seconds: float = REST_SECONDS):
        self.capacity, self.threads = capacity, max(1, int(threads))
        self.hang_seconds, self.is_alive, self.tick, self.owner_grace = hang_seconds, is_alive, tick, owner_grace
        self.start_seconds, self.rest_seconds = start_seconds, rest_seconds
        self.rests = 0  # how often the backend was let rest (its forkserver stopped)
        self._idle_since: float | None = None  # since when nothing trains, waits or is reaped
        self._rested = False  # the backend rested in this idle spell
        self.backend: Backend = backend if backend is not None else ProcessBackend(start_method)
        self.monitor = Monitor(self._round, stuck_seconds)
        self._slots = TrainingSlots(capacity)
        self._trainings: dict[str, _Training] = {}  # waiting, starting or running, by id
        self._by_key: dict[str, _Training] = {}  # the ones a new run of the same key may follow
        self._finished = FinishedRuns()  # key -> (checkpoint, stream), the checkpoints in a temporary file
        self._runs: dict[str, LiveRun] = {}  # the followers of live trainings, by id
        self._reap: list[tuple[WorkerHandle, float]] = []  # (handle, since) to close and see gone (monitor)
        self._lock = threading.Lock()  # nothing re-enters it: every method takes it once, or is called under it
        self._closed = threading.Event()
        self._gone_since: dict[str, float] = {}  # owner -> when is_alive first said no
        self._last_owner_check = 0.0

    @property
    def monitor_restarts(self) -> int:
        """How often ensure_monitor found the monitor dead or stuck."""
        return self.monitor.restarts

    # -- what pages call ------------------------------------------------------------------------

    def start(self, settings: RunConfig, owner: str, private: bool = False) -> LiveRun:
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
            elif key is not None and (kept := self._finished.get(key)) is not None:
                data, stream = kept
                run = LiveRun(settings, owner, stream, shared="finished")
                self._finished.hold(key, data, run)
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
        kills, command, handle, last = [], None, None, False
        deadline = time.monotonic() + wait_seconds
        with self._lock:
            training = run.source if isinstance(run.source, _Training) else None
            if run.ended.is_set() or training is None or run not in training.followers:
                return
            if training.status == RunStatus.WAITING or training.handle is None:
                command, kills = None, self._leave(run)  # it never trained: nothing to keep
            else:
                run.stopping, handle = True, training.handle
                if len(training.followers) == 1:
                    command, last = ("stop",), True
                    if self._by_key.get(training.key) is training:
                        del self._by_key[training.key]  # it will not finish: nobody joins it now
                else:
                    command, training.keeps[run.id] = ("keep", run.id), run
        if command is None:
            self._kill(kills, KILL_WAIT)
            return
        handle.send(command)  # the handle writes one command at a time, whoever presses Stop
        if run.ended.wait(wait_seconds) and last:  # the worker exits once it sent its model
            with contextlib.suppress(Exception):
                handle.join(max(0.0, deadline - time.monotonic()))

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
        self.monitor.close()
        with self._lock:
            kills = [k for t in list(self._trainings.values()) for k in self._drop(t, RunStatus.CANCELLED)]
            reap, self._reap = self._reap, []
        for handle in kills + [h for h, _ in reap]:
            with contextlib.suppress(Exception):
                handle.kill()
                handle.join(KILL_WAIT)
            with contextlib.suppress(Exception):
                handle.close()

    def warm_up(self) -> None:
        """Prepare the backend now (the worker process server) rather than at the first Train press."""
        self.backend.warm_up()

    def ensure_monitor(self) -> bool:
        """Start the monitor thread unless it is running and not stuck (called on every script run);
        True if it was started now. A stuck one is replaced: it acts on nothing once it wakes."""
        return False if self._closed.is_set() else self.monitor.ensure()

    # -- bookkeeping (under the lock) -----------------------------------------------------------

    def _finish(self, run: LiveRun, status: str, error: str | None = None, data: bytes | None = None,
                **stream) -> None:
        """End one follower: its stream stops changing, its model (if any) is `data`."""
        self._runs.pop(run.id, None)
        run.publish(Ending(RunStatus(status), run.source.frozen(**stream), error, data))

    def _drop(self, training: _Training, status: str, error: str | None = None, data: bytes | None = None,
              **stream) -> list[WorkerHandle]:
        """End a training and every follower (`stream`: fields of their frozen stream to change);
        returns its worker's handle for _kill."""
        self._trainings.pop(training.id, None)
        if self._by_key.get(training.key) is training:
            del self._by_key[training.key]
        self._slots.release(training.id)
        training.status, training.frames = status, []
        for run in training.followers:
            self._finish(run, status, error, data, **stream)
        training.followers, training.keeps, training.saved = [], {}, None
        out = [training.handle] if training.handle is not None else []
        training.handle = None
        self._positions()
        return out

    def _leave(self, run: LiveRun) -> list[WorkerHandle]:
        """Take `run` off its training (ended as cancelled); the training ends if nobody follows it."""
        training = run.source if isinstance(run.source, _Training) else None
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

    # -- slow work, never under the lock --------------------------------------------------------

    def _kill(self, kills: list[WorkerHandle], wait_seconds: float = 0.0) -> None:
        """Kill these workers; their connections are closed (and the workers seen gone) by the monitor."""
        for handle in kills:
            with contextlib.suppress(Exception):
                handle.kill()
                if wait_seconds:
                    handle.join(wait_seconds)
        if kills:
            with self._lock:
                self._reap += [(handle, time.monotonic()) for handle in kills]

    def _admit(self) -> None:
        """Give free slots to waiting trainings in order; each worker starts on a thread of its own,
        so a start that stalls holds up neither the caller nor the monitor (its deadline is
        `start_seconds`, checked by the monitor)."""
        with self._lock:
            if self._closed.is_set():
                return
            admitted = [self._trainings[i] for i in self._slots.admit(self._sessions_of) if i in self._trainings]
            for training in admitted:
                training.status, training.position = RunStatus.STARTING, 0
                training.starting_since = time.monotonic()
            self._positions()
        for training in admitted:
            threading.Thread(target=self._start_worker, args=(training,), daemon=True,
                             name=f"attention-lab-start-{training.id[:8]}").start()

    def _start_worker(self, training: _Training) -> None:
        try:
            name = f"attention-lab-training-{training.id[:8]}"
            handle = self.backend.start(training.settings, training.threads, name)
        except Exception as e:  # noqa: BLE001 -- any failure to start is the run's, in one sentence
            log.exception("Could not start a training worker")
            with self._lock:
                started = training.status == RunStatus.STARTING and self._trainings.get(training.id) is training
                why = f"The server could not start a training process ({e})."
                kills = self._drop(training, RunStatus.FAILED, why) if started else []
            self._kill(kills)
            return
        with self._lock:
            late = training.status != RunStatus.STARTING or self._trainings.get(training.id) is not training
            if not late:  # else it left, or its start passed the deadline, while the worker started
                training.handle, training.pid, training.heard = handle, handle.pid, time.monotonic()
        if late:
            self._kill([handle], KILL_WAIT)

    # -- the monitor's round (core.pool.monitor runs it; `generation` says whether it still may act) --

    def _round(self, generation: int) -> None:
        current = self.monitor.current
        with self._lock:
            if not current(generation):
                return
            handles = {t.handle: t for t in self._trainings.values()
                       if t.handle is not None and t.eof_at is None and not t.handle.closed}
        inbox = []
        for handle in self.backend.wait(list(handles), self.tick):
            if not current(generation):
                return  # a stale monitor reads nothing more: the new one owns the connections
            messages, eof = _drain(handle)
            inbox.append((handles[handle], handle, [_decoded(m) for m in messages], eof))
        now = time.monotonic()
        kills = []
        with self._lock:
            if not current(generation):
                return
            for training, handle, messages, eof in inbox:
                for message in messages:
                    if training.handle is handle:
                        kills += self._handle(training, message)
                if eof and training.handle is handle:
                    training.eof_at = now
            kills += self._check_health(now)
            reap, self._reap = self._reap, []
        self._kill(kills)
        self._reap_gone(reap, now)
        self._end_orphans(now, generation)
        if current(generation):
            self._admit()
            self._rest_when_idle(generation)

    def _rest_when_idle(self, generation: int) -> None:
        """Once nothing has trained, waited or been reaped for rest_seconds, let the backend rest (the
        process backend stops its forkserver), once per idle spell."""
        now = time.monotonic()
        with self._lock:
            if not self.monitor.current(generation):  # a replaced monitor's late tick changes nothing
                return
            if self._trainings:
                self._idle_since, self._rested = None, False
                return
            if self._reap:  # a process still being reaped: not idle yet, but no new spell either (once,
                self._idle_since = None  # a discarded run's late reap made a second rest under load)
                return
            if self._idle_since is None:
                self._idle_since = now
            if self._rested or now - self._idle_since < self.rest_seconds:
                return
            self._rested = True
        rest = getattr(self.backend, "rest", None)
        if rest is not None and rest():
            self.rests += 1
            log.info("No training for %.0f s: the worker process server was stopped.", self.rest_seconds)

    def _handle(self, training: _Training, message: tuple) -> list[WorkerHandle]:
        training.heard = time.monotonic()
        kind = message[0]
        if kind == "started":
            training.status = RunStatus.RUNNING
        elif kind == "row":
            training.rows.append(message[1])
        elif kind == "frame":
            training.frames, training.strip_period = keep_frame(training.frames, message[1], message[2]), message[3]
        elif kind == "progress":
            training.step, training.seconds, training.worker_threads = message[1:4]
        elif kind == "saved":
            training.saved = message[1:4]
        elif kind == "error":
            return self._fail(training, f"The training stopped with an error at step {training.step}: {message[1]}.")
        elif kind == "kept":  # one follower pressed Stop: it leaves with the model of this step
            _, token, step, seconds, data, info = message
            run = training.keeps.pop(token, None)
            if run is not None and run in training.followers:
                training.followers.remove(run)
                if isinstance(info, Unreadable):
                    self._finish(run, RunStatus.FAILED, str(info), step=step, seconds=seconds)
                else:
                    kept = RunStatus.STOPPED if data is not None else RunStatus.CANCELLED
                    self._finish(run, kept, data=data, step=step, seconds=seconds, info=info)
                if not training.followers:
                    return self._drop(training, RunStatus.CANCELLED)
                if self._slots.session_of(training.id) == session_of(run.owner):
                    self._slots.hand_over(training.id, session_of(training.followers[0].owner))
        elif kind == "done":
            _, status, training.step, training.seconds, data, info = message
            if isinstance(info, Unreadable):
                return self._drop(training, RunStatus.FAILED, str(info))
            if status == RunStatus.FINISHED and data is not None and training.key is not None:
                self._finished.store(training.key, data, training.frozen(status=status, info=info))
                for run in training.followers:  # a session that starts it later shares their bytes
                    self._finished.hold(training.key, data, run)
            out = self._drop(training, status, data=data, info=info)
            self._reap += [(handle, time.monotonic()) for handle in out]  # it exits by itself
            return []
        return []

    def _check_health(self, now: float) -> list[WorkerHandle]:
        kills = []
        for training in list(self._trainings.values()):
            handle = training.handle
            if handle is None:
                if training.status == RunStatus.STARTING and now - training.starting_since > self.start_seconds:
                    kills += self._drop(training, RunStatus.FAILED, f"The training process had not started "
                                        f"{self.start_seconds:.0f} s after it got its slot, so it was given up. "
                                        "Nothing else in your session changed; press Train to try again.")
                continue
            alive = handle.alive()
            if training.eof_at is not None or not alive:
                if alive and now - (training.eof_at or now) < EXIT_GRACE:
                    continue  # its Pipe closed: wait a moment for the worker to end and give its exit reason
                if not alive and training.eof_at is None and _pending(handle):
                    continue  # it ended after writing: read that first
                how = handle.exit_reason() or "closed its connection but did not exit"
                kills += self._fail(training, f"The training process {how} at step {training.step}.")
            elif now - training.heard > self.hang_seconds:
                kills += self._fail(training, f"The training process sent nothing for {self.hang_seconds:.0f} s at "
                                    f"step {training.step}, so it was ended.")
        return kills

    def _fail(self, training: _Training, why: str) -> list[WorkerHandle]:
        """End a training whose worker failed before "done": its followers keep the model of its last
        logged step (the worker's last "saved" checkpoint, read back by each follower on first use),
        or nothing before the first one."""
        if training.saved is None:
            return self._drop(training, RunStatus.FAILED, f"{why} It had not reached its first logged step, so "
                              "there is no model to keep. Nothing else in your session changed; press Train to "
                              "try again.")
        step, seconds, data = training.saved
        training.saved = None
        return self._drop(training, RunStatus.FAILED, f"{why} Its model at step {step}, the last logged step, is "
                          "kept. Nothing else in your session changed; press Train to "
                          "train again.", data=data, step=step, seconds=seconds)

    def _reap_gone(self, reap: list[tuple[WorkerHandle, float]], now: float) -> None:
        """Close ended workers' connections; kill any still alive EXIT_GRACE seconds after its end."""
        keep = []
        for handle, since in reap:
            with contextlib.suppress(Exception):
                handle.close()
            with contextlib.suppress(Exception):
                if handle.alive():
                    if now - since > EXIT_GRACE:
                        handle.kill()
                    keep.append((handle, since))
        if keep:
            with self._lock:
                self._reap += keep

    def _end_orphans(self, now: float, generation: int) -> None:
        """End the runs of owners is_alive has not known for owner_grace seconds (asked outside the lock)."""
        if self.is_alive is None or now - self._last_owner_check < 1.0:
            return
        self._last_owner_check = now
        with self._lock:
            owners = {r.owner for r in self._runs.values()}
        gone = [o for o in owners if not self.is_alive(o)]
        kills = []
        with self._lock:
            if not self.monitor.current(generation):
                return  # the answers are stale: a newer monitor asks again
            now = time.monotonic()
            for owner in owners:
                if owner not in gone:
                    self._gone_since.pop(owner, None)
                elif now - self._gone_since.setdefault(owner, now) >= self.owner_grace:
                    del self._gone_since[owner]
                    kills += [k for r in [r for r in self._runs.values() if r.owner == owner] for k in self._leave(r)]
            for owner in set(self._gone_since) - owners:
                del self._gone_since[owner]
        self._kill(kills)


def _drain(handle: WorkerHandle) -> tuple[list, bool]:
    """Every message a worker has sent so far, and whether its end has closed."""
    messages = []
    try:
        while handle.poll():
            messages.append(handle.recv())
    except (EOFError, OSError, ValueError):
        return messages, True
    return messages, False


def _pending(handle: WorkerHandle) -> bool:
    try:
        return handle.poll()
    except (EOFError, OSError, ValueError):
        return False


class Unreadable(str):
    """A trained model's checkpoint that could not be read back: its CheckpointError's message."""


def _decoded(message: tuple) -> tuple:
    """A "done" or "kept" message with the worker's reading of its checkpoint (core.pool.worker.info_of) as the
    info without weights, or as Unreadable (why not). The worker reads the checkpoint back, so the server
    imports no torch to start, stream or end a run: the model is loaded when a page first asks for it
    (LiveRun.result)."""
    if message[0] not in ("done", "kept") or not isinstance(message[-1], str):
        return message
    return (*message[:-1], Unreadable(message[-1]))
