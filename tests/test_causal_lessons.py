"""The Causal page as a lesson (issue 58): what answers each question stays hidden until the student answers
or skips, a grade given stays when a setting changes afterwards, and the research extras (noising, metrics,
gradient estimates, the circuit) wait for the researcher view."""

import pytest

from core.quiz import causal as quiz_causal
from ui.model_keys import shipped_key

from helpers import TWO_BLOCK, open_app

PAGE = "app_pages/causal.py"


def quiz_radios(at) -> dict:
    return {r.key: r for r in at.radio if r.key and r.key.startswith("quiz_")}


def skip_all(at) -> None:
    """Press every Skip button of the page's questions, one run each (as a student would)."""
    while True:
        skips = [b for b in at.button if b.key and b.key.endswith("_skipbtn")]
        if not skips:
            return
        skips[0].click().run()
        assert not at.exception, [e.value for e in at.exception]


@pytest.fixture(scope="module", autouse=True)
def predict_first():
    """The questions as a student meets them: what answers each stays hidden until an answer (tests/conftest.py
    turns this off for the other page tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTENTION_LAB_PREDICT", "on")
        yield


@pytest.fixture(scope="module")
def page(predict_first):
    return open_app(PAGE, TWO_BLOCK, timeout=300)


@pytest.mark.app
def test_answers_stay_hidden_until_answered_then_a_right_answer_stays_right_when_the_corruption_changes(page):
    at = page
    assert not at.toggle(key="cz_advanced").value
    radios = quiz_radios(at)
    block_q = next(k for k in radios if k.startswith("quiz_q_patch_block"))
    unasked = len(at.get("vega_lite_chart"))
    assert unasked == 2  # the two position sweeps, which ask nothing: heads, paths and the lens wait
    assert any("Pick an answer to see every head's patch effect" in c.value for c in at.caption)
    # the right answer, from the same experiments the page drew (the shipped view)
    from ui import causal_sections
    from ui.state import ShippedModel

    entry = ShippedModel(TWO_BLOCK, "x")
    period = at.number_input(key="cz_period_" + shipped_key(TWO_BLOCK)).value
    res = causal_sections.task_experiments(entry, int(period), 0, "first-copy")
    q = quiz_causal.patched_heads(res.heads, res.gap)
    assert q.answer is not None and q.answer in radios[block_q].options
    radios[block_q].set_value(q.answer).run()
    assert at.success and at.success[0].value.startswith("Right.")
    assert len(at.get("vega_lite_chart")) == unasked + 1  # the head chart only: the others wait for theirs
    at.radio(key="cz_corruption").set_value("resample").run(timeout=300)
    assert not at.exception
    assert at.success and at.success[0].value.startswith("Right.")  # graded once, against the state asked in
    assert not any(e.value.startswith("Not quite") for e in at.error)
    at.radio(key="cz_corruption").set_value("first-copy").run()


@pytest.mark.app
def test_a_skip_reveals_and_the_research_extras_wait_for_the_researcher_view(page):
    at = page
    skip_all(at)
    assert len(at.get("vega_lite_chart")) == 1 + 2 + 4 + 3  # heads, the two sweeps, K/V paths, the lens
    md = " ".join(m.value for m in at.markdown)
    assert "GradDrop" not in md and "The circuit as a whole" not in " ".join(h.value for h in at.subheader)
    at.toggle(key="cz_advanced").set_value(True).run(timeout=300)
    assert not at.exception
    subheaders = " ".join(h.value for h in at.subheader)
    assert "The circuit as a whole" in subheaders and "Needed, or only enough?" in subheaders
    assert "GradDrop" in " ".join(m.value for m in at.markdown)
    at.toggle(key="cz_advanced").set_value(False).run()


def test_no_doc_paths_or_shell_commands_on_the_page():
    from pathlib import Path

    text = Path(__file__).resolve().parent.parent.joinpath(PAGE).read_text()
    for word in ("DESIGN.md", "README.md", "docs/", "python -m"):
        assert word not in text, word


def test_the_lesson_experiments_leave_out_only_the_researcher_views_parts():
    """core.causal.experiments with research=False (the page outside its researcher view): the noising sweep,
    attribution patching and the circuit are None, every other field is the same as with research=True."""
    import dataclasses

    import numpy as np
    import pandas as pd

    from core.causal import experiments
    from core.model.config import ModelConfig
    from core.model.task import TaskConfig
    from core.model.tinycharlm import TinyCharLM

    model = TinyCharLM(ModelConfig(n_layers=2, d_model=32, n_heads=2, vocab_size=16)).eval()
    task = TaskConfig(period_min=4, period_max=6, seq_len=16)
    full = experiments.task_experiments(model, task, 5, 4, 0)
    lesson = experiments.task_experiments(model, task, 5, 4, 0, research=False)
    left_out = {"resid_noise", "attribution", "circuit"}
    for f in dataclasses.fields(full):
        a, b = getattr(full, f.name), getattr(lesson, f.name)
        if f.name in left_out:
            assert a is not None and b is None, f.name
        elif isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b)
        elif isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        elif isinstance(a, float) and a != a:
            assert b != b
        elif isinstance(a, dict):
            assert a.keys() == b.keys()
        else:
            assert a == b, f.name
