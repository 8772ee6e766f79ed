"""Do the Causal page's headline readings hold beyond one training seed?

    python bench/seed_readings.py [--seeds 0-4] [--steps 600] [--out checkpoints/laws/readings.csv]

Each seed trains the sweep's default point, core.sweeps.grid.sweep_run(steps=..., seed=...)
(the variable-period-2block preset; at one torch thread bit for bit the model behind the plain rows of
checkpoints/laws/clamps.csv and init.csv, whose run_id the row repeats), keeps the model in memory only, and
runs the Causal page's experiments on it as the page opens them: core.causal.experiments.task_experiments on
N_SEQS = 32 sequences of the task's middle period (the page's default), sample seed 0, the first-copy
corruption, no position sweeps. One row per seed:

- prev_head, prev_token: the block-1 head with the largest prev_token score on the fixed evaluation batch
  (core.training.trainer.evaluate), and that score; prev_clear: the score is at least LOOKS_BACK (0.5);
- prev_noise (low, high): noising that head's output (its corrupted output into the clean run) leaves this
  share of M (core.causal.noising; 95% interval over the sequences); prev_needed: clearly needed in
  core.causal.clarity's sense (a clear gap, and the interval's upper end below NEEDED, 0.9);
- key_sender: the block-1 head whose key path into all of block 2 is clearly the most needed
  (core.causal.readings.most_needed_key_path; "" when that is not clear); prev_key (low, high): noising
  the previous-token head's key path into block 2 leaves this share; key_is_prev: key_sender is prev_head;
- best_block: which block's best head, patched alone, restores most of M (core.quiz.causal.best_patched_block;
  "" when unclear); block2_best, block2_effect (low, high): block 2's best head and its patch effect;
  block2_sum: the block-2 heads' patch effects added up; induction_heads: block-2 heads with induction_any
  at least core.training.transition.INDUCTION_HEAD on the evaluation batch;
- gap: M(clean) - M(corrupted); drop_step: the run's drop step (core.model.drop.drop_step, every 10 steps).

The Laws page reads the table (core.laws.readings.readings_sentences): on how many seeds each reading holds and the
spread of its number. The table starts with '#' comment lines: the command that regenerates it.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from core.causal.clarity import NEEDED, clear_gap  # noqa: E402
from core.causal.experiments import task_experiments  # noqa: E402
from core.causal.readings import LOOKS_BACK, key_paths, most_needed_key_path  # noqa: E402
from core.model.drop import drop_step  # noqa: E402
from core.model.symbols import head_label  # noqa: E402
from core.model.task import TaskConfig  # noqa: E402
from core.model.tinycharlm import TinyCharLM  # noqa: E402
from core.pool.live_run import code_version  # noqa: E402
from core.quiz.causal import best_patched_block  # noqa: E402
from core.sweeps.grid import int_list, run_id, sweep_run  # noqa: E402
from core.sweeps.run import trained  # noqa: E402
from core.training.run_config import RunConfig  # noqa: E402
from core.training.trainer import eval_batch, evaluate  # noqa: E402
from core.training.transition import INDUCTION_HEAD  # noqa: E402

N_SEQS = 32  # as the Causal page (app_pages/causal.py)
SAMPLE_SEED = 0
DEFAULT_OUT = ROOT / "checkpoints" / "laws" / "readings.csv"
COLUMNS = ["seed", "run_id", "drop_step", "gap", "prev_head", "prev_token", "prev_clear", "prev_noise",
           "prev_noise_low", "prev_noise_high", "prev_needed", "key_sender", "prev_key", "prev_key_low",
           "prev_key_high", "key_is_prev", "best_block", "block2_best", "block2_effect", "block2_low", "block2_high",
           "block2_sum", "induction_heads", "code"]


def page_period(task: TaskConfig) -> int:
    """The period the Causal page opens with (its number input's default)."""
    return min(max(2, (task.period_min + task.period_max) // 2), task.seq_len // 2)


def readings(model: TinyCharLM, task: TaskConfig, n_seqs: int = N_SEQS) -> dict:
    """The Causal page's headline readings of one model (the columns above but seed, run_id, drop_step, code)."""
    model.eval()
    scores = evaluate(model, *eval_batch(task, model.cfg.vocab_size))
    prev = max(range(model.cfg.n_heads), key=lambda h: scores["prev_token"][0][h])
    prev_token = scores["prev_token"][0][prev]
    res = task_experiments(model, task, page_period(task), n_seqs, SAMPLE_SEED, positions=False)
    noise = res.noise[(res.noise["layer"] == 0) & (res.noise["head"] == prev)].iloc[0]
    keys = key_paths(res)
    key = keys[keys["sender"] == head_label(0, prev)].iloc[0]
    needed = most_needed_key_path(res)
    block2 = res.heads[res.heads["layer"] == 1]
    best2 = block2.loc[block2["patch_effect"].idxmax()]
    return {
        "gap": round(res.gap, 4), "prev_head": head_label(0, prev), "prev_token": round(prev_token, 4),
        "prev_clear": prev_token >= LOOKS_BACK,
        **{c: round(float(noise[n]), 4) for c, n in [("prev_noise", "noise_effect"), ("prev_noise_low", "noise_low"),
                                                     ("prev_noise_high", "noise_high")]},
        "prev_needed": clear_gap(res.gap) and bool(noise["noise_high"] < NEEDED),
        "key_sender": "" if needed is None else str(needed["sender"]),
        **{c: round(float(key[n]), 4) for c, n in [("prev_key", "patch_effect"), ("prev_key_low", "effect_low"),
                                                   ("prev_key_high", "effect_high")]},
        "key_is_prev": needed is not None and str(needed["sender"]) == head_label(0, prev),
        "best_block": best_patched_block(res.heads, res.gap).answer or "",
        "block2_best": str(best2["label"]),
        **{c: round(float(best2[n]), 4) for c, n in [("block2_effect", "patch_effect"), ("block2_low", "effect_low"),
                                                     ("block2_high", "effect_high")]},
        "block2_sum": round(float(block2["patch_effect"].sum()), 4),
        "induction_heads": sum(s >= INDUCTION_HEAD for s in scores["induction_any"][1]),
    }


def seed_row(spec: RunConfig) -> dict:
    """Train one spec (one torch thread) and read its final model."""
    trainer, xs, ys, _ = trained(spec)
    row = {"seed": spec.train.seed, "run_id": run_id(spec, code_version()),
           "drop_step": drop_step(xs, ys, spec.model.vocab_size), **readings(trainer.model, trainer.task_cfg),
           "code": code_version()}
    return {c: row[c] for c in COLUMNS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/seed_readings.py", description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0-4", help="training seeds, e.g. 0-4")
    ap.add_argument("--steps", type=int, default=600, help="training steps (the laws sweeps' 600)")
    ap.add_argument("--out", default=str(DEFAULT_OUT.relative_to(ROOT)), help="the table (CSV)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for seed in int_list(args.seeds):
        t0 = time.perf_counter()
        rows.append(seed_row(sweep_run(steps=args.steps, seed=seed)))
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s, {rows[-1]}", file=sys.stderr, flush=True)
    given = sys.argv[1:] if argv is None else argv
    command = "python bench/seed_readings.py " + " ".join(shlex.quote(a) for a in given)
    out = Path(args.out) if Path(args.out).is_absolute() else ROOT / args.out
    header = ["# The Causal page's headline readings on every training seed (bench/seed_readings.py defines the "
              "columns).", f"# command: {command.strip()}"]
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(header) + "\n" + pd.DataFrame(rows, columns=COLUMNS).to_csv(index=False))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
