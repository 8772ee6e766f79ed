"""The shipped laws tables' sentences where a verdict rests on censored runs or on an interval that holds 0,
recomputed here from the CSVs: an open end and what it rests on (the drop laws), the paired length slope (the
Markov table), the onset against targets per step (the constant-rate table)."""
import math

import numpy as np
import pandas as pd
import pytest

from core.laws.drop import LAWS, MUSAT, read_law, sentences
from core.laws.stats import LAWS_DIR, placed_fit


def _shipped(name):
    path = LAWS_DIR / f"{name}.csv"
    if not path.is_file():
        pytest.skip(f"checkpoints/laws/{name}.csv is not shipped")
    return path


@pytest.mark.parametrize("name", ["context", "seqlen"])
def test_a_shipped_musat_verdict_says_what_its_open_end_rests_on(name):
    """Each context table has one run that never dropped (N = 144, seed 2): kept, it opens the interval's upper end,
    so +2.00 cannot be ruled out; placed at the cap the upper end is below +2.00, and the sentence gives the step
    before which the run would have to drop for the interval to leave +2.00 out."""
    law = LAWS[name]
    result = read_law(_shipped(name), law)
    t = pd.read_csv(law.path, comment="#")
    never = t[t["drop_step"].isna()]
    wide = t.pivot(index="seed", columns=law.axis, values="drop_step").astype(float).fillna(math.inf)
    idx = np.random.default_rng(0).integers(0, len(wide), (1000, len(wide)))
    censored = int(np.isinf(np.median(wide.to_numpy()[idx], axis=1)).any(axis=1).sum())
    fit = result.fit
    assert fit.censored == censored and fit.resamples == 1000
    said = sentences(result)
    musat = next(s for s in said if s.startswith(MUSAT.source))
    if censored <= 25:
        assert fit.high < math.inf and "open end" not in musat
        return
    assert fit.high == math.inf
    cap = int(t["steps"].max())
    at_cap = placed_fit(result.points, cap)
    assert f"95% interval {'+' if fit.low >= 0 else '−'}{abs(fit.low):.2f} to +inf" in " ".join(said)
    assert f"{censored} of them met a censored median" in " ".join(said)
    assert "These runs cannot rule it out, nor confirm it: +2.00 is inside the interval only through its open end" \
        in musat
    seeds = "; ".join(f"{law.axis_name.split()[-1]} = {r[law.axis]:g}, seed {r['seed']}" for _, r in never.iterrows())
    assert f"that never dropped ({seeds})" in musat
    assert f"to {'+' if at_cap.high >= 0 else '−'}{abs(at_cap.high):.2f} at step {cap} (the cap)" in musat
    assert at_cap.high < MUSAT.slope
    # the crossing step: just before it the interval leaves +2.00 out, just after it holds it
    step = int(musat.split("only if the run drops before about step ")[1].split(",")[0])
    assert placed_fit(result.points, step - 20).high < MUSAT.slope <= placed_fit(result.points, step + 20).high


def test_the_shipped_markov_length_slope_is_resampled_paired():
    """The unigram stage's length leaves out the runs that skipped the stage, so its points hold different seeds;
    it is still resampled with the seeds drawn together (a seed a point lacks left out there)."""
    from core.laws.markov import fits, length_points, markov_sentences, read_markov
    from core.laws.stats import paired

    _shipped("markov")
    mt = read_markov()
    points = length_points(mt)
    fit = fits(mt)["length"]
    assert fit.paired and fit.resamples == 1000
    said = " ".join(markov_sentences(mt))
    how = ("the same seeds resampled together at every point" if paired(points) else
           "the seeds resampled together at every point, a seed a point lacks left out there")
    assert "The unigram stage's length has the log-log slope " in said
    assert how in said.split("The unigram stage's length")[1]


def test_the_shipped_onset_against_targets_per_step_says_what_its_interval_allows():
    from core.laws.stages import stage_fits, stage_sentences, targets_table

    _shipped("targets")
    table = targets_table()
    fits = stage_fits(table)
    said = stage_sentences(table)
    for stage, name in (("onset_step", "head-score onset"), ("drop_step", "drop (ln V / 2)")):
        pooled = fits[("targets", stage)]
        sentence = next(s for s in said if s.startswith(f"Against the later-copy targets per step, the {name}'s"))
        holds = pooled.low <= 0 <= pooled.high
        assert ('cannot tell "what counts is how many targets a step holds" from "only the steps count"'
                in sentence) == holds
        assert ("as far as they show, what counts is how many targets a step holds" in sentence) == (not holds)
