"""Page timing bench: how long each page takes to rerun once warm, on each shipped checkpoint.

    python bench/page_times.py [--json] [--repeats 3] [--checkpoint-dir DIR]
    python bench/page_times.py --first-walk [--all-files] [--no-kept] [--json]

--first-walk: what a new server process pays for its first visitor (the CPU kind is printed beside it):
this interpreter's CPU-seconds (resource.getrusage: user + system, every thread) for its imports, then for
one walk over every page's defaults on the default model (--all-files: on every shipped checkpoint), each
page once, as a fresh server meets it, then for a second visitor's walk in the same process. Nothing is
cached before it but what is shipped in checkpoints/data/; views missing there are computed (and counted:
`computed`). --no-kept draws every chart without ui/charts/kept.py's kept charts (what that layer saves:
the second walk).

For every shipped checkpoint it opens the app in AppTest, picks that model in the sidebar, and for
every page (ui.pages.ALL_PAGES: Home and the nine others) runs it once cold, once more to warm up, then
`--repeats` times, and reports the median of those as the warm rerun time. The budget (docs/DESIGN.md) is 1 s per
page once warm. AppTest time includes parsing the page's messages, so it slightly overstates what a
browser waits for the server. Timings on a shared machine are noisy: read them, do not assert them.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

import ui.shipped_data  # noqa: E402
import ui.state  # noqa: E402
from ui.model_keys import shipped_key  # noqa: E402
from ui.pages import ALL_PAGES  # noqa: E402

PAGES = [p.file for p in ALL_PAGES]
BUDGET_S = 1.0



def _timed_run(at: AppTest) -> float:
    t0 = time.perf_counter()
    at.run()
    return time.perf_counter() - t0


def measure(file: str, repeats: int) -> list[dict]:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=300)
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(file))
    rows = []
    for page in PAGES:
        if page is not None:
            at.switch_page(page)
        cold = _timed_run(at)
        _timed_run(at)
        warm = [_timed_run(at) for _ in range(repeats)]
        problem = str(at.exception[0].value)[:200] if at.exception else None
        rows.append({"checkpoint": file, "page": page or "home", "cold_s": round(cold, 3),
                     "warm_s": round(statistics.median(warm), 3), "warm_max_s": round(max(warm), 3),
                     "within_budget": statistics.median(warm) <= BUDGET_S, "exception": problem})
    return rows


def _cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_kind() -> str:
    """The CPU's model name and whether it has AVX-512 (from /proc/cpuinfo)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "unknown")
    return f"{name}, {'AVX-512' if ' avx512f' in info else 'no AVX-512'}"


def first_walk(files: list[str], kept: bool = True) -> dict:
    """CPU-seconds of this process's imports (so far) and of one walk over every page on each of `files`."""
    imports = _cpu()
    if not kept:
        from ui.charts import kept as kept_module

        kept_module.draw = lambda where, chart, **kw: where.altair_chart(chart, **kw)  # noqa: E731
    calls = ui.shipped_data.recorded = []
    rows = []
    for visitor in ("first", "second"):  # the second: another session on the same server, after the first
        for file in files:
            at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
            c0 = _cpu()
            at.run()
            at.selectbox(key="picked_model").set_value(shipped_key(file))
            for page in PAGES:
                if page is not None:
                    at.switch_page(page)
                at.run()
                rows.append({"visitor": visitor, "checkpoint": file, "page": page or "home",
                             "cpu_s": round(_cpu() - c0, 3),
                             "exception": str(at.exception[0].value)[:200] if at.exception else None})
                c0 = _cpu()
    walk = lambda who: round(sum(r["cpu_s"] for r in rows if r["visitor"] == who), 2)  # noqa: E731
    return {"cpu": cpu_kind(), "imports_cpu_s": round(imports, 2), "walk_cpu_s": walk("first"),
            "second_walk_cpu_s": walk("second"), "views_asked": len(calls), "computed": sum(c.computed for c in calls),
            "kept_charts": kept, "torch_imported": "torch" in sys.modules, "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--first-walk", action="store_true", help="a new process's CPU-s for one walk over every page")
    p.add_argument("--all-files", action="store_true", help="--first-walk: on every shipped checkpoint")
    p.add_argument("--no-kept", action="store_true", help="--first-walk: without ui/charts/kept.py's kept charts")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--repeats", type=int, default=3, help="warm reruns per page (median reported)")
    p.add_argument("--checkpoint-dir", type=Path, help="measure the checkpoints in this folder instead")
    args = p.parse_args(argv)
    if args.checkpoint_dir:
        ui.state.CHECKPOINT_DIR = args.checkpoint_dir.resolve()
    logging.disable(logging.CRITICAL)  # a page's exception is reported in the table instead
    files = [m.file for m in ui.state.shipped_models()]  # the Markov runs too
    if not files:
        print(f"no shipped checkpoints in {ui.state.CHECKPOINT_DIR}", file=sys.stderr)
        return 2
    if args.first_walk:
        from core.training.presets import DEFAULT_PRESET

        got = first_walk(files if args.all_files else [f"{DEFAULT_PRESET}.pt"], kept=not args.no_kept)
        if args.json:
            print(json.dumps(got))
            return 0
        for r in got["rows"]:
            print(f"{r['visitor']:<8}{r['page']:<28}{r['checkpoint']:<32}{r['cpu_s']:>8.2f} CPU-s"
                  + (f"  exception: {r['exception']}" if r["exception"] else ""))
        print(f"{got['cpu']}: imports {got['imports_cpu_s']:.2f} CPU-s, first walk {got['walk_cpu_s']:.2f} CPU-s "
              f"({got['views_asked']} views asked, {got['computed']} computed; "
              f"torch imported: {got['torch_imported']}); "
              f"a second visitor's walk {got['second_walk_cpu_s']:.2f} CPU-s")
        return 0
    rows = [row for f in files for row in measure(f, args.repeats)]
    if args.json:
        print(json.dumps({"budget_s": BUDGET_S, "repeats": args.repeats, "rows": rows}))
        return 0
    print(f"{'page':<22}{'checkpoint':<32}{'cold s':>8}{'warm s':>8}{'max s':>8}  ok")
    for r in rows:
        flag = "yes" if r["within_budget"] and not r["exception"] else "NO"
        print(f"{r['page']:<22}{r['checkpoint']:<32}"
              f"{r['cold_s']:>8.2f}{r['warm_s']:>8.2f}{r['warm_max_s']:>8.2f}  {flag}"
              + (f"  exception: {r['exception']}" if r["exception"] else ""))
    worst = max(rows, key=lambda r: r["warm_s"])
    print(f"slowest warm page: {worst['page']} on {worst['checkpoint']}: {worst['warm_s']:.2f} s (budget {BUDGET_S} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
