"""Trainings run one after another through the server's pool (core.pool.runs.RunPool) in a background
thread: the one mechanism behind the Train page's several seeds (core.series.seeds) and the Laws
page's small sweep (core.series.page_sweep), which differ only in what they keep of a run and when they stop.

A series trains each of its settings under its own owner name (RunPool.start ends an owner's earlier
runs, so it is never the session's Train-page name), waits for the run to end, keeps a row (`row`) and
drops the model, then starts the next. Every wait has a deadline: a run that has not ended `deadline`
seconds after it was started (its wait for a slot included) is ended, its row says so (`late_error`),
and no further run starts. cancel() ends the run in progress and starts no further one.
"""
from __future__ import annotations

import threading
import time

from core.pool.status import RunStatus

POLL = 0.5  # seconds between checks while a run trains


class RunSeries:
    """`settings` trained one at a time in `pool` under `owner`; `results` holds one row per ended run.
    A variant gives `row(run)` and `late_error(settings)`, and may change the two stopping rules below."""

    name = "attention-lab-series"
    keeps_stopped = True  # a run ended by cancel() still gets its row

    def __init__(self, pool, settings: list, owner: str, deadline: float):
        self.pool, self.owner, self.deadline = pool, owner, deadline
        self.runs = list(settings)
        self.results: list[dict] = []
        self.current = None  # the LiveRun in progress
        self.cancelled = threading.Event()
        self._thread = threading.Thread(target=self._train_all, name=self.name, daemon=True)

    def row(self, run) -> dict:
        raise NotImplementedError

    def late_error(self, settings) -> str:
        raise NotImplementedError

    def goes_on(self, run) -> bool:
        """After a run that ended in time: start the next one? (Not after the pool ended it with the session.)"""
        return run.status != RunStatus.CANCELLED

    def start(self):
        self._thread.start()
        return self

    @property
    def active(self) -> bool:
        return self._thread.is_alive()

    @property
    def done(self) -> int:
        return len(self.results)

    def cancel(self) -> None:
        """End the run in progress (its model is not kept) and start no further run."""
        self.cancelled.set()
        run = self.current
        if run is not None:
            self.pool.discard(run)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every run has ended (or the series was cancelled); True if it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _train_all(self) -> None:
        for settings in self.runs:
            if self.cancelled.is_set():
                break
            run = self.pool.start(settings, self.owner)
            self.current = run
            if self.cancelled.is_set():  # cancel() came between the check above and the start
                self.pool.discard(run)
            late = not self._wait_for(run)
            row = self.row(run)
            if late:
                row.update(status="timed out", error=self.late_error(settings))
            run.result = None  # a series keeps rows, not models
            self.current = None
            if run.status == RunStatus.CANCELLED and self.cancelled.is_set() and not self.keeps_stopped:
                break
            self.results.append(row)
            if late or not self.goes_on(run):
                break
        self.current = None

    def _wait_for(self, run) -> bool:
        """Wait for the run to end, at most `deadline` seconds; False if it had to be ended."""
        deadline = time.monotonic() + self.deadline
        while not run.ended.wait(max(0.0, min(POLL, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self.pool.discard(run)
                run.ended.wait(POLL)
                return False
        return True
