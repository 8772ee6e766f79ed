"""How long moving the training-step slider takes on the Attention and Circuits pages (ui/steps.py).

    python bench/step_control_time.py [--json]

Opens the shipped 2-block model's page in AppTest and moves the slider across the drop: each move
is timed the first time a step is shown (cold: every view of that step computed) and again after
all have been shown once (warm: Streamlit's caches hold each step's views). The budget is 1 s warm.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from ui.model_keys import shipped_key  # noqa: E402

FILE = "variable-period-2block.pt"



def measure(page: str, key: str) -> dict:
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=300)
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(FILE)).run()
    at.switch_page(page)
    at.run()
    steps = [s for s in at.select_slider(key=key).options]
    picks = [int(s) for s in steps if "final" not in s][::4][:6]  # six steps across the run
    times = {"cold": [], "warm": []}
    for phase in ("cold", "warm"):
        for s in picks:
            at.select_slider(key=key).set_value(s)
            t0 = time.perf_counter()
            at.run()
            times[phase].append(time.perf_counter() - t0)
            assert not at.exception, at.exception
    return {"page": page, "steps": picks, **{f"{k}_median_s": round(statistics.median(v), 3) for k, v in times.items()},
            **{f"{k}_max_s": round(max(v), 3) for k, v in times.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [measure("app_pages/attention.py", "att_step"), measure("app_pages/circuits.py", "cir_step")]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print(f"{r['page']}: steps {r['steps']}: cold median {r['cold_median_s']} s (max {r['cold_max_s']}), "
                  f"warm median {r['warm_median_s']} s (max {r['warm_max_s']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
