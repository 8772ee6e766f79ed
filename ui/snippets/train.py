"""Snippets of the Train page and the run timeline (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.fill import Code
from ui.snippets.load import snippet


def _training_run(FIELDS, STEPS):
    """FIELDS: the run's settings (RunConfig.changes) as keyword arguments."""
    from core.model.checkpoints import read_checkpoint
    from core.pool.worker import final_checkpoint
    from core.training import live
    from core.training.run_config import RunConfig
    from core.training.trainer import Trainer

    settings = RunConfig.of(FIELDS)
    trainer = Trainer(*settings.configs())  # raises ValueError saying what to change if the settings cannot train
    trainer.run(STEPS)
    model, info = read_checkpoint(final_checkpoint(trainer))  # the model the page keeps
    history = info["history"]  # one row per logged step, measured on a fixed evaluation batch
    print(live.final_metrics(history))
    print("drop step:", live.drop_step(history, model.cfg.vocab_size))
    return {"final": [live.final_metrics(history)[k] for k in ("loss_later_copies", "acc_later_copies")]}


def training_run(settings, steps_done: int) -> Snippet:
    """The live run trained again in this interpreter, with the worker process's own calls."""
    fields = Code(", ".join(f"{k}={v!r}" for k, v in settings.changes().items()))
    return snippet(f"This run, trained again from the same seed: the calls the worker process makes, up to step "
                   f"{steps_done}, then the checkpoint it hands back (a different number of CPU threads can move the "
                   "last digits).", None, _training_run, FIELDS=fields, STEPS=steps_done)


def _shipped_curves(FILES):
    import pandas as pd

    from core.model.checkpoints import read_checkpoint
    from core.training import live

    frames = []
    for file in FILES:
        model, info = read_checkpoint("checkpoints/" + file)
        history = info["history"]  # one row per logged step, measured on a fixed evaluation batch
        frames.append(live.loss_frame(history, file))
        print(file, "drop step:", live.drop_step(history, model.cfg.vocab_size), live.final_metrics(history))
    curves = pd.concat(frames)  # step, part (first copy | later copies), loss, run
    return {"loss": curves["loss"]}


def shipped_curves(files: list[str]) -> Snippet:
    return snippet("The training curves stored in the shipped checkpoints, and where each one dropped.", None,
                   _shipped_curves, FILES=list(files))


def _head_scores(model, info):
    from core.training import live

    heads = live.head_score_frame(info["history"])  # step, label, layer, head, score, value
    print(heads.pivot_table(index="step", columns=["score", "label"], values="value").round(2))
    print("drop step:", live.drop_step(info["history"], model.cfg.vocab_size))
    return {"value": heads["value"]}


def head_scores_over_training(entry) -> Snippet:
    return snippet("Every head's previous-token and induction score at every logged step of the run.", entry,
                   _head_scores)


def _timeline(model, info):
    from core.training.timeline import timeline

    t = timeline(model, info)  # measured on the run's fixed evaluation batch
    print("steps:", t["steps"])
    print("later-copy loss:", [round(x, 3) for x in t["loss_later"]])
    print(f"ICL score (loss at position {t['late']} minus at {t['early']}):", [round(x, 3) for x in t["icl"]])
    print("film strip steps:", t["frames"], "heads (block, head from 0):", t["heads"])
    return {"loss": t["loss_later"], "icl": t["icl"], "frames": t["frames"]}


def run_timeline(entry) -> Snippet:
    return snippet("The run's timeline from its snapshots: later-copy loss and in-context-learning score at every "
                   "snapshot, and the film strip's steps and heads.", entry, _timeline)


def _transition_study():
    from core.training import transition

    study = transition.shipped_study()  # None when the study file is not installed
    print(study["summary"].to_string(index=False))
    print(study["runs"].to_string(index=False))
    return {"drop": study["runs"]["drop_step"]}


def transition_study() -> Snippet:
    return snippet("The shipped transition study: one row per seed, and the summary per depth.", None,
                   _transition_study)
