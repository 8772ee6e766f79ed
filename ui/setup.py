"""Setup done from a script run, never while a module is imported.

`lab_script()` is the first call of dashboard.py, which every page runs inside. The first call on a
server starts what the server keeps running (the memory trimmer, the training pool's monitor); every call
checks that the pool's monitor thread runs (and starts it again if it died). Not at import: a rerun raised
during an import would leave a half-built module, and other first visitors would fail with ImportError.

The worker process server (forkserver) and multiprocessing's resource tracker are not started here:
the first training starts them (RunPool -> ProcessBackend.start), so a server whose visitors only
read pages never holds them (about 235 MB of PSS); the first Train press on a fresh server
waits for the forkserver's imports instead (a few seconds, once).
"""
from __future__ import annotations

import ctypes
import gc
import logging
import sys
import threading
import time

from ui import sessions

_done = False
# A full garbage collection this often (seconds), on the trimmer's thread: the server runs with
# postScriptGC off (.streamlit/config.toml), and an ended session's state sits in reference cycles
# (its script runs, widgets, models) that only a full collection frees (bench/memory.py --sessions)
GC_EVERY = 60.0
TRIM_EVERY = 1.0  # seconds between the trimmer's ticks (malloc_trim, the ended-session sweep)
_lock = threading.Lock()
_last_run = 0.0  # time.monotonic() of the last script run's start
MADV_PAGEOUT = 21  # Linux 5.4+ (asm-generic/mman-common.h)
MMAP_THRESHOLD = 1 << 20  # bytes: a block this big is mapped on its own and unmapped when freed
_first_ended = False  # the server's first script run has ended (script_ended)
page_outs = 0  # how often the trimmer has paged the libraries out
# file pages (bytes) the process has read since the last page out that make the trimmer page out again: a
# first visit of each page reads more of the libraries (a walk over every page after the first run's page
# out: +53 MB, bench/memory.py), of which a walk reads about 25 MB back after any page out
PAGE_OUT_GROWTH = 32 * 2**20


def lab_script() -> None:
    """Once per server: start the background work. Every run: check the training monitor runs, and let
    ui/sessions.py know of this session."""
    global _done, _last_run
    with _lock:
        first, _done = not _done, True
        _last_run = time.monotonic()
    if first:
        _tune_malloc()
    training = sys.modules.get("ui.training")  # no pool before a page imports it (and with it torch)
    if training is not None:
        training.ensure_monitor()  # every run: a monitor that died is started again
    sessions.note_this_session()  # what this session leaves is released once it can no longer reconnect


def script_ended() -> None:
    """The last call of every script run (dashboard.py): the first one lets the trimmer page out what
    the imports alone read."""
    global _first_ended
    _first_ended = True


def _tune_malloc() -> None:
    """Keep the server's resident memory near what it uses (bench/memory.py). Every script run is a
    new thread, glibc gives threads heaps (arenas) of their own, and it keeps freed tensors of up to
    32 MB inside them: after one session had opened every page the server held about 600 MB, most
    of it free. So: two arenas; blocks of MMAP_THRESHOLD or more always mapped on their own, so that
    freeing one gives it back (glibc raises its threshold each time such a block is freed, up to 32 MB,
    after which a view's tensors are cut from the heap between long-lived objects: a walk that computed
    every view left 297-349 MB of anonymous memory, 259-260 with the threshold fixed, bench/memory.py);
    and a daemon thread that hands free heap pages back to the system every TRIM_EVERY
    seconds (malloc_trim: about 20 ms when there is much to return, microseconds when not; nothing on
    the training path changes), after a full collection every GC_EVERY seconds and a sweep of ended
    sessions (ui/sessions.py) every time.
    Only glibc has these; elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, 2)  # M_ARENA_MAX
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD (a set value is never raised by glibc)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return

    def loop():
        global page_outs
        collected, paged_out, file_after = time.monotonic(), 0.0, None
        while True:
            time.sleep(TRIM_EVERY)
            try:
                sessions.sweep()
            except Exception:  # noqa: BLE001 -- releasing an ended session is housekeeping; the trimmer goes on
                logging.getLogger(__name__).exception("could not release an ended session")
            if time.monotonic() - collected >= GC_EVERY:
                gc.collect()
                collected = time.monotonic()
            # once the first script run has ended (the pages only the imports read), then whenever the
            # first visits since have read PAGE_OUT_GROWTH more, and once per quiet spell of GC_EVERY
            # seconds without a script run
            resident = file_resident()
            grown = None not in (resident, file_after) and resident - file_after >= PAGE_OUT_GROWTH
            quiet = time.monotonic() - _last_run >= GC_EVERY and paged_out < _last_run
            if (_first_ended and (not paged_out or grown)) or quiet:
                page_out_library_pages()
                paged_out, page_outs, file_after = time.monotonic(), page_outs + 1, file_resident()
            trim(0)

    threading.Thread(target=loop, name="attention-lab-malloc-trim", daemon=True).start()


def file_resident() -> int | None:
    """Bytes of file pages this process has resident (RssFile in /proc/self/status); None where there is none.
    Pages it shares with another process count too: a page out leaves those, so the trimmer compares
    with what was resident right after its last one."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssFile:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def page_out_library_pages() -> int:
    """Ask Linux to reclaim the pages of the shared libraries' read-only mappings (code and constants), and
    of the shipped checkpoints mapped by ui/state.py, that only this process maps (madvise MADV_PAGEOUT;
    returns how many mappings took the advice). Importing torch, pyarrow and pandas reads most of their
    libraries (their initialisers, and the kernel's fault-around): about 108 MB of file pages that a server
    alone on its machine pays in full in its PSS, of which a walk over every page uses about 20 MB
    (bench/server_memory.py). The others are read back from the page cache or the disk if ever used
    again. Pages another process maps (a forkserver, a worker) are left alone, written pages (relocations)
    are not dropped, and nothing is lost: a page out is only advice. The trimmer thread calls it once
    the server's first script run has ended (it imported the libraries: most of the pages their
    initialisers read are never read again), whenever PAGE_OUT_GROWTH more file pages are resident than
    right after the last one, and once no script has started for GC_EVERY seconds, once per quiet spell."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as f:
            maps = f.read().splitlines()
    except (OSError, AttributeError):
        return 0
    done = 0
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        if parts[1] not in ("r-xp", "r--p") and not (parts[1] == "rw-p" and parts[5].endswith(".pt")):
            continue  # a library's data is written (relocations, globals); a shipped checkpoint's never is
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        done += madvise(lo, hi - lo, MADV_PAGEOUT) == 0
    return done
