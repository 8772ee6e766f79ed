"""Home caveats its attention-mass scores where the period-shift probe says the model copies
from a fixed distance back (core.reading.probes.fixed_distance_verdict): the shipped fixed-period model
scores as an induction model by attention mass but fails a quarter off its period; the 2-block model
looks the token up. The caveat's figures are the probe's, recomputed here."""
import pytest

from core.model.checkpoints import read_checkpoint
from core.reading import probes

from helpers import ROOT, open_app


def _verdict(name):
    model, info = read_checkpoint(ROOT / "checkpoints" / name)
    return model, info, probes.fixed_distance_verdict(model, info["task"])


def test_the_fixed_period_model_copies_from_a_fixed_distance_and_the_two_block_one_does_not():
    model, info, v = _verdict("fixed-period-1block-bias.pt")
    task = info["task"]
    assert v["fixed"] and v["trained"] == task.period_min and v["shifted"] < task.period_min
    again = probes.period_probe(model, task, v["shifted"], n_seqs=32)["metrics"]["acc_later_copies"]
    assert v["acc_shifted"] == pytest.approx(again) and v["acc_shifted"] < probes.FIXED_ACC
    assert not _verdict("variable-period-2block.pt")[2]["fixed"]


def test_a_model_without_heads_or_without_a_shorter_period_gets_no_verdict():
    model, info, _ = _verdict("zero-block.pt")
    assert probes.fixed_distance_verdict(model, info["task"]) is None


@pytest.mark.app
def test_home_shows_the_caveat_only_where_the_probe_says_so():
    at = open_app(None, "fixed-period-1block-bias.pt")
    said = [w.value for w in at.warning]
    _, _, v = _verdict("fixed-period-1block-bias.pt")
    assert any("copies from a fixed distance back" in w and f"{v['acc_shifted']:.2f} at period {v['shifted']}" in w
               for w in said), said
    at = open_app(None, "variable-period-2block.pt")
    assert not any("fixed distance" in w.value for w in at.warning)


def test_home_questions_say_what_the_probe_finds():
    """On the fixed-period model attention mass alone would answer Home's two questions "it looks the token up"
    and "4 or more" induction heads. The answers carry the probe's figures where it finds a fixed
    distance, and only there."""
    from core.quiz import questions as quiz
    from core.training.overview import model_overview

    for name, fixed in (("fixed-period-1block-bias.pt", True), ("variable-period-2block.pt", False)):
        model, info, v = _verdict(name)
        ov = model_overview(model, info["task"], n_seqs=16, seed=0)  # Home measures 64: the bands are nats apart
        lookup, count = quiz.later_vs_first(ov.metrics, v), quiz.induction_head_count(ov.heads, v)
        assert lookup.answer == quiz.LOOKUP_OPTIONS[0] and "looks the token up" not in lookup.answer
        words = f"{v['acc_trained']:.2f} at the training period {v['trained']} and {v['acc_shifted']:.2f} at period"
        assert (words in lookup.why) == fixed and (words in count.why) == fixed, (name, lookup.why, count.why)
        assert ("do not make a head an induction head" in count.why) == fixed
