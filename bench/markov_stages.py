"""The stages of the lab's Markov-chain runs (core.training.markov): steps and CPU-seconds to each stage.

    python bench/markov_stages.py [--preset markov-2block] [--seeds 0,1,2] [--steps N] [--json]

Trains the preset (2 blocks or 1 block on 3-state chains, Dirichlet 1, length 100) once per seed, a log
every 10 steps, on one torch thread, and reads the stages off the logged rows (core.training.markov.stages:
the first log from which a strategy is the nearest at two logs in a row; the untrained model's log counts
at once). CPU-seconds are this thread's (time.thread_time) from the first step to the log of the onset,
logging included: what the run costs a training worker. Prints one line a run and the medians.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from core.training.markov import MARKOV_PRESETS, stages  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402


def run(preset: str, seed: int, steps: int | None) -> dict:
    p = MARKOV_PRESETS[preset]
    train = dataclasses.replace(p.train, seed=seed, steps=steps or p.train.steps)
    trainer = Trainer(p.model, p.task, train)
    cpu = {0: 0.0}
    t0 = time.thread_time()
    while not trainer.done:
        trainer.run(train.log_every)
        cpu[trainer.step] = time.thread_time() - t0
    st = stages(trainer.history, p.task)
    return {"preset": preset, "seed": seed, "steps": trainer.step, "cpu_total": round(cpu[trainer.step], 2),
            "onset": st["onset"], "onset_cpu": {n: (round(cpu[s], 2) if s is not None else None)
                                                for n, s in st["onset"].items()},
            "closest_step": st["closest_step"],
            "final": {k: round(trainer.history[-1][k], 4) for k in trainer.history[-1] if k.startswith("kl_")
                      and k != "kl_positions"} | {"loss": round(trainer.history[-1]["loss"], 4),
                                                  "loss_optimal": round(trainer.history[-1]["loss_optimal"], 4)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="markov-2block", choices=list(MARKOV_PRESETS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = [run(args.preset, int(s), args.steps) for s in args.seeds.split(",")]
    if args.json:
        print(json.dumps({"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                          "runs": rows}, indent=1))
        return 0
    for r in rows:
        parts = [f"{n} {'-' if s is None else s} ({'-' if r['onset_cpu'][n] is None else r['onset_cpu'][n]} CPU-s)"
                 for n, s in r["onset"].items()]
        print(f"{r['preset']} seed {r['seed']}: " + ", ".join(parts) + f"; {r['steps']} steps {r['cpu_total']} CPU-s; "
              f"final KL {r['final']}")
    for name in rows[0]["onset"]:
        reached = [r for r in rows if r["onset"][name] is not None]
        if reached:
            print(f"{name}: reached in {len(reached)}/{len(rows)}, median step "
                  f"{statistics.median(r['onset'][name] for r in reached)}, median CPU-s "
                  f"{statistics.median(r['onset_cpu'][name] for r in reached)}")
        else:
            print(f"{name}: reached in 0/{len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
