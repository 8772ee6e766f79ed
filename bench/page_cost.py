"""A page's cost to the server, first visit and warm: CPU-seconds of each page's script run, and where they go.

    python bench/page_cost.py [--rounds 5] [--json]
    python bench/page_cost.py --profile [--top 25]      # plus a sampled profile of every page's runs
    python bench/page_cost.py --profile-first [--top 25] # plus one of every page's first visit in a new process

Starts `streamlit run dashboard.py` (through this file, so it can profile inside the server), which reads
every page's default views from the shipped data (checkpoints/data/) as on a fresh clone, then drives it
with bench/light.py's LightSession (Streamlit's websocket protocol, no browser): one walk over every page
to fill the server's memory caches (its per-page costs are printed too: a new process's first visits, the
views read from the shipped data, the charts built), then --rounds walks, each page's cost being the
server's utime + stime from /proc across its script run and the 0.3 s after it (what the server sends
after the run counts too; the trimmer thread's idle rate, measured first, is taken off). Prints each
page's median over the rounds, the warm walk (the sum of the nine reading pages' medians: every page but
Train) and the server's PSS after the walks, with the one-thread 1024² matmul rate.

--profile: a thread in the server samples the script-run thread's stack every millisecond and sums,
per page, the share of samples in which each function is on the stack (inclusive) and at its top
(self). Sampling inflates the CPU figures a little, so they come from a run without it (first) and
the profile from a second server. --profile-first: the second server's first walk is profiled instead (a
cold process's first visits: imports, first loads), and no warm rounds follow it.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from machine import matmul_rate  # noqa: E402
from memory import LightSession, pss_mb, start_server  # noqa: E402

from ui.pages import ALL_PAGES  # noqa: E402


def loop_seconds(pid: int) -> float:
    """CPU-seconds of the server's main thread: Tornado's event loop, which serialises, compresses and sends
    every message a script run enqueues (the script runs on threads of their own)."""
    return cpu_seconds(pid, f"/proc/{pid}/task/{pid}/stat")


READING = [p.url_path for p in ALL_PAGES if p.url_path != "train"]
SETTLE = 0.3  # seconds after a run's end still counted as that page's


def cpu_seconds(pid: int, stat: str | None = None) -> float:
    """utime + stime of a process (or of the thread whose stat file is `stat`)."""
    fields = Path(stat or f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------
# Inside the server


def _install_sampler(out: Path) -> None:
    """Wrap ScriptRunner._run_script: while a run lasts, a thread samples its stack; at the end the
    page's counts are added to out/<page>.json."""
    from streamlit.runtime.scriptrunner.script_runner import ScriptRunner

    original = ScriptRunner._run_script
    lock = threading.Lock()

    def key(code) -> str:
        where = code.co_filename
        for prefix in (str(ROOT) + "/", "/site-packages/"):
            if prefix in where:
                where = where.split(prefix, 1)[1]
        return f"{where}:{code.co_name}"

    def run(self, rerun_data):
        target, done = threading.get_ident(), threading.Event()
        inclusive, top, n = collections.Counter(), collections.Counter(), [0]

        def sample():
            while not done.wait(0.001):
                frame = sys._current_frames().get(target)
                if frame is None:
                    continue
                n[0] += 1
                top[key(frame.f_code)] += 1
                seen = set()
                while frame is not None:
                    seen.add(key(frame.f_code))
                    frame = frame.f_back
                inclusive.update(seen)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            return original(self, rerun_data)
        finally:
            done.set()
            thread.join()
            page = rerun_data.page_name or "home"
            with lock:
                path = out / f"{page}.json"
                old = json.loads(path.read_text()) if path.exists() else {"runs": 0, "samples": 0, "inclusive": {},
                                                                           "self": {}}
                old["runs"] += 1
                old["samples"] += n[0]
                for name, counts in (("inclusive", inclusive), ("self", top)):
                    for k, v in counts.items():
                        old[name][k] = old[name].get(k, 0) + v
                path.write_text(json.dumps(old))

    ScriptRunner._run_script = run


def serve(argv: list[str]) -> None:
    """`page_cost.py serve [--profile DIR] -- <streamlit run arguments>`: the server, optionally profiled."""
    if argv[:1] == ["--profile"]:
        _install_sampler(Path(argv[1]))
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *argv]
    cli.main()


# ---------------------------------------------------------------------------------------------
# The driver


def start(profile: Path | None) -> tuple[subprocess.Popen, str]:
    """The server, started through this file's `serve` (which can profile it)."""
    extra = ("--profile", str(profile)) if profile else ()
    launcher = (str(Path(__file__).resolve()), "serve", *extra, "--")
    return start_server({}, launcher=launcher)


async def _walks(url: str, pid: int, rounds: int, profile: Path | None,
                 first: bool = False) -> tuple[dict, dict, list, float]:
    pages = [p.url_path for p in ALL_PAGES]
    costs = {p or "home": [] for p in pages}
    loop = {p or "home": [] for p in pages}
    cold = {}
    async with LightSession(url) as s:
        for page in pages:  # the first walk: the server's memory caches fill (its costs: a new process's)
            c0 = cpu_seconds(pid)
            await s.open(page)
            await asyncio.sleep(SETTLE)
            cold[page or "home"] = round(cpu_seconds(pid) - c0, 3)
        await asyncio.sleep(2)
        if first:  # the profile of the first walk only
            return costs, loop, list(s.errors), 0.0, cold
        for path in (profile.glob("*.json") if profile else ()):  # profile the warm runs only
            path.unlink()
        c0 = cpu_seconds(pid)
        await asyncio.sleep(3)
        idle = (cpu_seconds(pid) - c0) / 3  # the trimmer's thread and the event loop, per second
        for _ in range(rounds):
            for page in pages:
                c0, l0, t0 = cpu_seconds(pid), loop_seconds(pid), time.perf_counter()
                await s.open(page)
                await asyncio.sleep(SETTLE)
                costs[page or "home"].append(cpu_seconds(pid) - c0 - idle * (time.perf_counter() - t0))
                loop[page or "home"].append(loop_seconds(pid) - l0)
        errors = list(s.errors)
    return costs, loop, errors, idle, cold


def measure(rounds: int, profile: Path | None = None, first: bool = False) -> dict:
    proc, url = start(profile)
    try:
        costs, loop, errors, idle, cold = asyncio.run(_walks(url, proc.pid, rounds, profile, first))
        if first:
            return {"first_walk": cold, "errors": errors}
        pss = pss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    medians = {p: statistics.median(v) for p, v in costs.items()}
    return {"per_page": {p: round(m, 3) for p, m in medians.items()}, "first_walk": cold,
            "first_walk_total": round(sum(cold.values()), 3),
            "per_page_all": {p: [round(x, 3) for x in v] for p, v in costs.items()},
            "event_loop": {p: round(statistics.median(v), 3) for p, v in loop.items()},
            "warm_walk_reading": round(sum(medians[p or "home"] for p in READING), 3),
            "idle_cores": round(idle, 4), "pss_mb": round(pss, 1), "errors": errors}


def report_profile(folder: Path, top: int) -> dict:
    out = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        n = max(data["samples"], 1)
        rows = sorted(data["inclusive"].items(), key=lambda kv: -kv[1])[:top]
        selfs = sorted(data["self"].items(), key=lambda kv: -kv[1])[:top]
        ours = sorted(((k, v) for k, v in data["inclusive"].items()
                       if k.startswith(("app_pages/", "ui/", "core/", "exercises/"))), key=lambda kv: -kv[1])[:top]
        out[path.stem] = {"runs": data["runs"], "samples": data["samples"],
                          "inclusive": [(k, round(v / n, 3)) for k, v in rows],
                          "ours": [(k, round(v / n, 3)) for k, v in ours],
                          "self": [(k, round(v / n, 3)) for k, v in selfs]}
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="also profile every page in a second server")
    p.add_argument("--profile-first", action="store_true",
                   help="also profile every page's first visit in a second, new server")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rate0 = matmul_rate()
    result = measure(args.rounds)
    if args.profile or args.profile_first:
        with tempfile.TemporaryDirectory() as folder:
            measure(args.rounds, profile=Path(folder), first=args.profile_first)
            result["profile"] = report_profile(Path(folder), args.top)
    result["matmul_gflops"] = [round(rate0, 1), round(matmul_rate(), 1)]
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"matmul (one thread, 1024², before/after): {result['matmul_gflops']} GFLOP/s; "
          f"server idle {result['idle_cores']} cores (taken off)")
    for page, m in result["per_page"].items():
        print(f"  {page:<12} {m:6.3f} CPU-s (first visit {result['first_walk'][page]:.3f}; "
              f"event loop {result['event_loop'][page]:.3f})   "
              f"rounds {result['per_page_all'][page]}")
    print(f"first walk in the new process (every page): {result['first_walk_total']} CPU-s; "
          f"warm walk (nine reading pages): {result['warm_walk_reading']} CPU-s; "
          f"server PSS after {result['pss_mb']} MB")
    if result["errors"]:
        print("errors:", *result["errors"], sep="\n  ")
    for page, prof in result.get("profile", {}).items():
        print(f"\n== {page}: {prof['runs']} runs, {prof['samples']} samples; inclusive share, then self share")
        for k, v in prof["inclusive"]:
            print(f"  {v:6.3f}  {k}")
        print("  -- the lab's own functions, inclusive")
        for k, v in prof["ours"]:
            print(f"  {v:6.3f}  {k}")
        print("  -- self")
        for k, v in prof["self"][:12]:
            print(f"  {v:6.3f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
