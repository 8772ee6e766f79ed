"""How many torch threads each running training gets."""
from __future__ import annotations

import os


def machine_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def split_threads(running: int, cores: int | None = None) -> int:
    """Torch threads for each of `running` trainings sharing `cores` (default: this machine's): the
    cores split between them, at least 1 each. Two trainings with two threads each on two cores ran
    about 5 times slower per step than with one thread each."""
    cores = machine_cores() if cores is None else cores
    return max(1, cores // max(1, running))
