"""Sweep throughput: local processes against Ray tasks, in runs per minute, with the matmul rate beside it.

    python bench/sweep_throughput.py [--runs 4] [--steps 140] [--rounds 2] [--json]

Each round trains the same `--runs` sweep runs (the default 2-block settings, `--steps` steps each,
seeds 0..runs-1, one torch thread each; at 140 steps a run costs about 10.5 CPU-seconds here) into a
fresh table, once through core.sweeps.run's LocalRunner (one process per core) and once through its
RayRunner, alternating local and Ray round by round so both see the same load. The Ray cluster is a
local one started here (ray.init in a temporary directory, token authentication on), once, before the
first round; its start-up is reported apart from the rounds. Reported:
- runs per minute per backend (runs / the round's wall time, median over rounds), and Ray's overhead
  (local rate / Ray rate - 1), with the run's median wall and CPU seconds;
- Ray's pitfalls for many small jobs (its own issues name them): the cluster's start, the first
  task's latency (a worker process starting) against a warm one; the memory (RSS) of the idle
  workers left after the rounds and of Ray's daemons; OMP_NUM_THREADS and torch's thread count as a
  task sees them before run_one sets one thread;
- the one-thread 1024² float32 matmul rate before and after, and the load average (`uptime`).
The tables of the two backends are also compared (all columns but wall_s and cpu_s): they must agree.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from machine import matmul_rate  # noqa: E402

from core.sweeps.grid import grid  # noqa: E402
from core.sweeps.run import TIMES, LocalRunner, RayRunner, read_table, sweep  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ray_processes() -> dict[str, list[float]]:
    """RSS (MB) of this machine's Ray processes by kind: idle workers (kept after their tasks, torch
    loaded), busy workers, the node's agents and daemons (gcs, raylet, monitors)."""
    out: dict[str, list[float]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "ray" not in cmd:
                continue
            kind = ("idle worker" if cmd.startswith("ray::IDLE")
                    else "agent" if cmd.startswith("ray::") and "Agent" in cmd
                    else "busy worker" if cmd.startswith("ray::")
                    else "daemon" if "/ray/" in cmd and "sweep_throughput" not in cmd else None)
            if kind:
                out.setdefault(kind, []).append(round(rss_mb(int(d.name)), 1))
        except OSError:
            continue
    return out


def task_threads() -> dict:
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "torch_threads": torch.get_num_threads()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=140)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    specs = grid({"steps": [args.steps], "seed": list(range(args.runs))})
    result = {"runs": args.runs, "steps": args.steps, "matmul_before": round(matmul_rate(), 1), "load_before": load()}

    tmp = tempfile.mkdtemp(prefix="alsweep-", dir="/tmp")
    token = Path(tmp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), RAY_USAGE_STATS_ENABLED="0")
    import ray

    from core.pool.ray_backend import CORE_DIR

    t = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _temp_dir=f"{tmp}/t", log_to_driver=False,
             runtime_env={"py_modules": [str(CORE_DIR)], "env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}})
    result["ray_start_s"] = round(time.perf_counter() - t, 2)
    probe = ray.remote(num_cpus=1)(task_threads)
    t = time.perf_counter()
    result["task_sees"] = ray.get(probe.remote())
    result["first_task_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    ray.get(probe.remote())
    result["warm_task_s"] = round(time.perf_counter() - t, 3)

    rates: dict[str, list[float]] = {"local": [], "ray": []}
    tables, per_run = {}, {"local": [], "ray": []}
    try:
        for r in range(args.rounds):
            for name, runner in (("local", LocalRunner()), ("ray", RayRunner())):
                out = Path(tmp) / f"{name}-{r}.csv"
                t = time.perf_counter()
                sweep(specs, out, "bench", runner, progress=None)
                wall = time.perf_counter() - t
                rates[name].append(args.runs / wall * 60)
                tables[name] = read_table(out)
                per_run[name] += list(zip(tables[name]["wall_s"], tables[name]["cpu_s"]))
                print(f"round {r + 1} {name}: {args.runs} runs in {wall:.1f} s = {rates[name][-1]:.2f} runs/min "
                      f"(load {load()})", file=sys.stderr, flush=True)
        result["idle_rss_mb"] = ray_processes()
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    same = [t.drop(columns=list(TIMES)).sort_values("run_id").reset_index(drop=True) for t in tables.values()]
    result["tables_equal"] = bool(same[0].equals(same[1]))
    for name in rates:
        result[name] = {"runs_per_min": round(statistics.median(rates[name]), 2),
                        "rounds": [round(x, 2) for x in rates[name]],
                        "run_wall_s": round(statistics.median(w for w, _ in per_run[name]), 1),
                        "run_cpu_s": round(statistics.median(c for _, c in per_run[name]), 1)}
    result["ray_overhead"] = round(result["local"]["runs_per_min"] / result["ray"]["runs_per_min"] - 1, 3)
    result["matmul_after"], result["load_after"] = round(matmul_rate(), 1), load()
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
