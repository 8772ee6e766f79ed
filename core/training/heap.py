"""A training process's heap (glibc's malloc): kept between steps, handed back after each log.

A step allocates and frees the same few-MB tensors every time. By default glibc hands blocks that
big out as fresh mmaps, or trims them off the top of its heap as soon as they are freed, so the next
step faults every page in again: about 1,000-1,300 page faults and 2-4 ms of kernel time in a default
step of 42-49 ms (bench/README.md, issue #29). After keep_freed_memory() blocks under 32 MB come from
the heap and up to 256 MB of free heap stays mapped. The floats do not change (checked bit for bit
over 300 steps), nor did the worker's PSS measurably (bench/memory.py --worker: the same 240 MB peak).

Between logs that memory stays with the process; release_free_memory (the pool's worker calls it
after each log) hands the free part back, so the worker's PSS read at a log is what it holds.

Only processes whose whole life is training call it (the pool's worker processes, Ray actors, sweep
runs, the training CLI), never the server: there the freed memory should go back. Without glibc it
does nothing. This module imports nothing heavy, so a test can load it in a bare interpreter.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3


def keep_freed_memory(mmap_below: int = 32 << 20, keep: int = 256 << 20) -> bool:
    """Serve blocks under `mmap_below` bytes from the heap and keep up to `keep` bytes of it free;
    True if glibc took both settings."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_below)) and bool(libc.mallopt(M_TRIM_THRESHOLD, keep))
    except (OSError, AttributeError):
        return False


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        return None


_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim), after each log. Every step
    frees its activations, and glibc kept the freed memory: a default worker held 89 MB of private
    memory after 300 steps, 22 MB with this (bench/README.md, issue #30), for about 0.3% of its time."""
    if _TRIM is not None:
        _TRIM(0)
