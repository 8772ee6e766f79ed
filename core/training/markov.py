"""Training on the Markov-chain task (core.model.markov): the lab's settings for it and the stages of a
run, read off its logged KL curves.

The settings are the lab's, not the paper's (docs/DESIGN.md "The Markov-chain task" sets them side by
side): a smaller TinyCharLM than the repeat task's (d_model 64, 2 heads a block; the vocabulary is the
states), the plain initial embedding (the enlarged one bets on a token from step 0, so the model would
not start at the uniform strategy), a log every 10 steps (at 3 states the untrained model is nearest the
uniform strategy and the unigram one is nearest from step 10 to 30 on the ten seeds of checkpoints/laws/
markov.csv: the uniform stage is one to three logs, no plateau) and otherwise the repeat task's optimizer settings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from core.model.config import ModelConfig
from core.model.markov import MarkovTask, nearest_strategies
from core.training.config import TrainConfig

# The paper's settings as read from its public code (github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads:
# training_pipeline.py, datasets.py, utils.py, test_error.py, graphing_pipeline.py, mingpt/trainer.py) and a summary
# of its experiment section; the Train page shows them beside the lab's. Each entry: (the paper's setting, where it
# was read).
PAPER = {
    "states": ("3 in the authors' figures of a run and their mixture experiment (2 in the code's default run "
               "configuration)", "the authors' blog post's figures; plots.ipynb: vocab_size=3; training_pipeline.py: "
                                 "vocab_size = 2"),
    "prior": ("Dirichlet(1) per row (uniform over all rows)", "datasets.py: np.random.dirichlet(np.ones(k))"),
    "sequence length": ("100", "training_pipeline.py: block_size = 100"),
    "first token": ("drawn from the chain's stationary distribution", "datasets.py"),
    "model": ("2 attention-only layers, 1 head each, width 16, dropout 0.1", "training_pipeline.py"),
    "optimizer": ("AdamW, lr 3e-5 in the paper's text, 5e-4 in its code (not overridden by the runs read here), "
                  "batch 64", "paper, experiment setup; mingpt/trainer.py: learning_rate = 5e-4"),
    "strategies": ("add-one counts (Laplace), i.e. the Dirichlet(1) posterior mean", "utils.py: mean_alg, statistical"),
    "distance": ("KL(strategy ‖ model) at the last position of each sequence only",
                 "test_error.py: test_last_token; graphing_pipeline.py: similarity"),
}
PAPER_LR = {"the paper's text": 3e-5, "its code": 5e-4}

# Edelman et al.'s 3-state run as the authors show it in their blog post on the paper ("The Evolution of
# Statistical Induction Heads", 2024): one figure of the KL to each strategy over training, x = training sequences
# seen, shaded by the nearest strategy. Read off that figure by eye: an order-of-magnitude reference, not a
# measurement. Its measure is the authors' (PAPER["distance"]: the last position only), not the lab's position
# average; its settings are PAPER's (100 tokens, Dirichlet(1), batch 64, the paper's model and rate).
PAPER_RUN = {
    "states": 3,
    "seq_len": 100,
    "concentration": 1.0,
    "batch": 64,
    "source": ("an order-of-magnitude reference read by eye from the authors' figure of a 3-state run's KL to each "
               "strategy in their blog post on the paper, whose measure is KL(strategy ‖ model) at the last "
               "position"),
    "onset_sequences": {"unigram": 4_000, "bigram": 100_000},
    "unigram_stage_kl": {"uniform": 0.10, "unigram": 0.02, "bigram": 0.15},
    "end_sequences": 125_000,
    "end_kl": {"uniform": 0.23, "unigram": 0.15, "bigram": 0.025},
}
COMPARED = ("uniform", "unigram", "bigram")  # the paper's figure's strategies

MARKOV_MODEL = ModelConfig(vocab_size=3, d_model=64, n_heads=2, n_layers=2)
MARKOV_TASK = MarkovTask()
MARKOV_TRAIN = TrainConfig(steps=1000, log_every=10, embed_scale=1.0, embed_shared=0.0)


@dataclass(frozen=True)
class MarkovPreset:
    name: str
    blurb: str
    model: ModelConfig = field(default_factory=lambda: MARKOV_MODEL)
    task: MarkovTask = field(default_factory=lambda: MARKOV_TASK)
    train: TrainConfig = field(default_factory=lambda: MARKOV_TRAIN)


MARKOV_PRESETS: dict[str, MarkovPreset] = {
    p.name: p
    for p in [
        MarkovPreset("markov-2block", "Two blocks on 3-state Markov chains: nearest the uniform strategy at the "
                     "start, then the unigram one, then the bigram one."),
        MarkovPreset("markov-1block", "One block on 3-state Markov chains: it cannot find the tokens that "
                     "followed the current one, so it stops at the unigram strategy.",
                     model=replace(MARKOV_MODEL, n_layers=1)),
        MarkovPreset("markov-1block-smeared", "One block with smeared keys (Olsson et al. 2022): each head's key "
                     "mixes in the previous position's, so one block can match on the token before a key.",
                     model=replace(MARKOV_MODEL, n_layers=1, smeared_keys=True)),
    ]
}
DEFAULT_MARKOV = "markov-2block"


def model_for(task: MarkovTask, n_layers: int, bias: bool = False, smeared_keys: bool = False) -> ModelConfig:
    """The lab's model for a Markov task: its states are the vocabulary."""
    return replace(MARKOV_MODEL, vocab_size=task.n_states, n_layers=n_layers, bias=bias, smeared_keys=smeared_keys)


def stages(history: list[dict] | None, task: MarkovTask) -> dict:
    """The stages of a run from its logged rows (core.model.markov.nearest_strategies on the task's strategies),
    plus "seconds" {strategy: training seconds at the onset, or None}."""
    rows = history or []
    out = nearest_strategies(rows, task.strategies)
    at = {r["step"]: r.get("seconds") for r in rows}
    out["seconds"] = {n: (at.get(s) if s is not None else None) for n, s in out["onset"].items()}
    return out


def stage_sentence(history: list[dict] | None, task: MarkovTask) -> str:
    """One sentence naming each strategy's onset as measured (or that it was not reached)."""
    st = stages(history, task)
    parts = []
    for name in task.strategies:
        onset = st["onset"][name]
        parts.append(f"{name} from step {onset}" if onset is not None else f"{name} not reached")
    return "Nearest strategy: " + "; ".join(parts) + "."


def _stage_window(rows: list[dict], onset: dict) -> list[dict]:
    """The logs of the unigram stage: from its onset up to the bigram onset (or the end); [] if never reached."""
    u, b = onset.get("unigram"), onset.get("bigram")
    if u is None:
        return []
    return [r for r in rows if r["step"] >= u and (b is None or r["step"] < b)]


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _rate(x: float) -> str:
    """A learning rate as "3e-5"."""
    return f"{x:.0e}".replace("e-0", "e-").replace("e+0", "e")


def differences(task: MarkovTask, batch_size: int, lr: float | None = None) -> list[str]:
    """Every setting of a run that differs from PAPER_RUN's, in words (the model always does)."""
    out = []
    if task.n_states != PAPER_RUN["states"]:
        out.append(f"{task.n_states} states against {PAPER_RUN['states']}")
    if task.seq_len != PAPER_RUN["seq_len"]:
        out.append(f"sequences of {task.seq_len} tokens against {PAPER_RUN['seq_len']}")
    if task.concentration != PAPER_RUN["concentration"]:
        out.append(f"a Dirichlet({task.concentration:g}) prior against Dirichlet({PAPER_RUN['concentration']:g})")
    if getattr(task, "prior", "dirichlet") != "dirichlet" or getattr(task, "unigram_share", 0.0):
        out.append("other training chains than the Dirichlet prior's")
    if batch_size != PAPER_RUN["batch"]:
        out.append(f"batch {batch_size} against {PAPER_RUN['batch']}")
    rates = " and ".join(f"{_rate(v)} in {k}" for k, v in PAPER_LR.items())
    if lr is None:
        out.append(f"the lab's learning rate (the settings table) against {rates}")
    else:
        out.append(f"learning rate {_rate(lr)} against {rates} ("
                   + " and ".join(f"{lr / v:.0f} times" for v in PAPER_LR.values()) + ")")
    out.append("the lab's model (the settings table)")
    return out


SEEDS_TABLE = "checkpoints/laws/markov.csv"  # the Markov table (core.laws.markov): the 2-block preset over seeds


def seed_spread() -> dict | None:
    """The bigram onsets, in training sequences, of the Markov table's runs at PAPER_RUN's number of states and
    concentration (SEEDS_TABLE, read here as a CSV: core.laws.markov reads it with its checks), with PAPER_RUN's
    bigram onset over each: {"seqs": [...], "censored": n, "ratios": [...], "batch": B}; None without the table
    or such runs."""
    from pathlib import Path

    import pandas as pd

    path = Path(__file__).resolve().parents[2] / SEEDS_TABLE
    if not path.is_file():
        return None
    t = pd.read_csv(path, comment="#")
    if not {"n_states", "concentration", "bigram_step"} <= set(t.columns):
        return None
    runs = t[(t["n_states"] == PAPER_RUN["states"]) & (t["concentration"] == PAPER_RUN["concentration"])]
    if runs.empty:
        return None
    batch = MARKOV_TRAIN.batch_size
    seqs = sorted(int(s) * batch for s in runs["bigram_step"].dropna())
    return {"seqs": seqs, "censored": int(runs["bigram_step"].isna().sum()), "batch": batch,
            "ratios": [PAPER_RUN["onset_sequences"]["bigram"] / s for s in seqs if s > 0]}


def beside_paper(history: list[dict] | None, task: MarkovTask, batch_size: int, lr: float | None = None,
                 spread: dict | None | bool = True) -> tuple[list[dict], str]:
    """A run's stages and KLs beside PAPER_RUN's, in the paper's unit (training sequences seen = step x batch).

    Returns (rows, sentence): rows {"": what, "this run": ..., "Edelman et al. (2024)": ...} for the settings,
    each stage's onset, the KL to each strategy over the unigram stage (the median over its logs, a window: one log
    swings) and at the last log, each in the lab's measure (the mean over positions) and the paper's (the last
    position, from the logs that keep the KL by position); the sentence says, computed, how the run's bigram onset
    and the lab's seeds at 3 states (seed_spread; spread=True reads it, None or a dict gives it) stand to the
    paper's figure and every setting that differs (differences). Rows with a non-finite KL (a diverged run) are left
    out; a history without a finite row gives ([], "")."""
    rows_in = [r for r in history or [] if all(isinstance(r.get(f"kl_{n}"), (int, float))
                                               and math.isfinite(r[f"kl_{n}"]) for n in COMPARED)]
    if not rows_in:
        return [], ""
    paper = PAPER_RUN
    st_ = stages(rows_in, task)
    onset = {n: st_["onset"].get(n) for n in ("unigram", "bigram")}

    def seqs(step):
        return f"{step * batch_size:,} (step {step} x batch {batch_size})"

    def mean_kls(rs):
        return " / ".join(f"{_median([r[f'kl_{n}'] for r in rs]):.3f}" for n in COMPARED)

    def last_kls(rs, window=False):
        rs = [r for r in rs if isinstance(r.get("kl_positions"), dict)
              and all(r["kl_positions"].get(n) for n in COMPARED)]
        if not rs:
            return "not logged"
        kls = " / ".join(f"{_median([r['kl_positions'][n][-1] for r in rs]):.3f}" for n in COMPARED)
        return f"{kls} (median of the {len(rs)} logs of the stage that keep the KL by position)" if window else kls

    last = rows_in[-1]
    rows = [{"": "states, sequence length, prior, batch",
             "this run": f"{task.n_states}, {task.seq_len}, Dirichlet({task.concentration:g}), {batch_size}",
             "Edelman et al. (2024)": f"{paper['states']}, {paper['seq_len']}, "
                                      f"Dirichlet({paper['concentration']:g}), {paper['batch']}"}]
    for name in ("unigram", "bigram"):
        rows.append({"": f"{name} stage from (training sequences)",
                     "this run": seqs(onset[name]) if onset[name] is not None else "not reached",
                     "Edelman et al. (2024)": f"about {paper['onset_sequences'][name]:,} (read by eye)"})
    window = _stage_window(rows_in, onset)
    if window:
        where = f"median of {len(window)} logs, steps {window[0]['step']}-{window[-1]['step']}"
        rows.append({"": "KL to uniform / unigram / bigram over the unigram stage, mean over positions (the lab's)",
                     "this run": f"{mean_kls(window)} ({where})", "Edelman et al. (2024)": "not shown"})
        rows.append({"": "KL to uniform / unigram / bigram over the unigram stage, last position (the paper's)",
                     "this run": f"{last_kls(window, True)}",
                     "Edelman et al. (2024)": "about " + " / ".join(f"{paper['unigram_stage_kl'][n]:.2f}"
                                                                    for n in COMPARED) + " (read by eye)"})
    rows.append({"": "KL to uniform / unigram / bigram at the end, mean over positions (the lab's)",
                 "this run": f"{mean_kls([last])} ({last['step'] * batch_size:,} sequences)",
                 "Edelman et al. (2024)": "not shown"})
    rows.append({"": "KL to uniform / unigram / bigram at the end, last position (the paper's)",
                 "this run": f"{last_kls([last])} ({last['step'] * batch_size:,} sequences)",
                 "Edelman et al. (2024)": "about " + " / ".join(f"{paper['end_kl'][n]:g}" for n in COMPARED)
                 + f" ({paper['end_sequences']:,}, read by eye)"})
    b = onset["bigram"]
    ref = (f"the paper's figure shows about {paper['onset_sequences']['bigram']:,}, a reference for the order of "
           "magnitude read by eye")
    if b is None:
        text = (f"This run never reached the bigram stage in {last['step'] * batch_size:,} training sequences (step "
                f"{last['step']} x batch {batch_size}); {ref}.")
    else:
        text = f"This run reached the bigram stage after {b * batch_size:,} training sequences; {ref}."
    spread = seed_spread() if spread is True else spread
    if spread and spread["ratios"]:
        s, r = spread["seqs"], spread["ratios"]
        text += (f" The lab's {len(s) + spread['censored']} seeds at {paper['states']} states (checkpoints/laws/"
                 f"markov.csv, the 2-block preset at batch {spread['batch']}) reached it after {s[0]:,} to {s[-1]:,} "
                 f"sequences (median {_median(s):,.0f}), {min(r):.1f} to {max(r):.1f} times fewer than that figure "
                 f"(median {_median(r):.1f})"
                 + (f"; {spread['censored']} never reached it within the cap" if spread["censored"] else "") + ".")
    text += (" The settings differ in " + "; ".join(differences(task, batch_size, lr)) + ", so the counts of "
             "sequences compare orders of magnitude, not runs.")
    if isinstance(last.get("kl_positions"), dict) and last["kl_positions"].get("bigram"):
        text += (f" At its last log it is {last['kl_bigram']:.3f} nats from the bigram strategy averaged over "
                 f"positions and {last['kl_positions']['bigram'][-1]:.3f} at the last position (the paper's "
                 f"measure; its figure ends at about {paper['end_kl']['bigram']:g}).")
    return rows, text


def kl_frame(history: list[dict] | None, task: MarkovTask):
    """The Train page's KL curves: columns step, seconds, strategy, kl (nats), one row per logged row and strategy."""
    import pandas as pd

    out = []
    for row in history or []:
        for name in task.strategies:
            v = row.get(f"kl_{name}")
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.append({"step": row["step"], "seconds": row.get("seconds"), "strategy": name, "kl": float(v)})
    return pd.DataFrame(out, columns=["step", "seconds", "strategy", "kl"])


def stage_frame(history: list[dict] | None, task: MarkovTask):
    """The stages' onsets as measured (`stages`): columns step, strategy, label; only the strategies reached."""
    import pandas as pd

    onset = stages(history, task)["onset"]
    rows = [{"step": s, "strategy": n, "label": f"{n} from step {s}"} for n, s in onset.items() if s is not None]
    return pd.DataFrame(rows, columns=["step", "strategy", "label"])


def figures(history: list[dict] | None, task: MarkovTask) -> dict:
    """What a shipped Markov run's manifest row records of its history (and a test reproduces): the onsets,
    the steps where each strategy is closest, and the last log's KL to each strategy and losses."""
    st = stages(history, task)
    last = (history or [{}])[-1]
    return {"onset": st["onset"], "closest_step": st["closest_step"],
            "final": {k: round(last[k], 4) for k in ("loss", "loss_optimal", *(f"kl_{n}" for n in task.strategies))
                      if k in last}}


def train_preset(name: str, out, seed: int = 0, manifest=None):
    """Train MARKOV_PRESETS[name] (with `seed`) on one torch thread, write its checkpoint with snapshots to `out`
    and, with `manifest`, record {file, preset, seed, command, figures} there. Returns the Trainer."""
    import json
    from pathlib import Path

    import torch

    from core.model.checkpoints import save_checkpoint
    from core.training.trainer import Trainer

    p = MARKOV_PRESETS[name]
    torch.set_num_threads(1)
    train = replace(p.train, seed=seed)
    trainer = Trainer(p.model, p.task, train)
    trainer.run(train.steps)
    fields = trainer.checkpoint_fields()
    fields["train"]["preset"] = name
    save_checkpoint(trainer.model, out, **fields)
    if manifest is not None:
        path = Path(manifest)
        data = json.loads(path.read_text()) if path.is_file() else {"checkpoints": []}
        row = {"file": Path(out).name, "preset": name, "seed": seed,
               "command": f"python -m core.train --preset {name} --seed {seed} --out {out} "
                          f"--manifest {manifest}",
               "figures": figures(trainer.history, p.task)}
        data["checkpoints"] = sorted([r for r in data["checkpoints"] if r["file"] != row["file"]] + [row],
                                     key=lambda r: r["file"])
        data["note"] = ("Markov-chain runs (core.training.markov): onsets are the first logged steps from which "
                        "a strategy is the nearest (stages); final is the last log on the fixed evaluation batch.")
        path.write_text(json.dumps(data, indent=1) + "\n")
    return trainer
