"""Setup done from a script run, never while a module is imported.

`lab_script()` is the first call of dashboard.py, which every page runs inside. The first call on a
server starts what the server keeps running (the memory trimmer, the training pool's monitor) and
prunes the view cache's stale entries;
every call checks that the pool's monitor thread runs (and starts it again if it
died). This used to happen inside `import ui.state`: a rerun raised during an import left a
half-built module, and other first visitors then failed with ImportError.

The worker process server (forkserver) and multiprocessing's resource tracker are not started here:
the first training starts them (RunPool -> ProcessBackend.start), so a server whose visitors only
read pages never holds them (issue #30: about 235 MB of PSS); the first Train press on a fresh server
waits for the forkserver's imports instead (a few seconds, once).
"""
from __future__ import annotations

import ctypes
import gc
import logging
import threading
import time

from ui import sessions
from ui.cache import prune_in_background
from ui.training import run_pool

_done = False
# A full garbage collection this often (seconds), on the trimmer's thread: the server runs with
# postScriptGC off (.streamlit/config.toml), and an ended session's state sits in reference cycles
# (its script runs, widgets, models) that only a full collection frees (issue #30, bench/README.md)
GC_EVERY = 60.0
_lock = threading.Lock()


def lab_script() -> None:
    """Once per server: start the background work. Every run: check the training monitor runs, and let
    ui/sessions.py know of this session."""
    global _done
    with _lock:
        first, _done = not _done, True
    if first:
        _tune_malloc()
        prune_in_background()  # the view cache's stale entries (ui/cache.py), on a thread of its own
    run_pool().ensure_monitor()  # every run: a monitor that died is started again
    sessions.note_this_session()  # what this session leaves is released once it can no longer reconnect


def _tune_malloc(every: float = 1.0) -> None:
    """Keep the server's resident memory near what it uses (bench/memory.py). Every script run is a
    new thread, glibc gives threads heaps (arenas) of their own, and it keeps freed tensors of up to
    32 MB inside them: after one session had opened every page the server held about 600 MB, most
    of it free. So: two arenas, and a daemon thread that hands free heap pages back to the system
    every `every` seconds (malloc_trim: about 20 ms when there is much to return, microseconds when
    not; nothing on the training path changes), after a full collection every GC_EVERY seconds and
    a sweep of ended sessions (ui/sessions.py) every time.
    Only glibc has these; elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return

    def loop():
        collected = time.monotonic()
        while True:
            time.sleep(every)
            try:
                sessions.sweep()
            except Exception:  # noqa: BLE001 -- releasing an ended session is housekeeping; the trimmer goes on
                logging.getLogger(__name__).exception("could not release an ended session")
            if time.monotonic() - collected >= GC_EVERY:
                gc.collect()
                collected = time.monotonic()
            trim(0)

    threading.Thread(target=loop, name="attention-lab-malloc-trim", daemon=True).start()
