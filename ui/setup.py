"""Setup done from a script run, never while a module is imported.

`lab_script()` is the first call of dashboard.py and of every page. The first call on a server
starts what the server keeps running (the memory trimmer, the training pool's monitor, the worker
process server); every call checks that the pool's monitor thread runs (and starts it again if it
died) and sends a run of Streamlit's old multipage mode back through dashboard.py. Both used to
happen inside `import ui.state`: a rerun raised during an import left a half-built module, and
other first visitors then failed with ImportError.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import time

import streamlit as st

from ui.training import run_pool

_done = False
_lock = threading.Lock()


def lab_script() -> None:
    """Once per server: start the background work. Every run: check the training monitor runs, and
    leave the old multipage mode."""
    global _done
    with _lock:
        first, _done = not _done, True
    if first:
        _tune_malloc()
        run_pool().warm_up()
    run_pool().ensure_monitor()  # every run: a monitor that died is started again
    if _in_old_multipage_run():
        _leave_old_multipage_mode()
        st.rerun()


def _in_old_multipage_run() -> bool:
    """Whether Streamlit runs this script in its old multipage mode (its `_mpa_v1` is a caller).

    Until some run has called st.navigation, Streamlit treats a `pages/` folder beside the entry
    script as an old-style multipage app: when the first visit to a fresh server is a deep link
    (/train), it runs pages/train.py alone (no sidebar picker) and keeps doing so for every session
    until someone opens the home page. (tests/e2e checks a deep link on a fresh server.)"""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_mpa_v1":
            return True
        frame = frame.f_back
    return False


def _leave_old_multipage_mode() -> None:
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without the old mode
        return
    PagesManager.uses_pages_directory = False


def _tune_malloc(every: float = 1.0) -> None:
    """Keep the server's resident memory near what it uses (bench/memory.py). Every script run is a
    new thread, glibc gives threads heaps (arenas) of their own, and it keeps freed tensors of up to
    32 MB inside them: after one session had opened every page the server held about 600 MB, most
    of it free. So: two arenas, and a daemon thread that hands free heap pages back to the system
    every `every` seconds (malloc_trim: about 20 ms when there is much to return, microseconds when
    not; nothing on the training path changes). Only glibc has these; elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return

    def loop():
        while True:
            time.sleep(every)
            trim(0)

    threading.Thread(target=loop, name="attention-lab-malloc-trim", daemon=True).start()
