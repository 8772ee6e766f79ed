"""A limit on how many holders may go at once, with a first-come line for the others.

core.pool.runs.RunPool uses it for its training processes: a run asks for a slot (`request`), which also
renews its lease, and the pool's monitor renews the leases of live runs; a lease not renewed within
`lease_seconds` expires, and so does a waiting place whose holder stops asking. Holders that find
no free slot wait in line (first come, first served) and learn how many are running and where they
stand. Thread-safe.

    slots = TrainingSlots(capacity=2)
    status = slots.request(run_id)        # acquire or renew, else wait in line
    if status.granted: ...start the training...
    slots.release(run_id)                 # when the run finishes, stops or is reset
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

ENV_VAR = "ATTENTION_LAB_MAX_TRAININGS"
DEFAULT_CAPACITY = 2
LEASE_SECONDS = 15.0


@dataclass(frozen=True)
class SlotStatus:
    granted: bool  # this holder may train now (its lease is fresh)
    running: int  # leases held right now, this holder's included
    capacity: int  # most trainings allowed at once
    position: int = 0  # place in line when waiting (1 = next), 0 when granted

    def message(self) -> str:
        """One line for the page."""
        if self.granted:
            return f"training slot held ({self.running} of {self.capacity} in use)"
        if self.capacity == 0:
            return f"training is switched off on this server ({ENV_VAR}=0)"
        ahead = f"; {self.position - 1} ahead of you" if self.position > 1 else "; you are next"
        return f"waiting for a free training slot: {self.running} running{ahead}"


class TrainingSlots:
    """At most `capacity` holders train at once; leases expire after `lease_seconds` unrenewed."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, lease_seconds: float = LEASE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        if capacity < 0:
            raise ValueError(f"capacity must be 0 or more, got {capacity}.")
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, got {lease_seconds}.")
        self.capacity, self.lease_seconds, self._clock = capacity, lease_seconds, clock
        self._lock = threading.Lock()
        self._leases: dict[str, float] = {}  # holder -> time of last renewal
        self._waiting: dict[str, tuple[float, float]] = {}  # holder -> (joined, last asked); dict keeps join order

    def _expire(self, now: float) -> None:
        for table, seen in ((self._leases, lambda v: v), (self._waiting, lambda v: v[1])):
            for holder in [h for h, v in table.items() if now - seen(v) > self.lease_seconds]:
                del table[holder]

    def request(self, holder: str) -> SlotStatus:
        """Acquire a slot or renew this holder's lease; if none is free, join (or keep) a place in line."""
        with self._lock:
            now = self._clock()
            self._expire(now)
            if holder in self._leases:
                self._leases[holder] = now
                return SlotStatus(True, len(self._leases), self.capacity)
            joined = self._waiting.get(holder, (now, now))[0]
            self._waiting[holder] = (joined, now)
            line = list(self._waiting)  # insertion order = order of joining
            position = line.index(holder) + 1
            if position <= self.capacity - len(self._leases):
                del self._waiting[holder]
                self._leases[holder] = now
                return SlotStatus(True, len(self._leases), self.capacity)
            return SlotStatus(False, len(self._leases), self.capacity, position)

    def release(self, holder: str) -> None:
        """Give up this holder's slot or place in line (no error if it holds neither)."""
        with self._lock:
            self._leases.pop(holder, None)
            self._waiting.pop(holder, None)

    def running(self) -> int:
        """How many leases are live now."""
        with self._lock:
            self._expire(self._clock())
            return len(self._leases)

    def waiting(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._waiting)

    def holds(self, holder: str) -> bool:
        with self._lock:
            self._expire(self._clock())
            return holder in self._leases


def capacity_from_env(environ=None) -> tuple[int, str | None]:
    """(capacity, problem): ATTENTION_LAB_MAX_TRAININGS as a whole number >= 0, else the default
    and a sentence saying why the setting was ignored."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_CAPACITY, None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        return DEFAULT_CAPACITY, (f"{ENV_VAR}={raw!r} is not a whole number of 0 or more, "
                                  f"so the default of {DEFAULT_CAPACITY} trainings at once applies.")
    return value, None
