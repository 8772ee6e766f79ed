"""Predict-then-reveal questions about a training run, answered from its logged history rows (the
same rows the Train page draws), so they work on any run; core.quiz.questions has the Question type and the
rules for a clear answer."""
from __future__ import annotations

import math

from core.quiz.questions import Question, no_answer
from core.reading import CLEAR_SCORE
from core.training.live import head_score_frame
from core.training.transition import describe_curve

TIMING_PROMPT = "When does a block-1 head become a previous-token head, against the drop of the later-copy loss?"
TIMING_OPTIONS = ["before the loss starts to fall (still above 3 nats)", "while the loss falls (from 3 to 1 nat)",
                  "after the loss is below 1 nat"]


def prev_head_timing(history: list[dict] | None, vocab_size: int) -> Question:
    """When does a block-1 head first put at least CLEAR_SCORE of its attention on the previous
    position, against the drop of the later-copy loss (core.training.transition.describe_curve: the last
    logged step at or above HIGH, the first below LOW)? history: a run's logged rows."""
    prompt = TIMING_PROMPT
    heads = head_score_frame(history)
    if heads.empty or heads["layer"].max() < 1:
        return no_answer("q_timing", prompt, "This run has fewer than two blocks: no induction circuit forms, so there "
                                         "is no drop to time the previous-token head against.")
    curve = describe_curve([r["step"] for r in history], [r["loss_later_copies"] for r in history], vocab_size)
    prev = heads[(heads["layer"] == 0) & (heads["score"] == "previous-token")].groupby("step")["value"].max()
    formed = prev[prev >= CLEAR_SCORE]
    if not curve["dropped"] or formed.empty:
        return no_answer("q_timing", prompt, "In this run the loss did not fall below 1 nat or no block-1 head reached "
                                         f"{CLEAR_SCORE:g} on the previous position: nothing to time.")
    steps = [int(r["step"]) for r in history]
    step, lo, hi = int(formed.index[0]), curve["drop_start"], curve["drop_end"]
    after_lo = min((s for s in steps if s > lo), default=lo)
    answer, also = timing_options(step, lo, after_lo, hi)
    spacing = _spacing(prev.index)
    why = (f"The best block-1 head first reaches {CLEAR_SCORE:g} on the previous position at step {step} "
           f"({prev[step]:.2f}); the later-copy loss was last at or above 3 nats at step {lo} and first below 1 nat at "
           f"step {hi} (logged every {spacing} steps). The rule: formed at a logged step where the loss is still at "
           "or above 3 nats (up to the drop's start) is before; after the start and before the first step below "
           "1 nat is while; from that step on is after.")
    if answer is None:
        return no_answer("q_timing", prompt, why + " The whole drop and the head's forming fall between the same "
                                                   "two logged steps: no clear answer.")
    if also:
        previous = max((s for s in steps if s < step), default=step)
        why += (f" Here both happened between the same two logged steps ({previous} and {step}), so the rows "
                f"cannot tell \"{answer}\" from \"{also}\": either counts.")
    why += (" An induction head's keys must read 'the token before me', which only a previous-token head writes, "
            "so the drop cannot come before that head has formed." if answer != TIMING_OPTIONS[2] else
            " Here the loss fell before the best block-1 head crossed the line: the circuit used a weaker "
            "previous-token signal first.")
    return Question("q_timing", prompt, TIMING_OPTIONS, answer, why, (also,) if also else ())


def timing_options(step: int, lo: int, after_lo: int, hi: int) -> tuple[str | None, str | None]:
    """(answer, another option that also counts or None) for a head first formed at logged step `step`,
    the drop's start `lo` (last row >= 3 nats; after_lo the next logged step) and end `hi` (first row
    < 1 nat). Rows at or before lo: before; between: while; at or after hi: after. A crossing at the first
    row after lo happened in (lo, after_lo], where the loss also left 3 nats: before or while both count;
    one at hi happened in the same interval as the loss falling below 1 nat: while or after both count.
    (None, None) when the whole drop lies in that one interval as well."""
    before, during, after = TIMING_OPTIONS
    if step <= lo:
        return before, None
    if step == after_lo == hi:
        return None, None
    if step == after_lo and step < hi:
        return during, before
    if step < hi:
        return during, None
    if step == hi:
        return after, during
    return after, None


def _spacing(steps) -> int:
    return int(steps[1] - steps[0]) if len(steps) > 1 else 0


FIRST_COPY_PROMPT = ("While the later-copy loss drops, what does the loss on the first copy (which nothing can "
                     "predict) do?")
FIRST_COPY_OPTIONS = ["it falls too", "it stays within 0.1 nats", "it rises"]


def first_copy_during_drop(history: list[dict] | None, vocab_size: int) -> Question:
    """How the first-copy loss moves across the drop (from its last step at or above 3 nats to its
    first below 1 nat): below -0.2 nats falls, within 0.1 stays, above +0.2 rises."""
    prompt = FIRST_COPY_PROMPT
    rows = {r["step"]: r for r in history or []}
    curve = describe_curve(list(rows), [r["loss_later_copies"] for r in rows.values()], vocab_size)
    if not curve["dropped"] or not all("loss_first_copy" in r for r in rows.values()):
        return no_answer("q_first", prompt, "The later-copy loss did not fall below 1 nat in this run: there is no "
                                        "drop to watch.")
    a, b = rows[curve["drop_start"]]["loss_first_copy"], rows[curve["drop_end"]]["loss_first_copy"]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (a, b)):
        return no_answer("q_first", prompt, "This run has no first-copy loss to follow (no target of its "
                                        "sequences sits in a first copy).")
    delta = b - a
    answer = (FIRST_COPY_OPTIONS[0] if delta <= -0.2 else FIRST_COPY_OPTIONS[1] if abs(delta) <= 0.1
              else FIRST_COPY_OPTIONS[2] if delta >= 0.2 else None)
    why = (f"From step {curve['drop_start']} to step {curve['drop_end']} the first-copy loss goes from {a:.2f} to "
           f"{b:.2f} nats ({delta:+.2f}); ln V is {math.log(vocab_size):.2f}.")
    if answer is None:
        return no_answer("q_first", prompt, why + " That is a small change either way: no clear answer.")
    why += {FIRST_COPY_OPTIONS[0]: " Something besides the look-up improved too, and it helps every target.",
            FIRST_COPY_OPTIONS[1]: " Nothing earlier predicts a first-copy token, so the new circuit cannot help "
                                   "there.",
            FIRST_COPY_OPTIONS[2]: " The new circuit bets on tokens seen earlier in the sequence; on a first copy "
                                   "those bets are usually wrong, so that loss pays a little."}[answer]
    return Question("q_first", prompt, FIRST_COPY_OPTIONS, answer, why)


# The questions the Train page asks before a run exists (ui.quiz.ask_before), in the page's order: (key, prompt,
# options), the key and prompt those of the Question first_copy_during_drop and prev_head_timing build from the
# finished run, which grades the answer recorded when Train was pressed.
BEFORE_TRAINING = [("q_first", FIRST_COPY_PROMPT, FIRST_COPY_OPTIONS), ("q_timing", TIMING_PROMPT, TIMING_OPTIONS)]
