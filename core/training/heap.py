"""A training process keeps the memory its steps free (glibc's malloc), instead of faulting it in again.

A step allocates and frees the same few-MB tensors every time. By default glibc hands blocks that
big out as fresh mmaps, or trims them off the top of its heap as soon as they are freed, so the next
step faults every page in again: about 1,000-1,300 page faults and 2-4 ms of kernel time in a default
step of 42-49 ms (bench/README.md, "Training speed"). After keep_freed_memory() blocks under 32 MB come from
the heap and up to 256 MB of free heap stays mapped. The floats do not change (checked bit for bit
over 300 steps), nor did the worker's peak PSS (bench/memory.py --worker: 244 MB before, 240-248 after).

The pool's worker used to hand its free heap back after every log (malloc_trim). That
only lowered the PSS read just after a log: the next step faulted it all in again (about 16,000
pages, 600-700 faults a step on average), and the worker's peak PSS was the same with or without it
(247 and 248 MB over a default run, bench/memory.py --worker). So it is gone: a worker holds its
working set until it exits.

MKL (torch's BLAS on x86) keeps buffers of its own between calls, its "fast memory manager": in a
worker's 2-thread default step they held about 34 MB of heap for good (mallinfo2: in use after the step
156.5 MB against 119.9 with MKL_DISABLE_FAST_MM=1; bench/README.md, "A training process's memory").
MKL reads that variable when it starts, so TRAINING_ENV goes into a training process's environment before torch runs
(core.pool.worker.context, before the forkserver starts; Ray's runtime_env). MKL then asks malloc for
its buffers each call, and the kept heap above serves them without page faults. The floats do not
change (300 steps at seed 0, one thread: parameter hash 088c9c64dbe79608 either way).

Only processes whose whole life is training call it (the pool's worker processes, Ray actors, sweep
runs, the training CLI), never the server: there the freed memory should go back. Without glibc it
does nothing. This module imports nothing heavy, so a test can load it in a bare interpreter.
"""
from __future__ import annotations

import ctypes

TRAINING_ENV = {"MKL_DISABLE_FAST_MM": "1"}  # set before torch starts in a process that only trains
M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3


MMAP_BELOW = 32 << 20  # bytes: smaller blocks come from the heap
KEEP_FREE = 256 << 20  # bytes of free heap kept for the next step instead of handed back


def keep_freed_memory() -> bool:
    """Serve blocks under MMAP_BELOW bytes from the heap and keep up to KEEP_FREE bytes of it free;
    True if glibc took both settings."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_BELOW)) and bool(libc.mallopt(M_TRIM_THRESHOLD, KEEP_FREE))
    except (OSError, AttributeError):
        return False



def hand_back_free_memory() -> bool:
    """Return the heap's free pages to the system now (malloc_trim(0)); False without glibc."""
    try:
        return bool(ctypes.CDLL(None).malloc_trim(0))
    except (OSError, AttributeError):
        return False
