"""How often and when does the abrupt later-copy drop happen? Many seeds, 1 and 2 blocks.

    python bench/transition_study.py [--seeds 12] [--blocks 1,2] [--steps N] [--every 10]
                                     [--out checkpoints/transition_study.csv] [--json]

Each run trains the default settings (the variable-period-2block preset's task and training; the
1-block runs change only the depth) for a fixed number of steps (--steps, default the preset's),
and measures loss_later_copies on the fixed evaluation batch every --every steps from step 0. The
curve is then described by core.training.transition.describe_curve, whose docstring defines the columns:
dropped (reached 1.0 nats), drop_start (last step at or above 3.0 nats before that), drop_end,
width = drop_end - drop_start, drop_step (first step below ln V / 2), abrupt (width at most half of
drop_start), plateau_loss and final_loss_later; and, on the final model, prev_token_block1 (block 1's
sharpest previous-token head), induction_heads (last-block heads with induction_any >= 0.6) and
induction_any_max / induction_any_2nd (the two largest last-block induction_any scores). All steps
are multiples of --every, so each figure is known to within --every steps.

The CSV starts with '#' comment lines: the definitions and the command that regenerates it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from core.model.drop import HIGH, LOW  # noqa: E402
from core.training.presets import DEFAULT_PRESET, get_preset  # noqa: E402
from core.training.trainer import Trainer, evaluate  # noqa: E402
from core.training.transition import COLUMNS, HEAD_COLUMNS, STUDY_FILE, describe_curve, head_figures, summarize  # noqa: E402

PRESET = DEFAULT_PRESET


def curve(blocks: int, seed: int, steps: int, every: int) -> tuple[list[int], list[float], dict]:
    """loss_later_copies on the fixed evaluation batch at steps 0, every, 2*every, ..., steps, and the
    final head figures (core.training.transition.head_figures)."""
    p = get_preset(PRESET)
    model = dataclasses.replace(p.model, n_layers=blocks)
    train = dataclasses.replace(p.train, seed=seed, steps=steps, log_every=10 ** 9)
    trainer = Trainer(model, p.task, train)
    xs, ys = [0], [trainer.check_loss()]
    while not trainer.done:
        trainer.run(every)
        xs.append(trainer.step)
        ys.append(trainer.check_loss())
    row = evaluate(trainer.model, trainer.eval_tokens, trainer.eval_periods)
    return xs, ys, head_figures(row["prev_token"], row["induction_any"])


def _run(job: tuple[int, int, int, int, int]) -> dict:
    blocks, seed, steps, every, threads = job
    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    xs, ys, heads = curve(blocks, seed, steps, every)
    row = {"blocks": blocks, "seed": seed, "steps_run": xs[-1], **describe_curve(xs, ys), **heads}
    print(f"{blocks} block(s) seed {seed}: dropped={row['dropped']} abrupt={row['abrupt']} "
          f"drop_step={row['drop_step']} width={row['width']} final={row['final_loss_later']:.3f} "
          f"prev_token_block1={row['prev_token_block1']} induction_heads={row['induction_heads']} "
          f"induction_any_max={row['induction_any_max']} "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=12, help="seeds 0..N-1 per depth (default 12)")
    ap.add_argument("--blocks", default="1,2", help="comma-separated depths (default 1,2)")
    ap.add_argument("--steps", type=int, default=0, help="steps per run (default: the preset's)")
    ap.add_argument("--every", type=int, default=10, help="steps between loss measurements")
    ap.add_argument("--threads", type=int, default=0, help="torch threads per run (0: torch's default)")
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel processes (each then uses 1 thread)")
    ap.add_argument("--out", default=str(STUDY_FILE.relative_to(ROOT)))
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    steps = args.steps or get_preset(PRESET).train.steps
    blocks = [int(b) for b in args.blocks.split(",")]
    threads = args.threads or (1 if args.jobs > 1 else 0)
    jobs = [(b, seed, steps, args.every, threads) for seed in range(args.seeds) for b in sorted(blocks, reverse=True)]
    command = "python bench/transition_study.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    out = ROOT / args.out if not Path(args.out).is_absolute() else Path(args.out)
    header = [
        "# Induction transition study: one row per training run (core/training/transition.py defines every column).",
        f"# command: {command.strip()}",
        f"# settings: preset {PRESET} (depth varied), {steps} steps, "
        f"loss_later_copies measured every {args.every} steps "
        f"on the fixed evaluation batch; HIGH={HIGH} LOW={LOW} nats; training {get_preset(PRESET).train.to_dict()}.",
    ]
    rows = []

    def write() -> pd.DataFrame:  # after every finished run, so an interrupted study keeps what it measured
        frame = pd.DataFrame(sorted(rows, key=lambda r: (r["blocks"], r["seed"])), columns=COLUMNS + HEAD_COLUMNS)
        frame["plateau_loss"] = frame["plateau_loss"].astype(float).round(3)
        frame["final_loss_later"] = frame["final_loss_later"].astype(float).round(3)
        out.write_text("\n".join(header) + "\n" + frame.to_csv(index=False))
        return frame

    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(args.jobs) as pool:
            for row in pool.imap_unordered(_run, jobs):
                rows.append(row)
                frame = write()
    else:
        for job in jobs:
            rows.append(_run(job))
            frame = write()
    summary = summarize(frame)
    if args.json:
        print(json.dumps({"command": command, "runs": rows, "summary": summary.to_dict("records")}, indent=1))
    else:
        print(summary.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
