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
import functools
import hashlib
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from multiprocessing.connection import wait
from pathlib import Path

import torch

from core.model.checkpoints import CheckpointError, read_checkpoint
from core.pool import worker
from core.pool.slots import TrainingSlots
from core.training.timeline import keep_frame
from core.training.train_settings import TrainSettings

log = logging.getLogger(__name__)

ACTIVE = ("waiting", "starting", "running")
HANG_SECONDS = 60.0  # a worker silent this long while it should be training is ended
STOP_WAIT = 2.0  # how long stop() waits for the worker's model
OWNER_GRACE = 20.0  # an owner is_alive has not known for this long loses its runs (a reload reconnects sooner)
KILL_WAIT = 1.0  # how long a page's discard waits for a killed worker to be gone (outside the lock)
EXIT_GRACE = 5.0  # a worker whose Pipe closed, or that said "done", gets this long to exit before it is killed
WORKER_THREADS = 1  # torch threads per worker
FINISHED_KEPT = 16  # finished runs kept for sessions that start the same run later
FINISHED_BYTES = 64 * 2**20  # ... and at most this many checkpoint bytes between them


def session_of(owner: str) -> str:
    """The Streamlit session of a pool owner ("<session id>|..."): one training slot each."""
    return owner.split("|", 1)[0]


@functools.cache
def code_version() -> str:
    """A hash of the code a training's result depends on (core/training, core/model, torch's
    version), computed once per server process."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(torch.__version__.encode())
    for path in sorted([*root.glob("training/*.py"), *root.glob("model/*.py")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def run_key(settings: TrainSettings, threads: int) -> str:
    """Runs with the same key give bit-identical models: every setting, the seed, the thread count, the code."""
    return hashlib.sha256(repr((sorted(asdict(settings).items()), threads, code_version())).encode()).hexdigest()


@dataclass(eq=False)
class _Stream:
    """What a training has streamed so far (shared by the LiveRuns that follow it)."""
    status: str = "waiting"
    position: int = 0  # place in line while waiting (1 = next)
    blocked: bool = False  # waiting although a slot is free: the session already holds one
    step: int = 0  # the worker's last finished step
    seconds: float = 0.0  # wall seconds since its first step
    rows: list = field(default_factory=list)
    frames: list = field(default_factory=list)  # (step, patterns [L, H, c, c]) (core.training.timeline.keep_frame)
    strip_period: int = 0  # the period of the film strip's sequence
    threads: int = 0  # torch threads the pool gave the worker
    worker_threads: int = 0  # torch threads the worker reported using at its last progress message
    pid: int | None = None  # the worker process, once started

    def frozen(self, **changes) -> _Stream:
        """A copy that no longer changes (frames dropped: an ended run's snapshots give the film strip)."""
        values = {f.name: getattr(self, f.name) for f in fields(_Stream)}
        values.update(rows=list(self.rows), frames=[], **changes)
        return _Stream(**values)


class _Training(_Stream):
    """One worker process and its stream; `followers` are the LiveRuns of the sessions watching it."""

    def __init__(self, settings: TrainSettings, key: str | None, threads: int):
        super().__init__(threads=threads)
        self.id, self.settings, self.key = uuid.uuid4().hex, settings, key
        self.followers: list[LiveRun] = []
        self.keeps: dict[str, LiveRun] = {}  # "keep" requests sent, by token (= the follower's id)
        self.proc = self.conn = None
        self.heard = time.monotonic()
        self.eof_at: float | None = None  # when its Pipe closed without "done"


def _streamed(name: str):
    return property(lambda run: getattr(run._src, name))


class LiveRun:
    """One session's training as the server sees it. status: waiting -> starting -> running ->
    finished | stopped | cancelled | diverged | failed. `rows` are the logged history rows so far.
    `shared`: None for a run this session's press started, "live" when it follows a training another
    session started, "finished" when it was handed a finished one."""

    status = property(lambda run: run._status or run._src.status)
    position, blocked, step, seconds = (_streamed(n) for n in ("position", "blocked", "step", "seconds"))
    rows, frames, strip_period = (_streamed(n) for n in ("rows", "frames", "strip_period"))
    threads, worker_threads, pid = (_streamed(n) for n in ("threads", "worker_threads", "pid"))

    def __init__(self, settings: TrainSettings, owner: str, source: _Stream, shared: str | None = None,
                 private: bool = False):
        self.settings, self.owner, self.id = settings, owner, uuid.uuid4().hex
        self.model_cfg, self.task_cfg, self.train_cfg = settings.configs()
        self.shared, self.private = shared, private
        self.error: str | None = None  # why a failed run failed, one sentence
        self.registered_key: str | None = None  # set by the page once the model is in the picker
        self.stopping = False  # Stop was pressed; the worker ends (or hands this run its model) after the step
        self.ended = threading.Event()
        self._src = source
        self._status: str | None = None  # set when this run ends
        self._data: bytes | None = None  # the checkpoint, once ended with a model
        self._result = None

    @property
    def result(self):
        """(model, info, checkpoint bytes) once finished or stopped, else None. A run that shares a
        training reads its own copy of the model from the bytes, here, on first use."""
        if self._result is None and self._data is not None:
            model, info = read_checkpoint(self._data, name="The trained model")
            self._result = (model, info, self._data)
        return self._result

    @result.setter
    def result(self, value) -> None:
        self._result = value
        if value is None:
            self._data = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def total_steps(self) -> int:
        return self.train_cfg.steps

    def history(self) -> list[dict]:
        """Logged rows so far; once ended with a model, its stored history (which ends at its step)."""
        result = self.result
        return list(result[1]["history"] if result is not None else self.rows)

    def steps_per_second(self) -> float:
        return self.step / self.seconds if self.seconds > 0 else float("nan")


class RunPool:
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
                self._finish(run, "finished", data=data)
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
            if training.status == "waiting" or training.conn is None:
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
            kills = [k for t in list(self._trainings.values()) for k in self._drop(t, "cancelled")]
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
                kills = self._drop(training, "cancelled")
            elif self._slots.session_of(training.id) == session_of(run.owner):
                self._slots.hand_over(training.id, session_of(training.followers[0].owner))
        if not run.ended.is_set():
            self._finish(run, "cancelled")
        return kills

    def _sessions_of(self, training_id: str) -> list[str]:
        training = self._trainings.get(training_id)
        return [] if training is None else [session_of(r.owner) for r in training.followers]

    def _positions(self) -> None:
        for training in self._trainings.values():
            if training.status == "waiting":
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
                training.status, training.position = "starting", 0
            self._positions()
        for training in admitted:
            try:
                proc, conn = worker.start(self._ctx, training.settings, training.threads,
                                          f"attention-lab-training-{training.id[:8]}")
            except Exception as e:  # noqa: BLE001 -- any failure to start is the run's, in one sentence
                log.exception("Could not start a training process")
                with self._lock:
                    kills = self._drop(training, "failed", f"The server could not start a training process ({e}).")
                self._kill(kills)
                continue
            with self._lock:
                late = training.status != "starting"  # left while its process started
                if not late:
                    training.proc, training.conn, training.pid = proc, conn, proc.pid
                    training.heard = time.monotonic()
            if late:
                self._kill([(proc, conn)], KILL_WAIT)

    # -- the monitor thread ---------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._closed.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 -- the monitor must outlive any one failure
                log.exception("The training monitor failed in one round; going on")
                time.sleep(self.tick)

    def _wait(self, conns: list) -> list:
        """The connections with something to read, at most `tick` seconds from now."""
        if not conns:
            time.sleep(self.tick)
            return []
        try:
            return wait(conns, timeout=self.tick)
        except (OSError, ValueError) as e:  # one was closed since the snapshot: the next round skips it
            log.info("A training connection closed while the monitor waited on it (%s); going on", e)
            return []

    def _tick(self) -> None:
        with self._lock:
            conns = {t.conn: t for t in self._trainings.values()
                     if t.conn is not None and t.eof_at is None and not t.conn.closed}
        inbox = []
        for conn in self._wait(list(conns)):
            messages, eof = _drain(conn)
            inbox.append((conns[conn], conn, [_decoded(m) for m in messages], eof))
        now = time.monotonic()
        kills = []
        with self._lock:
            for training, conn, messages, eof in inbox:
                for message in messages:
                    if training.conn is conn:
                        kills += self._handle(training, message)
                if eof and training.conn is conn:
                    training.eof_at = now
            kills += self._check_health(now)
            reap, self._reap = self._reap, []
        self._kill(kills)
        self._reap_gone(reap, now)
        self._end_orphans(now)
        self._admit()

    def _handle(self, training: _Training, message: tuple) -> list[tuple]:
        training.heard = time.monotonic()
        kind = message[0]
        if kind == "started":
            training.status = "running"
        elif kind == "row":
            training.rows.append(message[1])
        elif kind == "frame":
            training.frames, training.strip_period = keep_frame(training.frames, message[1], message[2]), message[3]
        elif kind == "progress":
            training.step, training.seconds, training.worker_threads = message[1:4]
        elif kind == "error":
            return self._drop(training, "failed",
                              f"The training stopped with an error at step {training.step}: {message[1]}")
        elif kind == "kept":  # one follower pressed Stop: it leaves with the model of this step
            _, token, step, seconds, data, decoded = message
            run = training.keeps.pop(token, None)
            if run is not None and run in training.followers:
                training.followers.remove(run)
                if isinstance(decoded, CheckpointError):
                    self._finish(run, "failed", str(decoded), step=step, seconds=seconds)
                else:
                    self._finish(run, "stopped" if data is not None else "cancelled", data=data, decoded=decoded,
                                 step=step, seconds=seconds)
                if not training.followers:
                    return self._drop(training, "cancelled")
                if self._slots.session_of(training.id) == session_of(run.owner):
                    self._slots.hand_over(training.id, session_of(training.followers[0].owner))
        elif kind == "done":
            _, status, training.step, training.seconds, data, decoded = message
            if isinstance(decoded, CheckpointError):
                return self._drop(training, "failed", str(decoded))
            if status == "finished" and data is not None and training.key is not None:
                self._store_finished(training.key, data, training.frozen(status=status))
            out = self._drop(training, status, data=data, decoded=decoded)
            self._reap += [(proc, conn, time.monotonic()) for proc, conn in out]  # it exits by itself
            return []
        return []

    def _check_health(self, now: float) -> list[tuple]:
        kills = []
        for training in [t for t in self._trainings.values() if t.proc is not None]:
            alive = training.proc.is_alive()
            if training.eof_at is not None or not alive:
                if alive and now - (training.eof_at or now) < EXIT_GRACE:
                    continue  # its Pipe closed: wait a moment for the process to end and give its exit code
                if not alive and training.eof_at is None and _pending(training.conn):
                    continue  # it ended after writing: read that first
                code = training.proc.exitcode
                how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
                kills += self._drop(training, "failed", f"The training process {how} at step {training.step}, before "
                                    "it could hand its model back. Nothing else in your session changed; press Train "
                                    "to try again.")
            elif now - training.heard > self.hang_seconds:
                kills += self._drop(training, "failed", f"The training process sent nothing for "
                                    f"{self.hang_seconds:.0f} s at step {training.step}, so it was ended. Nothing else "
                                    "in your session changed; press Train to try again.")
        return kills

    def _reap_gone(self, reap: list[tuple], now: float) -> None:
        """Close ended workers' connections; kill any still alive EXIT_GRACE seconds after its end."""
        keep = []
        for proc, conn, since in reap:
            with contextlib.suppress(Exception):
                conn.close()
            with contextlib.suppress(Exception):
                if proc.is_alive():
                    if now - since > EXIT_GRACE:
                        proc.kill()
                    keep.append((proc, conn, since))
        if keep:
            with self._lock:
                self._reap += keep

    def _end_orphans(self, now: float) -> None:
        """End the runs of owners is_alive has not known for owner_grace seconds (asked outside the lock)."""
        if self.is_alive is None or now - self._last_owner_check < 1.0:
            return
        self._last_owner_check = now
        with self._lock:
            owners = {r.owner for r in self._runs.values()}
        gone = [o for o in owners if not self.is_alive(o)]
        kills = []
        with self._lock:
            for owner in owners:
                if owner not in gone:
                    self._gone_since.pop(owner, None)
                elif now - self._gone_since.setdefault(owner, now) >= self.owner_grace:
                    del self._gone_since[owner]
                    kills += [k for r in [r for r in self._runs.values() if r.owner == owner] for k in self._leave(r)]
            for owner in set(self._gone_since) - owners:
                del self._gone_since[owner]
        self._kill(kills)


def _drain(conn) -> tuple[list, bool]:
    """Every message a worker has sent so far, and whether its Pipe has closed."""
    messages = []
    try:
        while conn.poll():
            messages.append(conn.recv())
    except (EOFError, OSError, ValueError):
        return messages, True
    return messages, False


def _pending(conn) -> bool:
    try:
        return conn is not None and conn.poll()
    except (EOFError, OSError, ValueError):
        return False


def _decoded(message: tuple) -> tuple:
    """A "done" or "kept" message with its checkpoint read back (or the CheckpointError) appended."""
    if message[0] not in ("done", "kept"):
        return message
    data = message[-1]
    if data is None:
        return (*message, None)
    try:
        return (*message, read_checkpoint(data, name="The trained model"))
    except CheckpointError as e:
        return (*message, e)
