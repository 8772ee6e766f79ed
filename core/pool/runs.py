"""Trainings in worker processes, seen from the server (the worker side is core.pool.worker).

A RunPool starts one OS process per training, at most `capacity` at a time (first come, first
served, through core.pool.slots), and one monitor thread reads what the workers stream into their
LiveRun objects. A page only reads a LiveRun, so drawing never holds a training up, and a training
never holds the server's interpreter lock. The monitor also
- splits the cores: each running worker gets split_threads(running) torch threads;
- ends a run whose worker died (crash, out of memory, killed) or sent nothing for `hang_seconds`,
  with a sentence in LiveRun.error;
- ends the runs of owners (sessions) that `is_alive` no longer knows.
Workers are daemon processes started with forkserver (spawn where there is none), and each one
returns when its Pipe closes, so none outlives the server.

    pool = RunPool(capacity=2)
    run = pool.start(settings, owner="session id")   # waiting -> starting -> running
    run.history(); run.step; run.status              # streamed rows and progress
    pool.stop(run)                                   # -> stopped: run.result = (model, info, bytes)
    pool.discard(run)                                # reset / retrain / session gone: kill, forget
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from multiprocessing.connection import wait

from core.model.checkpoints import CheckpointError, read_checkpoint
from core.pool import worker
from core.pool.slots import TrainingSlots
from core.training.timeline import keep_frame
from core.training.train_settings import TrainSettings, machine_cores, split_threads

ACTIVE = ("waiting", "starting", "running")
HANG_SECONDS = 60.0  # a worker silent this long while it should be training is ended
STOP_WAIT = 2.0  # how long stop() waits for the worker's model
OWNER_GRACE = 20.0  # an owner is_alive has not known for this long loses its runs (a reload reconnects sooner)


class LiveRun:
    """One training as the server sees it. status: waiting -> starting -> running -> finished |
    stopped | cancelled | diverged | failed. `rows` are the worker's logged history rows so far."""

    def __init__(self, settings: TrainSettings, owner: str):
        self.settings, self.owner, self.id = settings, owner, uuid.uuid4().hex
        self.model_cfg, self.task_cfg, self.train_cfg = settings.configs()
        self.status = "waiting"
        self.position = 0  # place in line while waiting (1 = next)
        self.step, self.seconds = 0, 0.0  # the worker's last finished step; wall seconds since its first
        self.rows: list[dict] = []
        self.frames: list = []  # (step, patterns [L, H, c, c]) while training (core.training.timeline.keep_frame)
        self.strip_period = 0  # the period of the film strip's sequence
        self.result = None  # (model, info, checkpoint bytes) once finished or stopped
        self.error: str | None = None  # why a failed run failed, one sentence
        self.registered_key: str | None = None  # set by the page once the model is in the picker
        self.threads = 0  # torch threads the pool gave the worker
        self.worker_threads = 0  # torch threads the worker reported using at its last progress message
        self.pid: int | None = None  # the worker process, once started
        self.stopping = False  # Stop was pressed; the worker ends after the step in progress
        self.ended = threading.Event()
        self._proc = self._conn = None
        self._heard = time.monotonic()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def total_steps(self) -> int:
        return self.train_cfg.steps

    def history(self) -> list[dict]:
        """Logged rows so far; once ended with a model, its stored history (which ends at its step)."""
        return list(self.result[1]["history"] if self.result is not None else self.rows)

    def steps_per_second(self) -> float:
        return self.step / self.seconds if self.seconds > 0 else float("nan")

    def _end(self, status: str, error: str | None = None) -> None:
        self.status, self.error = status, error
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        self.ended.set()


class RunPool:
    """At most `capacity` training processes at once; the others wait in line."""

    def __init__(self, capacity: int, cores: int | None = None, hang_seconds: float = HANG_SECONDS,
                 is_alive: Callable[[str], bool] | None = None, start_method: str | None = None,
                 tick: float = 0.05, owner_grace: float = OWNER_GRACE):
        self.capacity, self.cores = capacity, cores or machine_cores()
        self.hang_seconds, self.is_alive, self.tick, self.owner_grace = hang_seconds, is_alive, tick, owner_grace
        self._ctx = worker.context(start_method)
        self._slots = TrainingSlots(capacity, lease_seconds=3600.0)
        self._runs: dict[str, LiveRun] = {}
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._monitor: threading.Thread | None = None
        self._gone_since: dict[str, float] = {}  # owner -> when is_alive first said no

    # -- what pages call ------------------------------------------------------------------------

    def start(self, settings: TrainSettings, owner: str) -> LiveRun:
        """A new run for `owner` (its active runs are discarded first); it starts when a slot is free."""
        run = LiveRun(settings, owner)
        with self._lock:
            for old in [r for r in self._runs.values() if r.owner == owner]:
                self.discard(old)
            self._runs[run.id] = run
            self._admit()
        self.ensure_monitor()
        return run

    def stop(self, run: LiveRun, wait_seconds: float = STOP_WAIT) -> None:
        """End the run at its last finished step and keep that model (a run that never trained, or
        still waits, is cancelled). Waits up to `wait_seconds` for the worker's model."""
        with self._lock:
            if run.status == "waiting" or (run.status == "starting" and run._conn is None):
                self._forget(run, "cancelled")
                return
            run.stopping = True
            if run._conn is not None:
                with contextlib.suppress(OSError):
                    run._conn.send(("stop",))
        run.ended.wait(wait_seconds)

    def discard(self, run: LiveRun) -> None:
        """End the run now without keeping a model (reset, train again, session gone)."""
        with self._lock:
            self._forget(run, "cancelled" if run.active else run.status)

    def running(self) -> int:
        with self._lock:
            return sum(r.status in ("starting", "running") for r in self._runs.values())

    def runs_of(self, owner: str) -> list[LiveRun]:
        with self._lock:
            return [r for r in self._runs.values() if r.owner == owner]

    def shutdown(self) -> None:
        """Kill every worker and stop the monitor (the server is stopping)."""
        self._closed.set()
        with self._lock:
            for run in list(self._runs.values()):
                self._forget(run, "cancelled")

    def warm_up(self) -> None:
        """Start the worker process server now rather than at the first Train press."""
        worker.warm_up(self._ctx)

    def ensure_monitor(self) -> None:
        with self._lock:
            if self._monitor is None or not self._monitor.is_alive():
                self._monitor = threading.Thread(target=self._watch, name="attention-lab-runs", daemon=True)
                self._monitor.start()

    # -- the monitor thread ---------------------------------------------------------------------

    def _forget(self, run: LiveRun, status: str) -> None:
        self._runs.pop(run.id, None)
        self._slots.release(run.id)
        if run.active or run._proc is not None:
            run._end(status)
        self._balance()

    def _admit(self) -> None:
        """Give free slots to waiting runs in order and start their workers."""
        for run in [r for r in self._runs.values() if r.status == "waiting"]:
            status = self._slots.request(run.id)
            run.position = status.position
            if status.granted:
                run.status = "starting"
                self._launch(run)

    def _launch(self, run: LiveRun) -> None:
        run.threads = split_threads(self.running(), self.cores)
        try:
            run._proc, run._conn = worker.start(self._ctx, run.settings, run.threads,
                                                f"attention-lab-training-{run.id[:8]}")
        except OSError as e:
            self._end_failed(run, f"The server could not start a training process ({e}).")
            return
        run.pid, run._heard = run._proc.pid, time.monotonic()
        self._balance()

    def _balance(self) -> None:
        """Split the cores between the running workers (told between two steps)."""
        live = [r for r in self._runs.values() if r._conn is not None]
        threads = split_threads(len(live), self.cores)
        for run in live:
            if run.threads != threads:
                run.threads = threads
                with contextlib.suppress(OSError):
                    run._conn.send(("threads", threads))

    def _end_failed(self, run: LiveRun, sentence: str) -> None:
        self._runs.pop(run.id, None)
        self._slots.release(run.id)
        run._end("failed", sentence)
        self._balance()
        self._admit()

    def _watch(self) -> None:
        last_owner_check = 0.0
        while not self._closed.is_set():
            with self._lock:
                conns = {r._conn: r for r in self._runs.values() if r._conn is not None}
            if not conns:
                time.sleep(self.tick)
            for conn in wait(list(conns), timeout=self.tick) if conns else []:
                with self._lock:
                    if conns[conn]._conn is conn:
                        self._read(conns[conn])
            with self._lock:
                self._check_health(time.monotonic())
                if self.is_alive and time.monotonic() - last_owner_check > 1.0:
                    last_owner_check = time.monotonic()
                    self._end_orphans(last_owner_check)
                for run in self._runs.values():  # keep the leases of running and waiting runs fresh
                    if run.status != "waiting":
                        self._slots.request(run.id)
                self._admit()

    def _end_orphans(self, now: float) -> None:
        """End the runs of owners is_alive has not known for owner_grace seconds."""
        owners = {r.owner for r in self._runs.values()}
        for owner in owners:
            if self.is_alive(owner):
                self._gone_since.pop(owner, None)
            elif now - self._gone_since.setdefault(owner, now) >= self.owner_grace:
                for run in self.runs_of(owner):
                    self._forget(run, "cancelled")
                del self._gone_since[owner]

    def _read(self, run: LiveRun) -> None:
        """Everything the worker has sent so far."""
        try:
            while run._conn is not None and run._conn.poll():
                self._handle(run, run._conn.recv())
        except (EOFError, OSError):
            self._died(run)

    def _handle(self, run: LiveRun, message: tuple) -> None:
        run._heard = time.monotonic()
        kind = message[0]
        if kind == "started":
            run.status = "running"
        elif kind == "row":
            run.rows.append(message[1])
        elif kind == "frame":
            run.frames, run.strip_period = keep_frame(run.frames, message[1], message[2]), message[3]
        elif kind == "progress":
            run.step, run.seconds, run.worker_threads = message[1:4]
        elif kind == "error":
            self._end_failed(run, f"The training stopped with an error at step {run.step}: {message[1]}")
        elif kind == "done":
            _, status, run.step, run.seconds, data = message
            if data is not None:
                try:
                    model, info = read_checkpoint(data, name="The trained model")
                except CheckpointError as e:
                    self._end_failed(run, str(e))
                    return
                run.result, run.frames = (model, info, data), []  # its snapshots now give the film strip
            self._runs.pop(run.id, None)
            self._slots.release(run.id)
            run._end(status)
            self._balance()
            self._admit()

    def _died(self, run: LiveRun) -> None:
        proc = run._proc
        if proc is not None:
            proc.join(2)
        code = None if proc is None else proc.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        self._end_failed(run, f"The training process {how} at step {run.step}, before it could hand its model "
                              "back. Nothing else in your session changed; press Train to try again.")

    def _check_health(self, now: float) -> None:
        for run in [r for r in self._runs.values() if r._proc is not None]:
            if not run._proc.is_alive() and not run._conn.poll():
                self._died(run)
            elif now - run._heard > self.hang_seconds:
                self._end_failed(run, f"The training process sent nothing for {self.hang_seconds:.0f} s at step "
                                      f"{run.step}, so it was ended. Nothing else in your session changed; press "
                                      "Train to try again.")
