"""Page timing bench: how long each page takes to rerun once warm, on each shipped checkpoint.

    python bench/page_times.py [--json] [--repeats 3] [--checkpoint-dir DIR]

For every shipped checkpoint it opens the app in AppTest, picks that model in the sidebar, and for
every page (home and the six pages) runs it once cold, once more to warm up, then `--repeats`
times, and reports the median of those as the warm rerun time. The budget (docs/DESIGN.md) is 1 s per
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--repeats", type=int, default=3, help="warm reruns per page (median reported)")
    p.add_argument("--checkpoint-dir", type=Path, help="measure the checkpoints in this folder instead")
    args = p.parse_args(argv)
    if args.checkpoint_dir:
        ui.state.CHECKPOINT_DIR = args.checkpoint_dir.resolve()
    logging.disable(logging.CRITICAL)  # a page's exception is reported in the table instead
    files = [r["file"] for r in ui.state.shipped_files()]
    if not files:
        print(f"no shipped checkpoints in {ui.state.CHECKPOINT_DIR}", file=sys.stderr)
        return 2
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
