"""Experiments on the training itself: how far does the induction drop move? (core/training/interventions.py)

    python bench/training_experiments.py [--seeds 5] [--threads 1] [--json]

For each seed, the default 2-block run (preset variable-period-2block, 800 steps) and three changed
runs with the same seed: (a) the ordinary run's sharpest block-1 previous-token head (the head that
would become the previous-token head) held as a previous-token head from step 0; (b) that head knocked
out (W_O zero and frozen) for the whole run; (c) the plain initial embedding (embed_scale 1,
embed_shared 0). Runs at one torch thread by default (bit-reproducible). loss_later_copies is measured
on the fixed evaluation batch every 10 steps; drop_step is core.training.transition's (first step below
ln V / 2), drop_end the first step below 1 nat. A run stops 20 steps after drop_end.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from core.training.presets import get_preset  # noqa: E402
from core.training.trainer import Trainer, evaluate  # noqa: E402
from core.training.transition import LOW, describe_curve  # noqa: E402

EVERY = 10


def run(seed: int, **fields) -> dict:
    p = get_preset("variable-period-2block")
    trainer = Trainer(p.model, p.task, dataclasses.replace(p.train, seed=seed, log_every=10 ** 9, **fields))
    xs, ys, t0 = [0], [trainer.check_loss()], time.perf_counter()
    while not trainer.done:
        trainer.run(EVERY)
        xs.append(trainer.step)
        ys.append(trainer.check_loss())
        below = [s for s, l in zip(xs, ys) if l < LOW]
        if below and trainer.step >= below[0] + 20:
            break
    row = evaluate(trainer.model, trainer.eval_tokens, trainer.eval_periods)
    d = describe_curve(xs, ys)
    return {"seed": seed, "steps_run": xs[-1], "drop_step": d["drop_step"], "drop_end": d["drop_end"],
            "prev_token": row["prev_token"], "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for seed in range(args.seeds):
        base = run(seed)
        prev = base["prev_token"][0]
        knock = max(range(len(prev)), key=prev.__getitem__)
        runs = {"ordinary": base,
                f"(a) head 1.{knock + 1} held on the previous token": run(seed, hold=f"1.{knock + 1}"),
                f"(b) head 1.{knock + 1} knocked out": run(seed, knockout=f"1.{knock + 1}"),
                "(c) plain initial embedding": run(seed, embed_scale=1.0, embed_shared=0.0)}
        for name, r in runs.items():
            rows.append({"seed": seed, "run": name, "drop_step": r["drop_step"], "drop_end": r["drop_end"],
                         "steps_run": r["steps_run"], "seconds": r["seconds"]})
            print(f"seed {seed} {name}: drop_step {r['drop_step']} drop_end {r['drop_end']} "
                  f"({r['steps_run']} steps, {r['seconds']} s)", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print("| seed | run | drop step (below ln V / 2) | below 1 nat |\n|---|---|---|---|")
        for r in rows:
            fmt = lambda v: "none by 800" if v is None else str(v)  # noqa: E731
            print(f"| {r['seed']} | {r['run']} | {fmt(r['drop_step'])} | {fmt(r['drop_end'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
