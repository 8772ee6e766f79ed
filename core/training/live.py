"""What the Train page's live charts read: logged history rows -> tidy frames, and the drop step.

A history row is what core.training.trainer logs (see core.training.trainer.evaluate): step, seconds, train_loss, the
copy metrics and each head's prev_token and induction score as [layer][head] lists. The rows come
from a run in a worker process (core.pool.runs) or from a checkpoint's stored history.
"""
from __future__ import annotations

import math

import pandas as pd

from core.model import drop
from core.model.symbols import head_label

PARTS = {"loss_first_copy": "first copy", "loss_later_copies": "later copies"}
ACCURACY = {"acc_second_copy": "second copy", "acc_later_copies": "later copies"}
HEAD_SCORES = {"prev_token": "previous-token", "induction": "induction"}


def _rows(history: list[dict] | None, names: dict[str, str], value: str, run: str) -> pd.DataFrame:
    out = []
    for row in history or []:
        for key, label in names.items():
            v = row.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.append({"step": row["step"], "seconds": row.get("seconds"), "part": label, value: float(v),
                            "run": run})
    return pd.DataFrame(out, columns=["step", "seconds", "part", value, "run"])


def loss_frame(history: list[dict] | None, run: str) -> pd.DataFrame:
    """Columns step, seconds, part ("first copy" | "later copies"), loss (nats), run."""
    return _rows(history, PARTS, "loss", run)


def accuracy_frame(history: list[dict] | None, run: str) -> pd.DataFrame:
    """Columns step, seconds, part ("second copy" | "later copies"), accuracy, run."""
    return _rows(history, ACCURACY, "accuracy", run)


def head_score_frame(history: list[dict] | None) -> pd.DataFrame:
    """Columns step, label, layer, head (0-based; label from core.model.symbols), score ("previous-token" |
    "induction"), value."""
    out = []
    for row in history or []:
        for key, label in HEAD_SCORES.items():
            for layer, heads in enumerate(row.get(key) or []):
                for head, v in enumerate(heads):
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        out.append({"step": row["step"], "label": head_label(layer, head), "layer": layer,
                                    "head": head, "score": label, "value": float(v)})
    return pd.DataFrame(out, columns=["step", "label", "layer", "head", "score", "value"])


def drop_step(history: list[dict] | None, vocab_size: int) -> int | None:
    """The drop step (core.model.drop) of a run's logged rows, or None."""
    rows = history or []
    return drop.drop_step([r["step"] for r in rows], [r.get("loss_later_copies") for r in rows], vocab_size)


def final_metrics(history: list[dict] | None) -> dict:
    """The last logged row's copy metrics (empty without history)."""
    if not history:
        return {}
    last = history[-1]
    return {k: last[k] for k in (*PARTS, *ACCURACY, "step", "seconds") if k in last}


