"""ui/setup.py's lab_script: a server whose visitors only read pages holds no training machinery:
no forkserver and no resource tracker until the first training starts one; its heap
maps big blocks on their own however many it has freed (glibc's mmap threshold, fixed); and the pages
only the imports read are paged out once the first script run has ended."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

_PROBE = r'''
import ctypes, json, os
from pathlib import Path
import time
import ui.setup
ui.setup.lab_script()
time.sleep(1.5)  # the trimmer ticks every second: at least one tick before the end
paged_while_running = ui.setup.page_outs
ui.setup.script_ended()
ui.setup.lab_script()
deadline = time.monotonic() + 10
while not ui.setup.page_outs and time.monotonic() < deadline:
    time.sleep(0.1)
from multiprocessing import forkserver, resource_tracker
children = [p.parent.name for p in Path("/proc").glob("[0-9]*/stat")
            if p.read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())]
class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype, libc.malloc.restype, libc.free.argtypes = Mallinfo2, ctypes.c_void_p, [ctypes.c_void_p]
libc.free(libc.malloc(ui.setup.MMAP_THRESHOLD * 8))  # glibc's own threshold would now rise past 2x
before = libc.mallinfo2().hblkhd
block = libc.malloc(ui.setup.MMAP_THRESHOLD * 2)
mapped = libc.mallinfo2().hblkhd - before
libc.free(block)
print(json.dumps({"forkserver": forkserver._forkserver._forkserver_pid,
                  "tracker": resource_tracker._resource_tracker._pid, "children": children, "mapped": mapped,
                  "threshold": ui.setup.MMAP_THRESHOLD,
                  "page_outs": [paged_while_running, ui.setup.page_outs]}))
'''


@pytest.mark.worker  # a subprocess that imports torch and waits for the trimmer (5 s): the rest tier
def test_the_first_script_run_starts_no_process():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["forkserver"] is None and seen["tracker"] is None
    assert seen["children"] == []
    if sys.platform.startswith("linux"):  # glibc: a block twice the threshold is a mapping of its own
        assert seen["mapped"] >= 2 * seen["threshold"]
    # the libraries' pages are paged out once the first script run has ended, not before, and once only
    assert seen["page_outs"] == [0, 1]


_PAGE_OUT = r'''
import json
import torch
import ui.setup
x = torch.arange(64.0).reshape(8, 8) / 7
before = (x @ x).softmax(-1).sum().item(), torch.linalg.eigvals(x).abs().sort().values.tolist()
advised = ui.setup.page_out_library_pages()
after = (x @ x).softmax(-1).sum().item(), torch.linalg.eigvals(x).abs().sort().values.tolist()
print(json.dumps({"advised": advised, "same": before == after}))
'''


@pytest.mark.worker  # a subprocess that imports torch: the rest tier
def test_paging_out_the_libraries_read_only_pages_leaves_the_process_working():
    """The idle server's page out is advice on read-only file pages only: torch's code runs on
    afterwards and computes the same numbers; on Linux the libraries' mappings took the advice."""
    out = subprocess.run([sys.executable, "-c", _PAGE_OUT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["same"]
    if sys.platform.startswith("linux"):
        assert seen["advised"] > 10


_GROWTH = r'''
import json, mmap, sys, tempfile, time
import ui.setup
ui.setup.lab_script()
ui.setup.script_ended()
deadline = time.monotonic() + 10
while not ui.setup.page_outs and time.monotonic() < deadline:
    time.sleep(0.1)
first = ui.setup.page_outs
size = ui.setup.PAGE_OUT_GROWTH + 8 * 2**20
with tempfile.NamedTemporaryFile(suffix=".pt", dir=sys.argv[1]) as f:  # mapped as ui/state.py maps a checkpoint
    f.write(b"\x01" * size)
    f.flush()
    view = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)  # private: "rw-p", never written
    before = ui.setup.file_resident()
    sum(view[i] for i in range(0, size, mmap.PAGESIZE))  # read every page, as a page's first visit reads code
    read = ui.setup.file_resident()
    deadline = time.monotonic() + 10
    while ui.setup.page_outs == first and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)
    print(json.dumps({"first": first, "then": ui.setup.page_outs, "read": read - before,
                      "left": ui.setup.file_resident() - before, "size": size, "same": view[size - 1] == 1}))
    view.close()
'''


@pytest.mark.worker  # a subprocess that imports torch and waits for the trimmer (5 s): the rest tier
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssFile and MADV_PAGEOUT are Linux's")
def test_file_pages_read_after_the_first_page_out_are_paged_out_again():
    """Each page's first visit reads more library code after the first run's page out (53 MB
    over a walk); once PAGE_OUT_GROWTH more file pages are resident, the trimmer pages out again, without
    waiting for a quiet minute, and the pages read back as they were."""
    folder = ROOT / "test-artifacts"  # on the repository's disk: /tmp may be a tmpfs, whose pages are not file pages
    folder.mkdir(exist_ok=True)
    out = subprocess.run([sys.executable, "-c", _GROWTH, str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["first"] == 1 and seen["then"] == 2
    assert seen["read"] >= seen["size"] * 0.9  # the mapping's pages were resident
    assert seen["left"] < seen["size"] * 0.25  # and most of them were paged out
    assert seen["same"]
