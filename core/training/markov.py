"""Training on the Markov-chain task (core.model.markov): the lab's settings for it and the stages of a
run, read off its logged KL curves.

The settings are the lab's, not the paper's (docs/DESIGN.md "The Markov-chain task" sets them side by
side): a smaller TinyCharLM than the repeat task's (d_model 64, 2 heads a block; the vocabulary is the
states), the plain initial embedding (the enlarged one bets on a token from step 0, so the model would
not start at the uniform strategy), a log every 10 steps (the uniform stage lasts a few tens of steps)
and otherwise the repeat task's optimizer settings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from core.model.config import ModelConfig
from core.model.markov import MarkovTask, nearest_strategies
from core.training.config import TrainConfig

# The paper's settings as read from its public code (github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads:
# training_pipeline.py, datasets.py, utils.py) and a summary of its experiment section; the Train page shows them
# beside the lab's. Each entry: (the paper's setting, where it was read).
PAPER = {
    "states": ("3 in the authors' figures of a run (2 in the code's default run configuration)",
               "the authors' blog post's figures; training_pipeline.py: vocab_size = 2"),
    "prior": ("Dirichlet(1) per row (uniform over all rows)", "datasets.py: np.random.dirichlet(np.ones(k))"),
    "sequence length": ("100", "training_pipeline.py: block_size = 100"),
    "first token": ("drawn from the chain's stationary distribution", "datasets.py"),
    "model": ("2 attention-only layers, 1 head each, width 16, dropout 0.1", "training_pipeline.py"),
    "optimizer": ("AdamW, lr 3e-5 (the experiment section's figure), batch 64", "paper, experiment setup; code"),
    "strategies": ("add-one counts (Laplace), i.e. the Dirichlet(1) posterior mean", "utils.py: mean_alg, statistical"),
    "distance": ("cross-entropy of the model against each strategy, per position", "utils.py: compare_test"),
}

# Edelman et al.'s 3-state run as the authors show it in their blog post on the paper ("The Evolution of
# Statistical Induction Heads", 2024): one figure of the KL to each strategy over training (and one of the test
# loss), x = training sequences seen, shaded by the nearest strategy. Read off the figure by eye, so each number
# is "about"; the post and the paper text available here give no table of them.
PAPER_RUN = {
    "states": 3,
    "source": ("read by eye from the authors' figure of a 3-state run's KL to each strategy, in their blog post on "
               "the paper"),
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
        MarkovPreset("markov-2block", "Two blocks on 3-state Markov chains: uniform, then unigram, then bigram."),
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


def stages(history: list[dict] | None, task: MarkovTask, confirm: int = 2) -> dict:
    """The stages of a run from its logged rows (core.model.markov.nearest_strategies on the task's strategies),
    plus "seconds" {strategy: training seconds at the onset, or None}."""
    rows = history or []
    out = nearest_strategies(rows, task.strategies, confirm)
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


def beside_paper(history: list[dict] | None, task: MarkovTask, batch_size: int) -> tuple[list[dict], str]:
    """A run's stages and KLs beside PAPER_RUN's, in the paper's unit (training sequences seen = step x batch).

    Returns (rows, sentence): rows {"": what, "this run": ..., "Edelman et al. (2024)": ...} for the states, each
    stage's onset, the KL to each strategy where the run is closest to the unigram strategy (the paper's
    plateau; its step) and at its last log; the sentence says, computed, how far the two differ. Rows with a
    non-finite KL (a diverged run) are left out; a history without a finite row gives ([], "")."""
    rows_in = [r for r in history or [] if all(isinstance(r.get(f"kl_{n}"), (int, float))
                                               and math.isfinite(r[f"kl_{n}"]) for n in COMPARED)]
    if not rows_in:
        return [], ""
    paper = PAPER_RUN
    st_ = stages(rows_in, task)
    onset = {n: st_["onset"].get(n) for n in ("unigram", "bigram")}

    def seqs(step):
        return f"{step * batch_size:,} (step {step} x batch {batch_size})"

    def kls(row):
        return " / ".join(f"{row[f'kl_{n}']:.3f}" for n in COMPARED)

    at_unigram = next(r for r in rows_in if r["step"] == st_["closest_step"]["unigram"])
    last = rows_in[-1]
    rows = [{"": "states", "this run": str(task.n_states), "Edelman et al. (2024)": str(paper["states"])}]
    for name in ("unigram", "bigram"):
        rows.append({"": f"{name} stage from (training sequences)",
                     "this run": seqs(onset[name]) if onset[name] is not None else "not reached",
                     "Edelman et al. (2024)": f"about {paper['onset_sequences'][name]:,}"})
    rows.append({"": "KL to uniform / unigram / bigram, nearest to unigram",
                 "this run": f"{kls(at_unigram)} (step {at_unigram['step']})",
                 "Edelman et al. (2024)": "about " + " / ".join(f"{paper['unigram_stage_kl'][n]:.2f}"
                                                                for n in COMPARED)})
    rows.append({"": "KL to uniform / unigram / bigram, at the end",
                 "this run": f"{kls(last)} ({last['step'] * batch_size:,} sequences)",
                 "Edelman et al. (2024)": "about " + " / ".join(f"{paper['end_kl'][n]:g}" for n in COMPARED)
                 + f" ({paper['end_sequences']:,})"})
    b = onset["bigram"]
    if b is None:
        text = (f"This run never reached the bigram stage in {last['step'] * batch_size:,} training sequences (step "
                f"{last['step']} x batch {batch_size}); the paper's 3-state run reached it after about "
                f"{paper['onset_sequences']['bigram']:,}.")
    else:
        ratio = paper["onset_sequences"]["bigram"] / max(b * batch_size, 1)
        text = (f"This run reached the bigram stage after {b * batch_size:,} training sequences, "
                + (f"about {ratio:.0f} times fewer than" if ratio >= 1.5 else
                   f"about {1 / ratio:.0f} times more than" if ratio <= 1 / 1.5 else "about as many as")
                + f" the paper's 3-state run (about {paper['onset_sequences']['bigram']:,}), and ended "
                + f"{last['kl_bigram']:.3f} nats from the bigram strategy against the paper's about "
                + f"{paper['end_kl']['bigram']:g}.")
    if task.n_states != paper["states"]:
        text += f" It has {task.n_states} states, the paper's run {paper['states']}: the steps are not comparable."
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


MANIFEST = "checkpoints/markov/manifest.json"  # the shipped Markov-chain runs (outside the pages' checkpoints)


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
