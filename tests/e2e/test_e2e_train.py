"""Live training in a real browser: the curve moves, Stop keeps the model, other pages analyse it,
a page switch pauses without losing work, sessions never see each other's models, and the
server-wide training limit makes a second trainer wait with a visible status."""
from __future__ import annotations

import re
import time

import pytest

from streamlit_server import StreamlitServer

pytestmark = pytest.mark.e2e

STEP = re.compile(r"step (\d+) / (\d+)")


def train_step(app) -> tuple[int, int] | None:
    """(step, total) from the Train page's progress bar, or None when there is no run."""
    bars = app.page.locator('[data-testid="stProgress"]')
    if bars.count() == 0:
        return None
    m = STEP.search(bars.first.inner_text())
    return (int(m.group(1)), int(m.group(2))) if m else None


def wait_for(predicate, timeout: float, what: str, poll: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def loss_picture(app) -> str:
    """The first chart's drawing (its SVG): changes when the curve is redrawn with new points."""
    return app.page.locator('[data-testid="stVegaLiteChart"] svg.marks').first.inner_html()


def press(app, label: str, wait_idle: bool = True) -> None:
    """Click a button. While a run trains, its live panel reruns every second, so the page is
    seldom idle: then wait for the outcome instead (wait_idle=False)."""
    button = app.page.get_by_role("button", name=label, exact=True)
    if wait_idle:
        app.after(button.click)
    else:
        button.click()


def smallest_batch(app) -> None:
    """Batch size to its minimum (keyboard on the slider, as a student could): quick steps."""
    app.page.get_by_text("Advanced: sequence length").click()
    thumb = app.page.get_by_role("slider", name="Batch size")
    thumb.focus()
    app.after(lambda: thumb.press("Home"))
    assert thumb.get_attribute("aria-valuetext") == "4"


def long_run(app) -> None:
    """Steps to 20,000, so the run lasts until the test stops it: at batch 4 the default 800 steps took
    about 13 s with the compiled attention, and a run over before a page switch or a second session's
    Train press left nothing to stop or to wait for."""
    steps = app.page.get_by_role("spinbutton", name="Steps")
    app.after(lambda: (steps.fill("20000"), steps.press("Enter")))
    assert steps.input_value() == "20000"


def start_training(app) -> None:
    app.goto("train")
    app.assert_no_exception()
    smallest_batch(app)
    long_run(app)
    press(app, "Train", wait_idle=False)
    wait_for(lambda: (s := train_step(app)) and s[0] > 0, 90, "the first training steps")


def stop_training(app) -> int:
    press(app, "Stop", wait_idle=False)
    wait_for(lambda: app.page.get_by_text(re.compile(r"Stopped at step \d+")).count() > 0, 30, "the stopped message")
    app.wait_idle()
    text = app.page.get_by_text(re.compile(r"Stopped at step \d+")).first.inner_text()
    return int(re.search(r"Stopped at step (\d+)", text).group(1))


@pytest.fixture(scope="module")
def one_slot_server(browser):
    """A server that lets one training run at a time (ATTENTION_LAB_MAX_TRAININGS=1)."""
    srv = StreamlitServer(env={"ATTENTION_LAB_MAX_TRAININGS": "1"}, name="server-one-slot")
    yield srv
    srv.stop()


def test_train_watch_stop_then_analyse(new_app, one_slot_server):
    app = new_app(one_slot_server)
    start_training(app)
    assert app.wait_charts(1) >= 1, "no loss chart while training"
    first = loss_picture(app)
    step0 = train_step(app)[0]
    wait_for(lambda: loss_picture(app) != first and train_step(app)[0] > step0, 90,
             "the loss curve to be redrawn with new points")
    app.screenshot("train-running")
    stopped_at = stop_training(app)
    app.assert_no_exception()
    app.screenshot("train-stopped")
    assert "trained #1" in app.picked_label(), f"the picker shows {app.picked_label()!r} after Stop"
    assert f"step {stopped_at}" in app.picked_label()

    app.nav("Attention")
    app.assert_no_exception()
    app.pick("trained #1")  # what a student does; it should already be the picked model
    app.assert_no_exception()
    assert "trained #1" in app.picked_label()
    app.wait_charts(1)
    app.screenshot("attention-trained-model")
    assert not one_slot_server.tracebacks(), one_slot_server.tracebacks()[-1]


def test_page_switch_and_rerun_keep_the_run(new_app, one_slot_server):
    app = new_app(one_slot_server)
    start_training(app)
    caption = app.page.get_by_text(re.compile(r"^This run: ")).first.inner_text()
    # A rerun of the whole page while training: move the depth slider (the run keeps its own settings).
    depth = app.page.get_by_role("slider", name="Depth: attention blocks")
    depth.focus()
    depth.press("ArrowRight")
    before = wait_for(lambda: (s := train_step(app)) and s[0], 30, "the run's progress after a rerun")
    assert app.page.get_by_text(re.compile(r"^This run: ")).first.inner_text() == caption
    # A page switch and back.
    app.nav("Attention")
    app.assert_no_exception()
    app.nav("Train", wait_idle=False)
    after = wait_for(lambda: train_step(app), 30, "the run's progress after coming back")
    assert after[0] >= before, f"the run went back from step {before} to {after[0]} after a page switch"
    assert app.page.get_by_text(re.compile(r"^This run: ")).first.inner_text() == caption
    stopped_at = stop_training(app)
    assert stopped_at >= before
    assert f"step {stopped_at}" in app.picked_label()
    app.assert_no_exception()


def test_sessions_are_isolated_and_wait_for_a_slot(new_app, one_slot_server):
    """ATTENTION_LAB_MAX_TRAININGS=1: Bob waits with a visible status while Alice trains, then
    trains himself; neither sees the other's model, nor does a third session."""
    alice, bob = new_app(one_slot_server), new_app(one_slot_server)
    start_training(alice)
    bob.goto("train")
    press(bob, "Train", wait_idle=False)
    waiting = bob.page.get_by_text(re.compile("waiting for a free training slot", re.I))
    wait_for(lambda: waiting.count() > 0, 30, "Bob's waiting status while Alice trains")
    bob.screenshot("train-waiting-for-slot")
    assert train_step(bob) is None or train_step(bob)[0] == 0, "Bob trained while the only slot was taken"

    stop_training(alice)
    wait_for(lambda: (s := train_step(bob)) and s[0] > 0, 60, "Bob's run to start once Alice's slot is free")
    stop_training(bob)

    # Each sees only its own trained model.
    alice_options, bob_options = alice.sidebar_options(), bob.sidebar_options()
    assert sum("trained #" in o for o in alice_options) == 1, alice_options
    assert sum("trained #" in o for o in bob_options) == 1, bob_options
    assert alice.picked_label() != bob.picked_label()
    carol = new_app(one_slot_server)
    carol.goto("attention")
    assert not any("trained" in o for o in carol.sidebar_options()), "a new session lists someone else's model"
    assert not one_slot_server.tracebacks(), one_slot_server.tracebacks()[-1]


def test_the_server_wrote_nothing_in_the_repository(one_slot_server):
    """After training, stopping, page switches and analysis: no new file inside the repository
    (the app keeps everything in memory; bytecode writing is off for the test server)."""
    assert one_slot_server.new_files_in_repo() == []


def test_restore_defaults_resets_the_widgets_in_the_browser(app):
    """What the browser shows, not only the session: the Depth slider, the batch and the steps go back."""
    app.goto("train")
    depth = app.page.get_by_role("slider", name="Depth: attention blocks")
    default_depth = depth.get_attribute("aria-valuetext")
    depth.focus()
    app.after(lambda: depth.press("ArrowRight"))
    assert depth.get_attribute("aria-valuetext") != default_depth
    smallest_batch(app)
    long_run(app)
    app.after(lambda: app.page.get_by_role("button", name="Restore default settings").click())
    app.assert_no_exception()
    assert depth.get_attribute("aria-valuetext") == default_depth
    from core.training.run_config import RunConfig

    d = RunConfig.of().train
    assert app.page.get_by_role("slider", name="Batch size").get_attribute("aria-valuetext") == str(d.batch_size)
    assert app.page.get_by_role("spinbutton", name="Steps").input_value() == str(d.steps)
