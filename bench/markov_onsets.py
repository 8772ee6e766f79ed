"""The Laws page's Markov-chain table (checkpoints/laws/markov.csv): the stage onsets over seeds against one
setting of the task, the Dirichlet concentration or the number of states.

    python bench/markov_onsets.py --setting concentration --values 0.3,1,3 --seeds 0-9 --out checkpoints/laws/markov.csv
    python bench/markov_onsets.py --setting prior --values dirichlet,doubly_stochastic,doubly_stochastic+0.25 \
        --seeds 0-9 --steps 2000 --out checkpoints/laws/markov_prior.csv

Each run is the 2-block Markov preset (core.training.markov: model_for the task, MARKOV_TRAIN) with the one
setting changed and the seed, trained on one torch thread, a log every 10 steps, until its bigram onset is
confirmed (core.training.markov.stages: the first log from which the bigram strategy is the nearest at two
logs in a row) or the cap `--steps`. Training is deterministic and chunking does not change it, so a run
stopped there has the onsets the full run would have. Columns: the setting's columns (n_states,
concentration, seq_len, n_layers), seed, steps (the cap), steps_run, unigram_step and bigram_step (empty:
not reached within steps_run; a run stopped at its bigram onset that was never nearest to the unigram
strategy before it skipped that stage), kl_uniform, kl_unigram, kl_bigram (the last log's), cpu_s (this
process's CPU-seconds for the run, time.process_time) and cpu (the CPU kind). Prints one line a run.

`--setting prior` trains on another prior of the 3-state task (core.model.markov: "dirichlet",
"doubly_stochastic", and either followed by "+s" for a share s of every batch's sequences on unigram-optimal
chains); every run is still evaluated on the Dirichlet prior's batch. Its table has three more columns: prior,
unigram_share, and bigram_seqs, the bigram onset in sequences seen that are not unigram-optimal (bigram_step x
batch x (1 - unigram_share), exact since every batch holds the same number of them: the x axis of Edelman et
al. 2024, on which the unigram-optimal sequences come free).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import platform
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

N_LAYERS = 2  # the markov-2block preset's depth (a column of the table)
COLUMNS = ["n_states", "concentration", "seq_len", "n_layers", "seed", "steps", "steps_run", "unigram_step",
           "bigram_step", "kl_uniform", "kl_unigram", "kl_bigram", "cpu_s", "cpu"]
PRIOR_COLUMNS = [*COLUMNS[:4], "prior", "unigram_share", *COLUMNS[4:9], "bigram_seqs", *COLUMNS[9:]]
SETTINGS = ("concentration", "n_states", "prior")


def prior_of(value: str) -> tuple[str, float]:
    """"doubly_stochastic+0.25" -> ("doubly_stochastic", 0.25); "dirichlet" -> ("dirichlet", 0.0)."""
    prior, _, share = value.partition("+")
    return prior, float(share or 0.0)


def cpu_kind() -> str:
    """The CPU's model name and whether it has AVX-512 (from /proc/cpuinfo), else the platform's word."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{name or platform.machine()} ({vector})"


def run(setting: str, value: float | str, seed: int, steps: int) -> dict:
    """One run: the 2-block preset with `setting` = value (a prior: prior_of's spelling), trained until its bigram
    onset is confirmed."""
    import torch

    from core.model.markov import MarkovTask, kept_sequences
    from core.training.markov import MARKOV_TASK, MARKOV_TRAIN, model_for, stages
    from core.training.trainer import Trainer

    if setting == "prior":
        prior, share = prior_of(str(value))
        task = dataclasses.replace(MARKOV_TASK, prior=prior, unigram_share=share).validate()
    else:
        kind = {"concentration": float, "n_states": int}[setting]
        task = dataclasses.replace(MARKOV_TASK, **{setting: kind(float(value))}).validate()
    assert isinstance(task, MarkovTask)
    train = dataclasses.replace(MARKOV_TRAIN, seed=seed, steps=steps)
    torch.set_num_threads(1)
    t0 = time.process_time()
    trainer = Trainer(model_for(task, N_LAYERS), task, train)
    while not trainer.done:
        trainer.run(train.log_every)
        onset = stages(trainer.history, task)["onset"]["bigram"]
        if onset is not None and trainer.history[-1]["step"] > onset:  # confirmed: two logs from the onset on
            break
    st = stages(trainer.history, task)["onset"]
    last = trainer.history[-1]
    extra = {}
    if setting == "prior":
        kept = kept_sequences(task.unigram_share, train.batch_size)
        extra = {"prior": task.prior, "unigram_share": task.unigram_share,
                 "bigram_seqs": None if st["bigram"] is None else st["bigram"] * kept}
    return {**extra, "n_states": task.n_states, "concentration": task.concentration, "seq_len": task.seq_len,
            "n_layers": N_LAYERS, "seed": seed, "steps": steps, "steps_run": trainer.step,
            "unigram_step": st["unigram"], "bigram_step": st["bigram"],
            **{f"kl_{n}": round(last[f"kl_{n}"], 5) for n in ("uniform", "unigram", "bigram")},
            "cpu_s": round(time.process_time() - t0, 2), "cpu": cpu_kind()}


def seeds_of(text: str) -> list[int]:
    """"0-9" or "0,1,2" (or both, "0-3,7") -> the seeds."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", choices=SETTINGS, required=True)
    ap.add_argument("--values", required=True, help="comma-separated values of the setting")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--steps", type=int, default=1000,
                    help="the cap: a run that has no bigram onset by then is censored")
    ap.add_argument("--out", help="the CSV to write (with its command in the header); without it, print only")
    args = ap.parse_args(argv)
    rows = []
    for value in args.values.split(","):
        for seed in seeds_of(args.seeds):
            r = run(args.setting, value if args.setting == "prior" else float(value), seed, args.steps)
            rows.append(r)
            print(f"{args.setting} {value} seed {seed}: unigram {r['unigram_step']}, bigram {r['bigram_step']} "
                  f"({r['steps_run']} steps, {r['cpu_s']} CPU-s)", flush=True)
    print(f"{len(rows)} runs, {sum(r['cpu_s'] for r in rows):.1f} CPU-s on {cpu_kind()}")
    if args.out:
        argv_shown = ["python", "bench/markov_onsets.py", *(sys.argv[1:] if argv is None else argv)]
        with open(args.out, "w", newline="") as f:
            f.write("# Markov-chain stage onsets: one row per run (bench/markov_onsets.py defines every column).\n")
            f.write(f"# command: {shlex.join(argv_shown)}\n")
            w = csv.DictWriter(f, PRIOR_COLUMNS if args.setting == "prior" else COLUMNS)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
