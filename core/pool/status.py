"""The states of a training run in the pool, one name each (a str, so it prints and compares as text)."""
from enum import StrEnum


class RunStatus(StrEnum):
    WAITING = "waiting"  # in line for a training slot
    STARTING = "starting"  # its process is being started
    RUNNING = "running"  # training and streaming rows
    FINISHED = "finished"  # trained every step it was asked for
    STOPPED = "stopped"  # stopped by its session after at least one step: the last finished step is kept
    CANCELLED = "cancelled"  # ended before a first step, or its session left: nothing is kept
    DIVERGED = "diverged"  # the training loss turned NaN or infinite: nothing is kept
    FAILED = "failed"  # the process crashed, hung or could not start: the error says why


ACTIVE = (RunStatus.WAITING, RunStatus.STARTING, RunStatus.RUNNING)
