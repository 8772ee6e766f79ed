"""The Causal experiments page through AppTest: every shipped checkpoint renders it (with what is
meaningful for zero and one block said on the page), its numbers are core's, and nonsense corruption
choices get a message.

The page on the shipped 2-block file is drawn once for the module (`two_block_page`): each test that
uses it starts from the page at its defaults and leaves it there (the paths-over-training click, which
stays on, comes last)."""

import pytest
from streamlit.testing.v1 import AppTest

from ui.model_keys import shipped_key
from ui.share import SEQ_MODES

from helpers import ROOT, SHIPPED, TWO_BLOCK, open_app

PAGE = "app_pages/causal.py"



def skip_all(at: AppTest) -> None:
    """Press every question's Skip button (one run each), as tests/test_causal_lessons.py does."""
    while skips := [b for b in at.button if b.key and b.key.endswith("_skipbtn")]:
        skips[0].click().run()
        assert not at.exception, [e.value for e in at.exception]


def open_on(file: str) -> AppTest:
    """The page on `file` as a researcher sees it: every question skipped, the researcher view on."""
    at = open_app(PAGE, file)
    at.toggle(key="cz_advanced").set_value(True).run()
    skip_all(at)
    return at


def texts(at, kind: str) -> str:
    return " ".join(x.value for x in getattr(at, kind))


TASK_SOURCE = SEQ_MODES["causal"]["task"]


@pytest.fixture(scope="module")
def two_block_page():
    return open_on(TWO_BLOCK)


def at_defaults(at: AppTest) -> AppTest:
    """The shared page as a test expects to find it: the task's sequences, first-copy corruption."""
    assert at.radio(key="cz_source").value == TASK_SOURCE and at.radio(key="cz_corruption").value == "first-copy"
    assert not at.exception and at.session_state["picked_model"] == shipped_key(TWO_BLOCK)
    return at


@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_page_on_every_shipped_checkpoint(file, request):
    at = at_defaults(request.getfixturevalue("two_block_page")) if file == TWO_BLOCK else open_on(file)
    metrics = {m.label: float(m.value) for m in at.metric}
    charts = len(at.get("vega_lite_chart"))
    if "zero-block" in file:
        assert "no attention blocks" in texts(at, "info")
        assert metrics["M(clean)"] == metrics["M(corrupted)"]  # the context cannot matter
        assert charts == 3  # the logit lens grid and its two by-copy charts
        return
    assert metrics["M(clean)"] > metrics["M(corrupted)"]
    md = texts(at, "markdown")
    assert "every head at once gives 1.000" in md and ("block 1 gives 1.000" in md or "block 2 gives 1.000" in md)
    if "1block" in file:
        assert "no such pair" in texts(at, "info")
        assert charts == 4 + 3  # heads, stream (denoising, noising), heads by position; the lens
    else:
        # first-copy corruption: the query rows cannot test anything, so they are hidden and said to be
        assert not at.warning and "Rows this corruption cannot test: query rows of 1.1, 1.2, 1.3, 1.4" in texts(
            at, "info")
        assert charts == 4 + 3 + 4  # heads, stream x2, heads by position; K/V x noising/denoising; the lens
        assert "The match uses more than the one previous token: head 1.2 puts 0.92" in md
        at.radio(key="cz_corruption").set_value("resample").run(timeout=180)
        assert "Every row is testable with this corruption" in texts(at, "caption")
        assert len(at.get("vega_lite_chart")) == 4 + 3 + 6
        at.radio(key="cz_corruption").set_value("first-copy").run()
        assert len(at.get("vega_lite_chart")) == charts


@pytest.mark.app
def test_page_numbers_are_core_numbers(two_block_page):
    from core.causal import experiments as causal
    from core.model.checkpoints import read_checkpoint

    at = at_defaults(two_block_page)
    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    period = at.number_input(key="cz_period_" + shipped_key(TWO_BLOCK)).value
    res = causal.task_experiments(model, info["task"], period, 32, 0, positions=False)  # M needs no sweeps
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["M(clean)"] == f"{res.m_clean:.3f}" and metrics["M(corrupted)"] == f"{res.m_corrupted:.3f}"


@pytest.mark.app
def test_nonsense_corruptions_get_a_message(two_block_page):
    at = at_defaults(two_block_page)
    charts = len(at.get("vega_lite_chart"))
    box = at.number_input(key="cz_period_" + shipped_key(TWO_BLOCK))
    default = box.value
    for period, words in ((1, "at least 2"), (box.max, "no complete second copy")):
        box.set_value(period).run()
        assert not at.exception and at.warning and words in at.warning[0].value, texts(at, "warning")
        assert len(at.get("vega_lite_chart")) == 0
    box.set_value(20).run()
    assert not at.warning and len(at.get("vega_lite_chart")) == charts
    at.radio(key="cz_source").set_value("Type your own").run()
    assert not at.exception and not at.warning  # the default text repeats
    for text, words in (("abcdefgh", "does not repeat"), ("aaaaaa", "at least 2"), ("héllo héllo", "no token"),
                        ("", "at least"), ("abcdabce", "does not repeat")):
        at.text_input(key="cz_text").set_value(text).run()
        assert not at.exception, at.exception
        assert at.warning and words in at.warning[0].value, (text, texts(at, "warning"))
        assert len(at.get("vega_lite_chart")) == 0
    at.text_input(key="cz_text").set_value("xyzuvwxyzuvw").run()
    assert not at.warning and len(at.get("vega_lite_chart")) == charts
    assert at.session_state["picked_model"] == shipped_key(TWO_BLOCK)  # the session is intact
    at.radio(key="cz_source").set_value(TASK_SOURCE).run()  # back to the defaults for the next test
    at.number_input(key="cz_period_" + shipped_key(TWO_BLOCK)).set_value(default).run()
    assert not at.warning and len(at.get("vega_lite_chart")) == charts


@pytest.mark.app
def test_position_sweeps_wait_for_a_click_where_they_would_be_slow(monkeypatch):
    """A model whose one-position-at-a-time sweeps exceed the budget gets the other sections at once, a
    note and a button; the click draws the two sweep charts."""
    import core.causal.results

    # every model is "large" (the budget is in the cache key); the 1-block file has both sweeps too, and
    # draws in a third of the 2-block file's time
    monkeypatch.setattr(core.causal.results, "POSITION_BUDGET", 1)
    at = open_on("variable-period-1block.pt")
    assert "patch one position at a time" in texts(at, "info")
    charts_before = len(at.get("vega_lite_chart"))
    at.button(key="cz_sweeps_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("vega_lite_chart")) == charts_before + 3  # sections 2 (denoising, noising) and 3 drawn


def test_core_leaves_the_sweeps_out_only_over_the_budget():
    import core.causal.experiments
    from core.model.config import ModelConfig
    from core.model.task import TaskConfig
    from core.model.tinycharlm import TinyCharLM

    model = TinyCharLM(ModelConfig(n_layers=2, d_model=32, n_heads=2, vocab_size=16)).eval()
    task = TaskConfig(period_min=4, period_max=6, seq_len=16)
    small = core.causal.experiments.task_experiments(model, task, 5, 4, 0)
    assert small.resid.shape == (2, 10) and small.head_positions.shape == (4, 10)
    cut = core.causal.experiments.task_experiments(model, task, 5, 4, 0, budget=small.position_cost - 1)
    assert cut.resid is None and cut.head_positions is None
    assert cut.heads["patch_effect"].tolist() == small.heads["patch_effect"].tolist()
    forced = core.causal.experiments.task_experiments(model, task, 5, 4, 0, positions=True)
    assert (forced.resid == small.resid).all()


@pytest.mark.app
def test_the_circuit_checks_show_cores_sentences_and_the_positions_wait_for_a_click(two_block_page):
    """GradDrop and the RoPE-aware score are drawn with the page (the RoPE sentence is core's, recomputed here);
    path patching per position waits for its button, then draws four grids and its sentence."""
    from core.causal import check_readings, checks, experiments, patching
    from core.model.checkpoints import read_checkpoint

    at = at_defaults(two_block_page)
    model, info = read_checkpoint(ROOT / "checkpoints" / TWO_BLOCK)
    period = at.number_input(key="cz_period_" + shipped_key(TWO_BLOCK)).value
    runs = patching.task_runs(model, info["task"], 32, 0, period)
    rope = check_readings.rope_sentence(checks.rope_composition(model, runs, experiments._path_frame(model, runs)),
                                       experiments.block1_offsets(runs), runs.m_clean - runs.m_corrupted)
    md = texts(at, "markdown")
    assert rope in md and "so nothing cancels: GradDrop's score is" in md
    assert "keeps **45%** of the span" in md and "1.1 → q (77%), then 2.4 (92%)" in md  # the circuit
    before = len(at.get("vega_lite_chart"))
    at.button(key="cz_positions_button").click().run(timeout=300)
    assert not at.exception and len(at.get("vega_lite_chart")) == before + 4
    assert "Noising 1.4's key path into all of block 2 loses" in texts(at, "markdown")


@pytest.mark.app
def test_the_paths_over_training_wait_for_a_click_then_draw(two_block_page):
    at = at_defaults(two_block_page)
    before = len(at.get("vega_lite_chart"))
    at.button(key="cz_mechanism_button").click().run(timeout=180)
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == before + 1
    assert any("left out (0–170, 6 snapshots)" in c.value for c in at.caption)
