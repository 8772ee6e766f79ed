"""Sweeps: a grid of trainings (core.sweeps.grid), run on local processes or on Ray, written to
one results table (CSV, one row per run), resumable. `python -m core.sweep` is its command line.

Each run trains its RunConfig (core.sweeps.grid.sweep_run) at `threads` torch threads (1 by default: every
core busy with its own run, and bit-identical results wherever it runs) and measures loss_later_copies on the fixed
evaluation batch at steps 0, every, 2*every, ..., steps. The columns:
- run_id (a hash of the settings, the seed and `code`: core.sweeps.grid.run_id), the settings
  (core.sweeps.grid.SETTINGS; a setting beyond those that the sweep varies gets a column of its own, last);
- steps_run (less than steps when the run stopped at stop_below), and the curve's figures as
  core.training.transition.describe_curve defines them: drop_step (THE drop step, core.model.drop.drop_step:
  the first measured step with loss_later_copies < ln V / 2; empty if it never fell that far), dropped,
  abrupt, drop_start, drop_end, width, plateau_loss, final_loss_later;
- completion_step: the first measured step with loss_later_copies < COMPLETE (0.5 nats: the copy is
  nearly learnt, whatever V); onset_step: the head-score onset, the first measured step from which block 1's
  best previous-token score (on the same evaluation batch) stays at or above core.training.onset.RISING
  to the end of the run (the circuit has started to form; an early flicker that falls back does not count);
  empty if it never did (or the model has no heads);
- end losses on the evaluation batch: loss_second_copy, acc_later_copies;
- head scores of the final model as it trained (a clamp applied; core.training.transition.head_figures):
  prev_token_block1, induction_heads, induction_any_max, induction_any_2nd;
- wall_s and cpu_s of the run (its process's CPU time), and code (core.pool.live_run.code_version).

    rows = sweep(runs, "out.csv", command="python -m core.sweep ...")            # local processes
    rows = sweep(runs, "out.csv", command=..., runner=RayRunner("auto"))         # Ray tasks

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from core.sweeps.grid import ADDED, SETTINGS, label, row_settings, run_id, sweep_run
from core.training.run_config import RunConfig
from core.training.threads import machine_cores
from core.training.transition import describe_curve, head_figures

if TYPE_CHECKING:

    from core.training.trainer import Trainer

CURVE = ["steps_run", "drop_step", "dropped", "abrupt", "drop_start", "drop_end", "width", "plateau_loss",
         "final_loss_later", "completion_step", "onset_step"]
ADDED_FIGURES = ["completion_step", "onset_step"]  # figures added after the first tables were written
COMPLETE = 0.5  # nats: below this later-copy loss the copy is nearly learnt (completion_step)
END = ["loss_second_copy", "acc_later_copies", "prev_token_block1", "induction_heads", "induction_any_max",
       "induction_any_2nd"]
TIMES = ["wall_s", "cpu_s"]  # the only columns that differ between two runs of one spec
COLUMNS = ["run_id", *SETTINGS, *CURVE, *END, *TIMES, "code"]


def first_below(steps: list[int], losses: list[float], level: float) -> int | None:
    """The first step whose loss is below `level`, or None."""
    return next((int(s) for s, v in zip(steps, losses) if v < level), None)


def onset_step(steps: list[int], scores: list[float | None], rising: float | None = None) -> int | None:
    """The first step from which every score (to the last) is at least `rising` (core.training.onset.RISING),
    or None: when the last score is below it, or there are no scores."""
    from core.training.onset import RISING

    rising = RISING if rising is None else rising
    if not scores or any(v is None for v in scores) or scores[-1] < rising:
        return None
    i = len(scores)
    while i > 0 and scores[i - 1] >= rising:
        i -= 1
    return int(steps[i])


def _prev_score(trainer: Trainer) -> float | None:
    """Block 1's best previous-token score on the evaluation batch (None without heads)."""
    scores = trainer.evaluate(trainer.eval_tokens, trainer.eval_periods)["prev_token"]
    return max(scores[0]) if scores and scores[0] else None


def trained(spec: RunConfig) -> tuple[Trainer, list[int], list[float], list[float | None]]:
    """Train `spec` (at the calling thread's torch threads): (trainer, steps, loss_later_copies at those steps,
    block 1's best previous-token score there), on the fixed evaluation batch every spec.every steps from 0,
    until spec.train.steps or the first loss below spec.stop_below. Measuring changes nothing in the training."""
    from core.training.trainer import Trainer

    trainer = Trainer(*spec.configs())
    xs, ys, prev = [0], [trainer.check_loss()], [_prev_score(trainer)]
    while not trainer.done and not ys[-1] < spec.stop_below:
        trainer.run(min(spec.every, spec.train.steps - trainer.step))
        xs.append(trainer.step)
        ys.append(trainer.check_loss())
        prev.append(_prev_score(trainer))
    return trainer, xs, ys, prev


def run_one(spec: RunConfig, threads: int = 1) -> dict:
    """Train `spec` at `threads` torch threads; its results row (COLUMNS, then any settings beyond SETTINGS)."""
    import torch

    from core.pool.live_run import code_version
    from core.training.heap import keep_freed_memory

    torch.set_num_threads(max(1, int(threads)))
    keep_freed_memory()  # a sweep's processes only train
    wall, cpu = time.perf_counter(), time.process_time()
    trainer, xs, ys, prev = trained(spec)
    end = trainer.evaluate(trainer.eval_tokens, trainer.eval_periods)  # a clamp, if any, applied
    code = code_version()
    settings = row_settings(spec)
    row = {"run_id": run_id(spec, code), **settings, "steps_run": xs[-1],
           **describe_curve(xs, ys, spec.model.vocab_size),
           "completion_step": first_below(xs, ys, COMPLETE), "onset_step": onset_step(xs, prev),
           "loss_second_copy": end["loss_second_copy"], "acc_later_copies": end["acc_later_copies"],
           **head_figures(end["prev_token"], end["induction_any"])}
    row.update(wall_s=round(time.perf_counter() - wall, 3), cpu_s=round(time.process_time() - cpu, 3), code=code)
    return {c: row[c] for c in COLUMNS + [k for k in settings if k not in SETTINGS]}


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


class LocalRunner:
    """Runs in `jobs` local processes (default: one per core), forkserver where there is one (torch and
    core loaded once), else spawn."""

    def __init__(self, jobs: int | None = None):
        self.jobs = max(1, jobs or machine_cores())

    def run(self, specs: list[RunConfig], threads: int):
        from core.pool.launch import main_script_hidden

        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["core.sweeps.run"])
        with ProcessPoolExecutor(min(self.jobs, len(specs)), mp_context=ctx, initializer=_one_thread) as pool:
            # the executor starts its processes inside submit(): with the main script hidden, a process
            # does not run the parent's script again (a Streamlit page, or dashboard.py after an AppTest)
            with main_script_hidden():
                futures = {pool.submit(run_one, spec, threads): spec for spec in specs}
            for future in as_completed(futures):
                yield futures[future], future.result()


class RayRunner:
    """Runs as Ray tasks (one CPU per torch thread) on the cluster at `address` (None: RAY_ADDRESS, else
    a new local cluster); core.pool.ray_backend.connect ships this checkout's code."""

    def __init__(self, address: str | None = None):
        self.address = address

    def run(self, specs: list[RunConfig], threads: int):
        from core.pool.ray_backend import connect

        ray = connect(self.address)
        task = ray.remote(num_cpus=max(1, int(threads)), max_retries=0)(run_one)
        pending = {task.remote(spec, threads): spec for spec in specs}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    yield pending.pop(ref), ray.get(ref)
        finally:
            for ref in pending:  # interrupted: nothing keeps running on the cluster
                ray.cancel(ref, force=True)


def read_table(path: str | Path) -> pd.DataFrame:
    """A results table (comment lines start with '#'); an empty frame with COLUMNS if there is none."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.read_csv(path, comment="#", dtype={"run_id": str, "code": str})
    for name, value in ADDED.items():  # a table written before the setting existed ran it at that value
        if name not in frame.columns:
            frame[name] = value
    for name in ADDED_FIGURES:  # a figure added after the table was written: not measured (NaN)
        if name not in frame.columns:
            frame[name] = math.nan
    if set(COLUMNS) <= set(frame.columns):
        frame = frame[COLUMNS + [c for c in frame.columns if c not in COLUMNS]]
    return frame


def write_table(path: str | Path, rows: list[dict], command: str) -> None:
    """All rows (sorted by settings and seed) under the header comments, written whole then renamed."""
    path = Path(path)
    extra = sorted({k for row in rows for k in row} - set(COLUMNS))  # settings beyond SETTINGS a sweep varied
    frame = pd.DataFrame(rows, columns=COLUMNS + extra).sort_values(SETTINGS, kind="stable")
    for name in extra:  # a run left at the sweep's default of a setting others vary: that default, written out
        frame[name] = [sweep_run(preset).get(name) if pd.isna(v) else v
                       for v, preset in zip(frame[name], frame["preset"])]
    header = ["# Sweep results: one row per run (core/sweeps/run.py defines every column).",
              f"# command: {command}",
              "# drop_step: the first measured step with loss_later_copies < ln V / 2 (core.model.drop.drop_step)."]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(header) + "\n" + frame.to_csv(index=False))
    os.replace(tmp, path)


def sweep(specs: list[RunConfig], out: str | Path, command: str, runner=None, threads: int = 1,
          progress=sys.stderr) -> list[dict]:
    """Run every spec whose run id is not yet in the table at `out`, writing the table after each run
    (an interrupted sweep keeps what it finished); progress with the time left on `progress`. Returns
    every row of the table."""
    from core.pool.live_run import code_version

    runner = runner or LocalRunner()
    code = code_version()
    old = read_table(out)
    rows = old.astype(object).where(old.notna(), None).to_dict("records")
    have = set(old["run_id"].astype(str))
    todo = [s for s in specs if run_id(s, code) not in have]
    _say(progress, f"{len(specs)} runs, {len(specs) - len(todo)} already in {out}, {len(todo)} to train")
    t0 = time.perf_counter()
    for n, (spec, row) in enumerate(runner.run(todo, threads) if todo else [], 1):
        rows.append(row)
        write_table(out, rows, command)
        elapsed = time.perf_counter() - t0
        left = elapsed / n * (len(todo) - n)
        _say(progress, f"{n}/{len(todo)} done, {_clock(elapsed)} elapsed, about {_clock(left)} left; "
                       f"{label(spec)}: drop_step {row['drop_step']}, {row['wall_s']:.1f} s")
    if not todo and not Path(out).exists():
        write_table(out, rows, command)
    return rows


def _clock(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _say(stream, text: str) -> None:
    if stream is not None:
        print(f"sweep: {text}", file=stream, flush=True)


_FLAGS = [  # flag, setting (RunConfig.of's name), parser, help
    ("--depth", "n_layers", "ints", "blocks, e.g. 1,2"),
    ("--period", "period", "periods", "period ranges min-max, e.g. 16-32,8-16"),
    ("--seq-len", "seq_len", "ints", "sequence lengths"),
    ("--vocab", "vocab_size", "ints", "vocabulary sizes"),
    ("--batch", "batch_size", "ints", "batch sizes"),
    ("--lr", "lr", "floats", "learning rates"),
    ("--warmup", "warmup_steps", "ints", "warm-up steps"),
    ("--decay-steps", "decay_steps", "ints", "steps at the end whose rate falls to a tenth (0: constant rate)"),
    ("--init", "init", "words", "initial embedding: shared, plain"),
    ("--hold", "hold", "words", "a block-1 head held on the previous token, e.g. 1.2, or none"),
    ("--clamp", "clamp", "words", "a block-2 head clamped to the ideal induction pattern, e.g. 2.1, or none"),
    ("--knockout", "knockout", "words", "a head knocked out, block.head counted from 1 (e.g. 2.1), or none"),
    ("--steps", "steps", "ints", "training steps"),
    ("--every", "every", "ints", "steps between later-copy loss measurements (default 10)"),
    ("--stop-below", "stop_below", "floats", "end a run at its first later-copy loss below this (nats; 0: never)"),
    ("--seeds", "seed", "ints", "seeds, e.g. 0-9 (default 0)"),
]


def grid_values(args) -> dict:
    """The grid's field -> values from parsed flags (and a --spec JSON file, which flags override)."""
    import json

    from core.sweeps.grid import int_list, period_list

    parse = {"ints": int_list, "periods": period_list, "words": lambda t: [w.strip() for w in t.split(",")],
             "floats": lambda t: [float(x) for x in t.split(",")]}
    values = json.loads(Path(args.spec).read_text()) if args.spec else {}
    for flag, name, kind, _ in _FLAGS:
        text = getattr(args, flag[2:].replace("-", "_"))
        if text is not None:
            values[name] = parse[kind](str(text))
    return values


def main(argv=None) -> int:
    import argparse
    import shlex

    from core.model.cli import UsageError
    from core.sweeps.grid import grid

    ap = argparse.ArgumentParser(prog="python -m core.sweep", description="Run a grid of trainings (every "
                                 "combination of the values given; the rest as the preset), resumably, into one CSV.")
    for flag, _, _, text in _FLAGS:
        ap.add_argument(flag, help=text)
    ap.add_argument("--spec", help="a JSON file {setting: [values]} (core.sweeps.grid.SETTINGS, or any model, task "
                                   "or TrainConfig field by its name); flags override it")
    ap.add_argument("--preset", default=None, help="the preset the other settings come from")
    ap.add_argument("--out", required=True, help="the results table (CSV); its finished runs are skipped")
    ap.add_argument("--jobs", type=int, default=0, help="local processes (default: one per core)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    ap.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="run as Ray tasks on the cluster at ADDRESS (none: RAY_ADDRESS, else a new local one)")
    args = ap.parse_args(argv)
    specs = grid(grid_values(args), **({"preset": args.preset} if args.preset else {}))
    if not specs:
        raise UsageError("the grid is empty.")
    runner = RayRunner(args.ray or None) if args.ray is not None else LocalRunner(args.jobs or None)
    command = "python -m core.sweep " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    sweep(specs, args.out, command.strip(), runner, args.threads)
    return 0
