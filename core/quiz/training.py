"""Predict-then-reveal questions about a training run, answered from its logged history rows (the
same rows the Train page draws), so they work on any run; core.quiz.questions has the Question type and the
rules for a clear answer."""
from __future__ import annotations

import math

from core.quiz.questions import CLEAR_SCORE, Question, no_answer
from core.training.live import head_score_frame
from core.training.transition import describe_curve

TIMING_OPTIONS = ["before the loss starts to fall (still above 3 nats)", "while the loss falls (from 3 to 1 nat)",
                  "after the loss is below 1 nat"]


def prev_head_timing(history: list[dict] | None, vocab_size: int) -> Question:
    """When does a block-1 head first put at least CLEAR_SCORE of its attention on the previous
    position, against the drop of the later-copy loss (core.training.transition.describe_curve: the last
    logged step at or above HIGH, the first below LOW)? history: a run's logged rows."""
    prompt = "When does a block-1 head become a previous-token head, against the drop of the later-copy loss?"
    heads = head_score_frame(history)
    if heads.empty or heads["block"].max() < 2:
        return no_answer("q_timing", prompt, "This run has fewer than two blocks: no induction circuit forms, so there "
                                         "is no drop to time the previous-token head against.")
    curve = describe_curve([r["step"] for r in history], [r["loss_later_copies"] for r in history], vocab_size)
    prev = heads[(heads["block"] == 1) & (heads["score"] == "previous-token")].groupby("step")["value"].max()
    formed = prev[prev >= CLEAR_SCORE]
    if not curve["dropped"] or formed.empty:
        return no_answer("q_timing", prompt, "In this run the loss did not fall below 1 nat or no block-1 head reached "
                                         f"{CLEAR_SCORE:g} on the previous position: nothing to time.")
    step, lo, hi = int(formed.index[0]), curve["drop_start"], curve["drop_end"]
    answer = TIMING_OPTIONS[0] if step < lo else TIMING_OPTIONS[1] if step <= hi else TIMING_OPTIONS[2]
    return Question("q_timing", prompt, TIMING_OPTIONS, answer,
                    f"The best block-1 head first reaches {CLEAR_SCORE:g} on the previous position at step {step} "
                    f"({prev[step]:.2f}); the later-copy loss was last at or above 3 nats at step {lo} and first "
                    f"below 1 nat at step {hi} (logged every {_spacing(prev.index)} steps).")


def _spacing(steps) -> int:
    return int(steps[1] - steps[0]) if len(steps) > 1 else 0


FIRST_COPY_OPTIONS = ["it falls too", "it stays within 0.1 nats", "it rises"]


def first_copy_during_drop(history: list[dict] | None, vocab_size: int) -> Question:
    """How the first-copy loss moves across the drop (from its last step at or above 3 nats to its
    first below 1 nat): below -0.2 nats falls, within 0.1 stays, above +0.2 rises."""
    prompt = "While the later-copy loss drops, what does the loss on the first copy (which nothing can predict) do?"
    rows = {r["step"]: r for r in history or []}
    curve = describe_curve(list(rows), [r["loss_later_copies"] for r in rows.values()], vocab_size)
    if not curve["dropped"] or not all("loss_first_copy" in r for r in rows.values()):
        return no_answer("q_first", prompt, "The later-copy loss did not fall below 1 nat in this run: there is no "
                                        "drop to watch.")
    a, b = rows[curve["drop_start"]]["loss_first_copy"], rows[curve["drop_end"]]["loss_first_copy"]
    delta = b - a
    answer = (FIRST_COPY_OPTIONS[0] if delta <= -0.2 else FIRST_COPY_OPTIONS[1] if abs(delta) <= 0.1
              else FIRST_COPY_OPTIONS[2] if delta >= 0.2 else None)
    why = (f"From step {curve['drop_start']} to step {curve['drop_end']} the first-copy loss goes from {a:.2f} to "
           f"{b:.2f} nats ({delta:+.2f}); ln V is {math.log(vocab_size):.2f}.")
    if answer is None:
        return no_answer("q_first", prompt, why + " That is a small change either way: no clear answer.")
    return Question("q_first", prompt, FIRST_COPY_OPTIONS, answer, why)
