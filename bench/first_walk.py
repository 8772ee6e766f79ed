"""A new server's first visitor and a second visitor, in Chromium: the server's CPU-seconds per page and its
memory after.

    python bench/first_walk.py [--json]

Starts `streamlit run dashboard.py` (a new process, as a fresh clone's or a Community Cloud app woken from
sleep). One Chromium session opens every page (the first walk: each page's default views of the default
model are read from the shipped data, checkpoints/data/, and its charts built; nothing is computed, so no
torch is imported: tests/test_view_names.py), then a second session opens them again (the second walk:
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
import logging
import os
import re
import sys
import tempfile
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


class _Counted(logging.Handler):
    """Appends each record's message to a file, one line each."""

    def __init__(self, path: Path):
        super().__init__(logging.INFO)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        with open(self.path, "a") as f:
            f.write(record.getMessage().replace("\n", " ") + "\n")


def serve(argv: list[str]) -> None:
    """`first_walk.py serve <computed file> -- <streamlit run arguments>`: the server, with every view it
    computes on a shipped checkpoint (the INFO record "... is not shipped ...: computed") written to the file."""
    log = logging.getLogger("ui")  # ui.shipped_data's record (ui.cache's in older trees) reaches it
    log.setLevel(logging.INFO)
    counted = _Counted(Path(argv[0]))
    counted.addFilter(lambda r: r.name in ("ui.cache", "ui.shipped_data") and "not shipped" in r.getMessage())
    log.addHandler(counted)
    argv = argv[2:] if argv[1:2] == ["--"] else argv[1:]
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *argv]
    cli.main()


def light_walk(url: str, pid: int) -> dict:
    """walk() with bench/light.py's session (the websocket protocol, no browser): every page's script run,
    no chart drawn."""
    import asyncio

    from light import LightSession

    async def run() -> dict:
        cpu = {}
        async with LightSession(url) as s:
            for path in PAGES:
                c0 = cpu_seconds(pid)
                await s.open(path)
                await asyncio.sleep(0.5)
                cpu[path or "home"] = round(cpu_seconds(pid) - c0, 2)
        return {"cpu_s": cpu, "cpu_total_s": round(sum(cpu.values()), 2), "errors": list(s.errors)}
    return asyncio.run(run())


def two_walks(light: bool) -> dict:
    computed = Path(tempfile.mkdtemp(prefix="first-walk-")) / "computed.txt"
    computed.touch()
    proc, url = start_server({}, launcher=(str(Path(__file__).resolve()), "serve", str(computed), "--"))
    try:
        out = {"client": "light" if light else "chromium"}
        if light:
            out["first_walk"] = light_walk(url, proc.pid)
            out["first_walk"]["computed"] = computed.read_text().splitlines()
            out["second_walk"] = light_walk(url, proc.pid)
            browser = None
        else:
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            nice_children()
            out["first_walk"] = walk(browser, url, proc.pid)
            out["first_walk"]["computed"] = computed.read_text().splitlines()
            out["second_walk"] = walk(browser, url, proc.pid)
        time.sleep(2)  # the malloc trimmer runs every second
        out["torch_mapped"] = torch_mapped(proc.pid)
        out["processes"] = process_memory(proc.pid)
        out["pss_server_mb"] = out["processes"][0]["pss_mb"]
        out["pss_all_mb"] = round(sum(r["pss_mb"] for r in out["processes"]), 1)
        if browser is not None:
            browser.close()
            pw.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--light", action="store_true", help="walk with bench/light.py's session, no browser (the "
                    "default where Chromium is not installed)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    light = args.light or not Path(CHROMIUM).exists()
    out = {"gflops_before": round(matmul_rate(), 2), **two_walks(light), "gflops_after": round(matmul_rate(), 2)}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"matmul 1 thread: {out['gflops_before']} GFLOP/s before, {out['gflops_after']} after")
    for name in ("first_walk", "second_walk"):
        w = out[name]
        home = f"Home {w['wall_s']['home']:.1f} s wall; " if "wall_s" in w else ""
        print(f"{name} ({out['client']}): server {w['cpu_total_s']:.1f} CPU-s; {home}"
              + ", ".join(f"{k} {v:.1f}" for k, v in w["cpu_s"].items()))
    first = out["first_walk"]["computed"]
    print(f"views computed in the first walk: {len(first)}" + "".join(f"\n  {c}" for c in first[:10]))
    print(f"after both walks, nobody training: torch mapped {out['torch_mapped']}; server "
          f"{out['pss_server_mb']:.0f} MB PSS, {out['pss_all_mb']:.0f} MB with {len(out['processes']) - 1} "
          "processes under it")
    for p in out["processes"][1:]:
        print(f"  {p['pss_mb']:.0f} MB  {p['cmd']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
