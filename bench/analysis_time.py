"""Analysis cost bench: how long a page's worth of analysis takes on a checkpoint once warm.

    python bench/analysis_time.py [FILE] [--repeats 5] [--threads N] [--json]

FILE defaults to checkpoints/variable-period-2block.pt (the default model). Each core.reading.analysis call the
Attention and Circuits pages make on a first visit (nothing cached yet) is run once to warm up
(imports, allocator, rotary tables), then `--repeats` times; the median is reported, and the calls of
one page are summed. The budget is 1 s per page. The machine is shared: the 1-minute load
average is printed beside the figures, and so is the process's CPU time, which with --threads 1 is
close to what the wall time would be on an idle machine. Read the figures, never assert them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.model.checkpoints import read_checkpoint  # noqa: E402
from core.model.task import DEFAULT_PERIOD  # noqa: E402
from core.reading import analysis  # noqa: E402

BUDGET_S = 1.0


def page_calls(model, task) -> dict[str, list[tuple[str, callable]]]:
    """The analysis calls behind each page's first render (default widget values)."""
    lo, hi = task.period_min, task.period_max
    period = (lo + hi) // 2
    layer, head = (0, min(1, model.cfg.n_heads - 1)) if model.cfg.n_layers else (0, 0)
    return {
        "attention": [
            ("task_sequence_view", lambda: analysis.task_sequence_view(model, task, period)),
            ("sweep_view", lambda: analysis.sweep_view(model, task)),
            ("probe_view", lambda: analysis.probe_view(model, task, min(DEFAULT_PERIOD, task.seq_len // 2))),
        ],
        "attention (typed text)": [
            ("text_view", lambda: analysis.text_view(model, "the cat sat. the cat sat. the cat sat.")),
        ],
        "circuits": [
            ("head_circuit_view", lambda: analysis.head_circuit_view(model, task, layer, head)),
            ("copying_table_view", lambda: analysis.copying_table_view(model)),
            ("composition_view", lambda: analysis.composition_view(model)),
            ("ablation_view", lambda: analysis.ablation_view(model, task, {})),
            ("ablation_grid_view", lambda: analysis.ablation_grid_view(model, task, "zero")),
        ],
        "circuits (ablate a head, mean mode)": [
            ("ablation_view", lambda: analysis.ablation_view(model, task, {"1.1": "mean"})),
            ("ablation_grid_view", lambda: analysis.ablation_grid_view(model, task, "mean")),
        ],
    }


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of this process) over `repeats` calls after a warm-up."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", nargs="?", default=str(ROOT / "checkpoints" / "variable-period-2block.pt"))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not Path(args.file).is_file():
        print(f"no checkpoint at {args.file}", file=sys.stderr)
        return 2
    model, info = read_checkpoint(args.file)
    if model.cfg.n_layers == 0:
        print("a zero-block model has no heads to analyse", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    rows = []
    for page, calls in page_calls(model, info["task"]).items():
        for name, fn in calls:
            wall, cpu = timed(fn, args.repeats)
            rows.append({"page": page, "call": name, "seconds": round(wall, 4), "cpu_seconds": round(cpu, 4)})
    totals, cpu_totals = {}, {}
    for r in rows:
        totals[r["page"]] = round(totals.get(r["page"], 0.0) + r["seconds"], 4)
        cpu_totals[r["page"]] = round(cpu_totals.get(r["page"], 0.0) + r["cpu_seconds"], 4)
    result = {"file": Path(args.file).name, "threads": torch.get_num_threads(), "repeats": args.repeats,
              "load_avg_1min": round(load, 2), "budget_s": BUDGET_S, "calls": rows,
              "pages": [{"page": k, "seconds": v, "cpu_seconds": cpu_totals[k], "within_budget": v <= BUDGET_S}
                        for k, v in totals.items()]}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{result['file']}: torch threads {result['threads']}, median of {args.repeats}, "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print(f"  {'page':<38} {'call':<20} {'wall':>8}    {'CPU':>8}")
    for r in rows:
        print(f"  {r['page']:<38} {r['call']:<20} {r['seconds'] * 1000:8.1f} ms {r['cpu_seconds'] * 1000:8.1f} ms")
    for pg in result["pages"]:
        flag = "ok" if pg["within_budget"] else "OVER"
        print(f"{pg['page']:<40} total {pg['seconds'] * 1000:8.1f} ms wall, {pg['cpu_seconds'] * 1000:8.1f} ms CPU "
              f"(budget {BUDGET_S * 1000:.0f} ms wall: {flag})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
