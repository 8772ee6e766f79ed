"""A new server's first visitor and a second visitor, in Chromium: the server's CPU-seconds per page and its
memory after.

    python bench/first_walk.py [--json]

Starts `streamlit run dashboard.py` (a new process, as a fresh clone's or a Community Cloud app woken from
sleep). One Chromium session opens every page (the first walk: each page's default views of the default
model are read from the shipped data, checkpoints/data/, and its charts built; nothing is computed, so no
torch is imported: tests/test_torch_free.py), then a second session opens them again (the second walk:
the views and charts come from the server's memory caches, st.cache_data and ui/charts/kept.py). Per page
it reads the server's CPU time (utime + stime from /proc, so the other load on the machine does not count)
and the wall time of Home; after both walks, nobody training, whether torch is mapped into the server and
the PSS of the server and of every process under it (smaps_rollup). Chromium runs at nice 19. The
one-thread 1024² matmul rate is printed beside the figures (the machine's speed in the same run).
bench/reading_server.py measures the first walk with the light client, page by page.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import contextlib

from machine import matmul_rate  # noqa: E402
from memory import CHROMIUM, CHROMIUM_ARGS, IDLE, PAGES, start_server  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        tree += sorted(frontier)
    return tree


def process_memory(pid: int) -> list[dict]:
    """PSS (MB) and what each process of the server's tree is."""
    rows = []
    for p in [pid, *descendants(pid)]:
        try:
            pss = int(re.search(r"^Pss:\s+(\d+) kB", Path(f"/proc/{p}/smaps_rollup").read_text(), re.M).group(1))
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:90]
        except (OSError, AttributeError):
            continue
        rows.append({"pid": p, "pss_mb": round(pss / 1024, 1), "cmd": cmd.strip()})
    return rows


def torch_mapped(pid: int) -> bool:
    """Whether torch's library is mapped into the process (a computed view imports torch; a read one does not)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def nice_children() -> None:
    """Nice 19 for the Chromium processes under this one (not the server)."""
    for p in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if b"chrom" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]:
                os.setpriority(os.PRIO_PROCESS, p, 19)


def walk(browser, url: str, pid: int) -> dict:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    cpu, wall = {}, {}
    for path in PAGES:
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        page.goto(f"{url}/{path}")
        page.wait_for_selector(IDLE, timeout=300_000)
        wall[path or "home"] = round(time.perf_counter() - t0, 2)
        page.wait_for_timeout(500)  # charts draw after the script finishes
        cpu[path or "home"] = round(cpu_seconds(pid) - c0, 2)
    ctx.close()
    return {"cpu_s": cpu, "cpu_total_s": round(sum(cpu.values()), 2), "wall_s": wall}


def two_walks() -> dict:
    from playwright.sync_api import sync_playwright

    proc, url = start_server({})
    try:
        out = {}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            nice_children()
            out["first_walk"] = walk(browser, url, proc.pid)
            out["second_walk"] = walk(browser, url, proc.pid)
            time.sleep(2)  # the malloc trimmer runs every second
            out["torch_mapped"] = torch_mapped(proc.pid)
            out["processes"] = process_memory(proc.pid)
            out["pss_server_mb"] = out["processes"][0]["pss_mb"]
            out["pss_all_mb"] = round(sum(r["pss_mb"] for r in out["processes"]), 1)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = {"gflops_before": round(matmul_rate(), 2), **two_walks(), "gflops_after": round(matmul_rate(), 2)}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"matmul 1 thread: {out['gflops_before']} GFLOP/s before, {out['gflops_after']} after")
    for name in ("first_walk", "second_walk"):
        w = out[name]
        print(f"{name}: server {w['cpu_total_s']:.1f} CPU-s; Home {w['wall_s']['home']:.1f} s wall; "
              + ", ".join(f"{k} {v:.1f}" for k, v in w["cpu_s"].items()))
    print(f"after both walks, nobody training: torch mapped {out['torch_mapped']}; server "
          f"{out['pss_server_mb']:.0f} MB PSS, {out['pss_all_mb']:.0f} MB with {len(out['processes']) - 1} "
          "processes under it")
    for p in out["processes"][1:]:
        print(f"  {p['pss_mb']:.0f} MB  {p['cmd']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
