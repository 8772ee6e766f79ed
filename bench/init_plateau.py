"""What the enlarged initial embedding does to the plateau and to the previous-token head.

    python bench/init_plateau.py [--seeds 3] [--steps 1200] [--every 10] [--jobs 2] [--json]

For each seed, trains the default 2-block settings twice: with the default initial embedding
(TrainConfig.embed_scale = 3, embed_shared = 3) and with the plain one (1, 0). Every --every steps
it measures, on the fixed evaluation batch, loss_later_copies and block 1's largest prev_token score.
Per run it reports drop_start and drop_step (core.training.transition.describe_curve: the last step at or
above 3 nats before the loss first falls below 1 nat; the first step below ln V / 2), and the first
steps at which block 1's best prev_token reaches 0.2 and 0.5. A run stops 50 steps after its drop
ends or at --steps (the learning rate decays over the last 300 of --steps, so runs of different
--steps differ after the plateau, never before it).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from core.training.presets import get_preset  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402
from core.training.transition import LOW, describe_curve  # noqa: E402

INITS = {"default (x3, shared 3)": (3.0, 3.0), "plain (x1, shared 0)": (1.0, 0.0)}


def run(job: tuple) -> dict:
    init, seed, steps, every = job
    torch.set_num_threads(1)
    scale, shared = INITS[init]
    p = get_preset("variable-period-2block")
    train = dataclasses.replace(p.train, seed=seed, steps=steps, log_every=every, embed_scale=scale,
                                embed_shared=shared)
    t = Trainer(p.model, p.task, train)
    end = None
    while not t.done and (end is None or t.step < end + 50):
        t.run(every)
        if end is None and t.history[-1]["loss_later_copies"] < LOW:
            end = t.step
    steps_, losses = [r["step"] for r in t.history], [r["loss_later_copies"] for r in t.history]
    prev = [max(r["prev_token"][0]) for r in t.history]
    first = lambda x: next((s for s, v in zip(steps_, prev) if v >= x), None)  # noqa: E731
    d = describe_curve(steps_, losses)
    return {"init": init, "seed": seed, "drop_start": d["drop_start"], "drop_step": d["drop_step"],
            "drop_end": d["drop_end"], "prev_token_0.2": first(0.2), "prev_token_0.5": first(0.5),
            "prev_token_block1": [round(v, 3) for v in prev], "steps": steps_}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    jobs = [(init, seed, args.steps, args.every) for seed in range(args.seeds) for init in INITS]
    if args.jobs > 1:
        import multiprocessing as mp
        with mp.get_context("spawn").Pool(args.jobs) as pool:
            rows = pool.map(run, jobs)
    else:
        rows = [run(j) for j in jobs]
    for r in rows:
        print(f"{r['init']:>24} seed {r['seed']}: drop_start {r['drop_start']} drop_step {r['drop_step']} "
              f"drop_end {r['drop_end']}; block-1 prev_token >= 0.2 at {r['prev_token_0.2']}, >= 0.5 at "
              f"{r['prev_token_0.5']}", file=sys.stderr)
    summary = {}
    for init in INITS:
        mine = [r for r in rows if r["init"] == init and r["drop_start"] is not None]
        summary[init] = {k: statistics.median(r[k] for r in mine) if mine and all(r[k] is not None for r in mine)
                         else None for k in ("drop_start", "drop_step", "prev_token_0.5")}
        summary[init]["dropped"] = f"{len(mine)} of {sum(r['init'] == init for r in rows)}"
    print(json.dumps({"runs": rows, "summary": summary}) if args.json else json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
