"""The causal analyses' cost before and after a change to the forwards they run, in the same run.

    python bench/causal_time.py [--before REV] [--rounds 5] [--seqs 32] [--threads 1] [--json]

Extracts core/ as it was at REV (default: a565317, the last commit whose forwards were written by hand,
before TinyCharLM.run_with_hooks) into a temporary folder and times each analysis below on the shipped
default model (checkpoints/variable-period-2block.pt, the same task sequences and corruption) once with
that code and once with today's, in alternating rounds of child processes (one per side and round, so
each side imports only its own core), at one thread: CPU milliseconds, median over the rounds, and the
ratio after / before. The analyses agree between the two to float32 tolerance (tests/test_patching.py,
test_paths.py); this times them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import matmul_rate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "a565317"  # the last commit with the hand-written forwards (before the intervention point)

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
from core.model.checkpoints import read_checkpoint
from core.causal import noising, patching, path_patching, logit_lens
from core.reading import ablation
model, info = read_checkpoint(sys.argv[3])
model.eval()
runs = patching.task_runs(model, info["task"], int(sys.argv[2]), seed=0)
tokens, periods = runs.clean, runs.periods
calls = {
    "prepare (both runs cached)": lambda: patching.task_runs(model, info["task"], int(sys.argv[2]), seed=0),
    "head_patch_effects": lambda: patching.head_patch_effects(model, runs),
    "head_position_effects": lambda: patching.head_position_effects(model, runs),
    "resid_patch_effects": lambda: patching.resid_patch_effects(model, runs),
    "patch_heads (2 heads)": lambda: patching.patch_heads(model, runs, [(0, 1), (1, 2)]),
    "path_patch_table": lambda: path_patching.path_patch_table(model, runs),
    "head_noise_effects": lambda: noising.head_noise_effects(model, runs),
    "attribution_head_positions": lambda: noising.attribution_head_positions(model, runs),
    "ablation_table (mean)": lambda: ablation.ablation_table(model, tokens, periods, "mean"),
    "logit lens": lambda: logit_lens.lens(model, tokens),
}
out = {}
for name, call in calls.items():
    call()
    t0 = time.process_time()
    call()
    out[name] = (time.process_time() - t0) * 1e3
print(json.dumps(out))
"""



def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seqs", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    old = Path(tempfile.mkdtemp())
    archive = subprocess.run(["git", "archive", args.before, "core"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    file = str(ROOT / "checkpoints" / "variable-period-2block.pt")
    roots = {"before": str(old), "after": str(ROOT)}
    times: dict[str, dict[str, list[float]]] = {k: {} for k in roots}
    rate = [matmul_rate()]
    for r in range(args.rounds):
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            res = subprocess.run([sys.executable, "-c", CHILD, str(args.threads), str(args.seqs), file],
                                 cwd=roots[side], check=True, capture_output=True, text=True,
                                 env={"PYTHONPATH": roots[side], "PATH": "/usr/bin:/bin"})
            for name, ms in json.loads(res.stdout).items():
                times[side].setdefault(name, []).append(ms)
    rate.append(matmul_rate())
    rows = {name: {side: round(statistics.median(times[side][name]), 1) for side in roots}
            for name in times["after"]}
    for row in rows.values():
        row["ratio"] = round(row["after"] / row["before"], 3) if row["before"] else None
    out = {"before": args.before, "seqs": args.seqs, "threads": args.threads,
           "matmul_gflops": [round(x, 1) for x in rate], "analyses": rows}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.seqs} sequences, {args.threads} thread(s), one-thread matmul {rate[0]:.1f} GFLOP/s at the start, "
              f"{rate[1]:.1f} at the end; CPU ms, median of {args.rounds}")
        for name, row in rows.items():
            print(f"{name:30s} before {row['before']:9.1f}  after {row['after']:9.1f}  ratio {row['ratio']}")
    return out


if __name__ == "__main__":
    main()
