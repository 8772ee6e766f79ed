"""The Laws page's question (core/quiz/laws.py): its answer agrees with the shipped tables read independently
(pandas medians, a run that never dropped ranked after every run that did), and its reason states those medians."""

import math

import numpy as np
import pandas as pd
import pytest

from core.laws import drop
from core.quiz import laws as quiz_laws
from core.quiz.questions import is_right


def medians(name: str) -> dict[float, float]:
    """The median drop step at each value of the law's setting, straight from the CSV (inf: censored)."""
    law = drop.LAWS[name]
    table = pd.read_csv(law.path, comment="#")
    out = {}
    for x, g in table.groupby(law.axis):
        steps = np.sort(g["drop_step"].fillna(np.inf).to_numpy())
        out[float(x)] = float(steps[len(steps) // 2])  # the tables hold an odd number of seeds a point
    return out


@pytest.mark.parametrize("name", list(drop.LAWS))
def test_the_answer_agrees_with_the_tables_medians(name):
    law = drop.LAWS[name]
    if not law.path.is_file():
        pytest.fail(f"{law.path} is missing")
    result = drop.read_law(law.path, law)
    q = quiz_laws.drop_direction(result)
    meds = medians(name)
    assert all(len(g) % 2 for _, g in pd.read_csv(law.path, comment="#").groupby(law.axis))
    first, last = meds[min(meds)], meds[max(meds)]
    symbol = law.axis_name.split()[-1]
    for x, m in ((min(meds), first), (max(meds), last)):
        said = "later than the cap" if math.isinf(m) else f"step {m:.0f}"
        assert f"{said} at {symbol} = {x:g}" in q.why
    assert q.answer in q.options and is_right(q, q.answer)
    if q.answer == quiz_laws.EARLIER:
        assert last < first  # fewer steps at the largest setting than at the smallest
    elif q.answer == quiz_laws.LATER:
        assert last > first
    # the slope's sign and the medians' change point the same way whenever the answer is a direction
    if q.answer != quiz_laws.NO_TREND:
        assert (result.fit.slope > 0) == (last > first)


def test_the_shipped_tables_ask_at_least_one_clear_direction_and_one_unclear():
    answers = {quiz_laws.drop_direction(drop.read_law(law.path, law)).answer for law in drop.LAWS.values()}
    assert quiz_laws.NO_TREND in answers and answers & {quiz_laws.EARLIER, quiz_laws.LATER}
