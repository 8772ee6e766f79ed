"""What the server spends on the Causal page when a student changes one setting for the first time.

    python bench/causal_first_change.py [--files variable-period-2block.pt ...] [--json]

For each shipped checkpoint of the repeat task: a fresh AppTest session opens the Causal page from empty memory
caches, reading the shipped data as a new server does (checkpoints/data/); then each setting is changed once from
the defaults (corruption, sequence source, researcher view, period, seed), and the run after it is measured in
CPU-seconds of this process (every thread: torch's included), then set back (a warm rerun) and changed again
(warm: the memory cache holds it). Budget (issue 58): a first change within 2 s at 100 GFLOP/s, scaled by the
matmul rate measured here; a warm one within 1 s. Settings whose views the walk ships (ui.cache.SHIPPED_SETTINGS)
read them; period and seed cannot all be shipped and are computed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import matmul_rate  # noqa: E402

PAGE = "app_pages/causal.py"
BUDGET_S, WARM_S, REFERENCE_GFLOPS = 2.0, 1.0, 100.0


def _changes(at, entry_key: str) -> dict:
    """setting -> (widget key, value for the change, default value)."""
    from ui.share import SEQ_MODES

    period_key = f"cz_period_{entry_key}"
    period = at.number_input(key=period_key).value
    return {"corruption → resample": ("cz_corruption", "resample", "first-copy"),
            "sequences → typed": ("cz_source", SEQ_MODES["causal"]["text"], SEQ_MODES["causal"]["task"]),
            "researcher view on": ("cz_advanced", True, False),
            "period + 1": (period_key, period + 1, period),
            "seed + 1": ("cz_seed", 1, 0)}


def measure(file: str) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    from ui.cache import forget_in_memory
    from ui.model_keys import shipped_key

    forget_in_memory()
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(file)).run()
    at.switch_page(PAGE).run()
    rows = []
    for name, (key, value, default) in _changes(at, shipped_key(file)).items():
        got = {"checkpoint": file, "setting": name}
        for phase in ("first", "warm"):
            at.session_state[key] = value
            c0, w0 = time.process_time(), time.perf_counter()
            at.run()
            got[f"{phase}_cpu_s"] = round(time.process_time() - c0, 2)
            got[f"{phase}_wall_s"] = round(time.perf_counter() - w0, 2)
            got["exception"] = str(at.exception[0].value)[:120] if at.exception else None
            at.session_state[key] = default
            at.run()  # back to the defaults (their views are warm)
        rows.append(got)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="*", help="checkpoint files (default: every shipped repeat-task checkpoint)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)
    from core.model import cpu
    from ui.state import shipped_files

    rate = matmul_rate()
    files = args.files or [r["file"] for r in shipped_files()]
    rows = [r for f in files for r in measure(f)]
    budget = BUDGET_S * REFERENCE_GFLOPS / rate
    if args.json:
        print(json.dumps({"cpu": cpu.kind(), "matmul_gflops": round(rate, 1), "budget_s": round(budget, 2),
                          "rows": rows}))
        return 0
    print(f"CPU {cpu.kind()}, matmul {rate:.1f} GFLOP/s (one thread): first-change budget {budget:.2f} CPU-s "
          f"({BUDGET_S:g} s at {REFERENCE_GFLOPS:g} GFLOP/s), warm {WARM_S:g} s")
    print(f"{'checkpoint':<30} {'setting':<24} {'first CPU-s':>11} {'wall':>6} {'warm CPU-s':>10} {'wall':>6}")
    for r in rows:
        flag = " over" if r["first_cpu_s"] > budget else ""
        print(f"{r['checkpoint']:<30} {r['setting']:<24} {r['first_cpu_s']:>11.2f} {r['first_wall_s']:>6.2f} "
              f"{r['warm_cpu_s']:>10.2f} {r['warm_wall_s']:>6.2f}{flag}" + (f"  {r['exception']}" if r["exception"]
                                                                           else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
