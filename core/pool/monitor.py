"""The pool's monitor: one thread that calls a round again and again (core.pool.runs.RunPool owns
one and gives it the round), survives any exception in a round (it logs it and goes on), and is
replaced when it died or is stuck.

Each thread runs under a generation number. ensure() starts a new generation when the thread is
dead, or when its heartbeat (stamped at the start of every round) is older than `stuck_seconds`: a
round that never finished. The old thread may wake up later; `current(generation)` is then False,
and the round must check it (under the pool's lock) before it changes anything, so a stale round
acts on nothing it saw.

    monitor = Monitor(round, stuck_seconds=15.0, name="attention-lab-runs")
    monitor.ensure()          # on every script run: True if a thread was started now
    monitor.current(gen)      # inside the round, under the caller's lock
    monitor.close()
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STUCK_SECONDS = 15.0  # a round older than this is stuck: its monitor is replaced
FAILED_ROUND_PAUSE = 0.05  # after a round raised, before the next one


class Monitor:
    """`round(generation)` in a loop on a daemon thread, replaced when dead or stuck."""

    def __init__(self, round: Callable[[int], None], stuck_seconds: float = STUCK_SECONDS,
                 name: str = "attention-lab-runs"):
        self._round, self.stuck_seconds, self.name = round, stuck_seconds, name
        self.generation = 0  # the thread of this generation is the only one that may act
        self.restarts = 0  # threads started again after one died or got stuck
        self.thread: threading.Thread | None = None
        self.beat = time.monotonic()  # when the current thread last started a round
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def current(self, generation: int) -> bool:
        return generation == self.generation and not self._closed.is_set()

    def stuck(self) -> bool:
        return self.thread is not None and self.thread.is_alive() and time.monotonic() - self.beat > self.stuck_seconds

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive() and not self.stuck()

    def ensure(self) -> bool:
        """Start the thread unless one runs and is not stuck; True if one was started now."""
        with self._lock:
            if self._closed.is_set() or self.alive():
                return False
            if self.thread is not None:
                self.restarts += 1
                why = "was stuck in one round" if self.thread.is_alive() else "had stopped"
                log.warning("The training monitor %s; starting it again (restart %d).", why, self.restarts)
            self.generation += 1
            self.beat = time.monotonic()
            self.thread = threading.Thread(target=self._run, args=(self.generation,), name=self.name, daemon=True)
            self.thread.start()
            return True

    def close(self) -> None:
        """Every thread ends after its round (none is waited for)."""
        self._closed.set()

    def _run(self, generation: int) -> None:
        while self.current(generation):
            self.beat = time.monotonic()
            try:
                self._round(generation)
            except Exception:  # noqa: BLE001 -- the monitor must outlive any one failure
                log.exception("The training monitor failed in one round; going on")
                time.sleep(FAILED_ROUND_PAUSE)
