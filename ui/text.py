"""Sentences the Train page shows, built from measured figures (the figures come from core)."""
from __future__ import annotations

import math

import pandas as pd

from core.training import transition
from core.training.live import drop_step, final_metrics


def duration(seconds: float) -> str:
    """'12 s' under two minutes, else '3.4 min'; '–' when unknown."""
    if not math.isfinite(seconds):
        return "–"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def progress_text(step: int, total: int, active: bool, rate: float, status: str, seconds: float) -> str:
    """'step s / n' and, while running, the speed and time left; once ended, how it ended."""
    text = f"step {step} / {total}"
    if status == "starting":  # the first Train press after a quiet spell also starts the worker server
        return text + " · starting its training process"
    if active and math.isfinite(rate) and rate > 0:
        return text + f" · {rate:.1f} steps/s · about {duration((total - step) / rate)} left"
    if not active:
        return text + f" · {status} after {duration(seconds)} of training"
    return text


def run_outcome(name: str, history: list[dict] | None, vocab_size: int) -> str:
    """One line on how a stored run ended: final later-copy loss and when (if) it fell below ln V / 2."""
    last = final_metrics(history)
    if "loss_later_copies" not in last:
        return f"{name}: no training history stored."
    drop = drop_step(history, vocab_size)
    when = f"below ln V / 2 from step {drop}" if drop is not None else "never below ln V / 2"
    return (f"{name}: later-copy loss {last['loss_later_copies']:.2f} nats after {last['step']} steps "
            f"({when}); first copy {last.get('loss_first_copy', math.nan):.2f}.")


def study_sentence(summary: pd.DataFrame, blocks: int) -> str | None:
    """One sentence on how often and when the drop happened for `blocks`-block runs, or None."""
    row = summary[summary["blocks"] == blocks]
    if row.empty:
        return None
    r = row.iloc[0]
    text = f"{blocks} block{'s' if blocks != 1 else ''}: {int(r['dropped'])} of {int(r['runs'])} seeds dropped"
    if r["dropped"]:
        text += (f" ({int(r['abrupt'])} abruptly), at a median step of {r['drop_step_median']:.0f} (range "
                 f"{r['drop_step_min']:.0f}–{r['drop_step_max']:.0f}); the fall took a median of "
                 f"{r['width_median']:.0f} steps")
    if blocks >= 2 and "sharp_prev_token" in r and r["sharp_prev_token"] == r["sharp_prev_token"]:
        text += (f". At the end, {int(r['sharp_prev_token'])} of {int(r['runs'])} had a block-1 head with a "
                 f"previous-token score of at least {transition.SHARP_PREV_TOKEN}, and {int(r['two_induction_heads'])} "
                 f"had two or more last-block heads with an induction score (after any earlier copy) of at least "
                 f"{transition.INDUCTION_HEAD}")
    return text + "."
