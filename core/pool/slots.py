"""A first-come line for the server's training slots: at most `capacity` holders at once, and at
most one slot per session.

core.pool.runs.RunPool keeps one TrainingSlots under its own lock (this class takes no lock): a
training joins the line (`join`), and the pool's `admit` moves waiting holders to a slot, first come
first served, while one is free. A holder whose session already holds a slot keeps its place and
waits, so one student cannot take two slots (an ordinary run and a several-seeds run, say) while
others wait. A slot is held until `release`: nothing expires, the pool releases a slot when its
training ends, is stopped or is discarded.

    slots = TrainingSlots(capacity=2)
    slots.join("run id")
    for holder in slots.admit(lambda holder: ["its session id"]): ...start that training...
    slots.release("run id")
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable

ENV_VAR = "ATTENTION_LAB_MAX_TRAININGS"
DEFAULT_CAPACITY = 2


class TrainingSlots:
    """A plain first-come queue with `capacity` slots; one slot per session. Not thread-safe: the
    pool calls it under its own lock. `sessions_of(holder)` names the sessions a holder may count
    against (a training several sessions follow has several); it takes the slot of the first of them
    that holds none."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        if capacity < 0:
            raise ValueError(f"capacity must be 0 or more, got {capacity}.")
        self.capacity = capacity
        self._running: dict[str, str] = {}  # holder -> the session its slot counts against
        self._line: list[str] = []  # waiting holders, in order of joining

    def join(self, holder: str) -> None:
        """Enter the line (no change for a holder already in line or holding a slot)."""
        if holder not in self._running and holder not in self._line:
            self._line.append(holder)

    def _free_session(self, holder: str, sessions_of: Callable[[str], Iterable[str]]) -> str | None:
        busy = set(self._running.values())
        return next((s for s in sessions_of(holder) if s not in busy), None)

    def admit(self, sessions_of: Callable[[str], Iterable[str]]) -> list[str]:
        """Give free slots to the line, first come first served, passing over holders whose sessions
        all hold a slot already (they keep their place); returns the holders admitted now, in order."""
        admitted = []
        for holder in list(self._line):
            if len(self._running) >= self.capacity:
                break
            session = self._free_session(holder, sessions_of)
            if session is not None:
                self._line.remove(holder)
                self._running[holder] = session
                admitted.append(holder)
        return admitted

    def hand_over(self, holder: str, session: str) -> None:
        """The slot of a running holder now counts against `session` (the session it counted against left)."""
        if holder in self._running:
            self._running[holder] = session

    def release(self, holder: str) -> None:
        """Give up this holder's slot or place in line (no error if it holds neither)."""
        self._running.pop(holder, None)
        if holder in self._line:
            self._line.remove(holder)

    def position(self, holder: str) -> int:
        """Place in line (1 = next), 0 when holding a slot or unknown."""
        return self._line.index(holder) + 1 if holder in self._line else 0

    def blocked(self, holder: str, sessions_of: Callable[[str], Iterable[str]]) -> bool:
        """Waiting while a slot is free, because every session of this holder already holds one."""
        return (holder in self._line and len(self._running) < self.capacity
                and self._free_session(holder, sessions_of) is None)

    def running(self) -> int:
        return len(self._running)

    def waiting(self) -> int:
        return len(self._line)

    def holds(self, holder: str) -> bool:
        return holder in self._running

    def session_of(self, holder: str) -> str | None:
        """The session a running holder's slot counts against."""
        return self._running.get(holder)


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

