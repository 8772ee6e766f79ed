"""A reading server, page by page: a new `streamlit run dashboard.py` (as a fresh clone or a woken Community
Cloud app: every page's default views read from the shipped data, checkpoints/data/), one light session
(bench/light.py) opening the pages in order with `--wait` seconds after each. Prints the server's
CPU-seconds for each page's first visit, its PSS after each page with the session still connected, whether
torch is mapped into it (a computed view imports torch; a read one does not), and the one-thread 1024²
matmul rate before and after.

    python bench/reading_server.py [--pages all|ROUTE ...] [--wait 2] [--json]

Run it from another checkout's bench/ (e.g. a git worktree of an older commit) to compare two trees on the
same minutes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from first_walk import torch_mapped  # noqa: E402
from machine import matmul_rate  # noqa: E402
from memory import LightSession, start_server  # noqa: E402
from page_cost import cpu_seconds  # noqa: E402

from ui.pages import ALL_PAGES  # noqa: E402


def rollup(pid: int) -> dict:
    """Pss, Pss_Anon and Pss_File of a process, MB."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, *value = line.split()
        if key in ("Pss:", "Pss_Anon:", "Pss_File:"):
            out[key[:-1]] = round(int(value[0]) / 1024, 1)
    return out


async def walk(url: str, pid: int, pages: list[str], wait: float) -> dict:
    cpu, pss = {}, {}
    async with LightSession(url) as s:
        for page in pages:
            c0 = cpu_seconds(pid)
            await s.open(page)
            await asyncio.sleep(wait)
            cpu[page or "home"] = round(cpu_seconds(pid) - c0, 3)
            pss[page or "home"] = rollup(pid)["Pss"]
        return {"first_walk_cpu_s": round(sum(cpu.values()), 2), "per_page_cpu_s": cpu, "pss_after_each_mb": pss,
                "max_pss_mb": max(pss.values()), "end": rollup(pid), "torch_mapped": torch_mapped(pid),
                "errors": list(s.errors)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", nargs="+", default=["all"], help="'all' or page routes ('' is Home)")
    p.add_argument("--wait", type=float, default=2.0, help="seconds after each page before reading the server")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    pages = ([pg.url_path for pg in ALL_PAGES] if args.pages == ["all"] else
             ["" if r == "home" else r for r in args.pages])
    before = round(matmul_rate(), 1)
    proc, url = start_server({})
    try:
        out = {"server_start_cpu_s": round(cpu_seconds(proc.pid), 2), **asyncio.run(walk(url, proc.pid, pages,
                                                                                        args.wait))}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out["matmul_gflops"] = [before, round(matmul_rate(), 1)]
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"matmul (one thread, before/after): {out['matmul_gflops']} GFLOP/s; torch mapped: {out['torch_mapped']}")
    for page, c in out["per_page_cpu_s"].items():
        print(f"  {page:<12} first visit {c:.3f} CPU-s, then PSS {out['pss_after_each_mb'][page]:.1f} MB")
    print(f"first walk {out['first_walk_cpu_s']} CPU-s; PSS after every page at most {out['max_pss_mb']} MB "
          f"(at the end: {out['end']}); errors: {len(out['errors'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
