"""Predict-then-reveal on the Laws of the drop page: does the drop come earlier or later as one setting grows?
Answered from a shipped sweep table's law (core.laws.drop.read_law): the direction is clear only when the 95%
interval of the fitted log-log slope lies on one side of 0, the criterion the page's own sentences use; the
reason gives the median drop steps at the ends of the sweep. core.quiz.questions has the Question type."""
from __future__ import annotations

import math

from core.laws.drop import LawResult
from core.laws.stats import num, signed
from core.quiz.questions import Question, no_answer

EARLIER, LATER, NO_TREND = "earlier", "later", "no clear change"
OPTIONS = [EARLIER, LATER, NO_TREND]


def trend(result: LawResult) -> str | None:
    """EARLIER or LATER when the slope's interval lies below or above 0, NO_TREND when it holds 0; None
    without a fit (fewer than two points with a median)."""
    fit = result.fit
    if fit is None:
        return None
    if fit.high < 0:
        return EARLIER
    if fit.low > 0:
        return LATER
    return NO_TREND


def _median(x: float) -> str:
    return "later than the cap" if not math.isfinite(x) else f"step {num(x)}"


def _ends(result: LawResult) -> str:
    """'the median drop step goes from step 190 at B = 8 to step 70 at B = 64'."""
    first, last = result.points[0], result.points[-1]
    symbol = result.law.axis_name.split()[-1]
    return (f"the median drop step goes from {_median(first.median)} at {symbol} = {num(first.x)} to "
            f"{_median(last.median)} at {symbol} = {num(last.x)}")


def _interval(result: LawResult) -> str:
    fit = result.fit
    lo = "open below" if not math.isfinite(fit.low) else signed(fit.low)
    hi = "open above" if not math.isfinite(fit.high) else signed(fit.high)
    return f"log-log slope {signed(fit.slope)}, 95% interval {lo} to {hi}"


def drop_direction(result: LawResult) -> Question:
    """As the law's setting grows over its table's values, does the drop come earlier, later, or no clearer?"""
    law, points = result.law, result.points
    symbol = law.axis_name.split()[-1]
    prompt = (f"Raise the {law.axis_name} from {num(points[0].x)} to {num(points[-1].x)}, everything else the same. "
              "Will the loss drop come earlier (in fewer steps), later, or with no clear change?")
    answer = trend(result)
    if answer is None:
        return no_answer("q_law_direction", prompt, "The table has too few points with a median drop step to fit a "
                                                    "slope: no clear answer.")
    fewest, most = min(p.n for p in points), max(p.n for p in points)
    seeds = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    why = {EARLIER: f"Fewer steps as {symbol} grows: ",
           LATER: f"More steps as {symbol} grows: ",
           NO_TREND: "The seeds scatter more than the trend: "}[answer]
    return Question("q_law_direction", prompt, OPTIONS, answer,
                    f"{why}{_ends(result)} ({seeds} seeds a point; {_interval(result)}"
                    + (", which holds 0)." if answer == NO_TREND else ", clear of 0)."))


def takeaway(result: LawResult) -> str | None:
    """One line for the top of a law's section: which way the drop moves, with the medians at the ends."""
    answer = trend(result)
    if answer is None:
        return None
    axis = result.law.axis_name
    if answer == NO_TREND:
        return f"No clear trend: {_ends(result)}, but the seeds scatter more than that across the {axis} tried."
    return f"The drop comes {answer} as the {axis} grows: {_ends(result)}."
