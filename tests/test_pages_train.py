"""Home and Train pages through AppTest: every shipped checkpoint renders, live training adds a model
to the sidebar picker, bad settings give a message, Stop keeps the last finished step, the limiter,
a killed training process, and two sessions training side by side."""
import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.pool.status import RunStatus
from core.training.run_config import RunConfig
from core.training.trainer import Trainer
from ui.model_keys import shipped_key
from ui.pages import PATH
from ui.training import run_pool

from helpers import CHECKPOINTS, SHIPPED, open_app


def app(page: str | None = None) -> AppTest:
    return open_app(page, timeout=60)


def tiny_settings(at: AppTest, steps: int, layers: int = 1) -> None:
    """Small, fast settings through the widgets themselves."""
    at.slider(key="tr_layers").set_value(layers)
    at.slider(key="tr_periods").set_value((4, 8))
    at.slider(key="tr_seq_len").set_value(24)
    at.select_slider(key="tr_batch").set_value(4)
    at.number_input(key="tr_steps").set_value(steps)
    at.run()
    assert not at.exception, at.exception


def rerun_until(at: AppTest, done, timeout: float = 60, what: str = "the run"):
    """Rerun the page (as the live panel's timer does) until done(run) holds; returns the run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = at.session_state.get("train_run", None)
        if run is not None and done(run):
            return run
        time.sleep(0.1)
        at.run()
        assert not at.exception, at.exception
    raise AssertionError(f"timed out waiting for {what}")


def run_until_done(at: AppTest):
    run = rerun_until(at, lambda r: not r.active, what="training to finish")
    at.run()  # the run after the one that saw it end: the model is registered and picked
    assert not at.exception, at.exception
    return run


@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_home_and_train_render_on_every_shipped_checkpoint(file):
    at = app()
    at.selectbox(key="picked_model").set_value(shipped_key(file)).run()
    assert not at.exception, at.exception
    assert at.session_state["picked_model"] == shipped_key(file)
    shown = {m.label: m.value for m in at.metric}
    # the manifest's metrics of this file (256 sequences, seed 0); the page measures fewer now
    row = next(r for r in json.loads((CHECKPOINTS / "manifest.json").read_text())["checkpoints"] if r["file"] == file)
    for label, name, tol in (("first-copy loss (nats)", "loss_first_copy", 0.15),
                             ("later-copy loss (nats)", "loss_later_copies", 0.15),
                             ("later-copy accuracy", "acc_later_copies", 0.05)):
        assert float(shown[label]) == pytest.approx(row["metrics"][name], abs=tol), (file, label, shown)
    best = shown["strongest induction head"]  # block.head from 1; "–" without heads
    layers = row["model"]["n_layers"]
    assert best == "–" if layers == 0 else best.split(".")[0] == str(layers), (file, best)
    assert len(at.get("page_link")) == len(PATH)  # the home page's path: every page but Home
    assert len(at.latex) >= 2
    at.switch_page("app_pages/train.py").run()
    assert not at.exception, at.exception
    assert not at.button(key="tr_train").disabled
    assert at.button(key="tr_stop").disabled
    assert not at.error


@pytest.mark.app
def test_training_a_few_steps_adds_a_picked_downloadable_model():
    at = app("app_pages/train.py")
    before = [w.options for w in at.selectbox if w.key == "picked_model"]  # no picker without any model
    before = before[0] if before else []
    tiny_settings(at, steps=3)
    at.checkbox(key="tr_shared").uncheck().run()  # the plain initial embedding, through its widget
    at.button(key="tr_train").click().run()
    run = run_until_done(at)
    assert run.status == RunStatus.FINISHED and run.step == 3
    at.run()
    options = at.selectbox(key="picked_model").options
    assert len(options) == len(before) + 1
    assert any(o.startswith("trained #1") for o in options)
    key = at.session_state["picked_model"]
    assert key == run.registered_key
    entry = at.session_state["lab_models"][key]
    assert entry.source == "trained" and entry.info["config"].n_layers == 1
    assert entry.info["history"][-1]["step"] == 3
    assert entry.info["task"].period_max == 8 and entry.info["task"].seq_len == 24
    assert (entry.info["train"]["embed_scale"], entry.info["train"]["embed_shared"]) == (1.0, 0.0)
    assert "plain init" in entry.label  # the picker's caption shows the full label
    assert any(entry.label in c.value for c in at.sidebar.caption)
    assert at.get("download_button"), "the finished model should be downloadable"
    assert at.success and "step 3" in at.success[0].value
    at.switch_page("app_pages/attention.py").run()  # the picked model is the trained one on other pages too
    assert not at.exception and at.session_state["picked_model"] == key


@pytest.mark.app
def test_a_finished_live_run_shows_its_timeline():
    """A run trained in a worker comes back with its snapshots, and the Train page draws its timeline;
    the in-context-learning score it prints is the final model's, measured here from the loss at each
    position of the evaluation batch."""
    import torch.nn.functional as F

    from core.training.timeline import icl_positions
    from core.training.trainer import eval_batch

    at = app("app_pages/train.py")
    tiny_settings(at, steps=30, layers=2)
    at.button(key="tr_train").click().run()
    run = run_until_done(at)
    assert run.status == RunStatus.FINISHED
    entry = at.session_state["lab_models"][run.registered_key]
    assert [s["step"] for s in entry.info["snapshots"]] == [0, 10, 20]
    assert any(h.value == "Watch the circuit form: this run" for h in at.subheader)
    shipped = sum("In-context-learning score" in c.value for c in at.caption)  # the shipped run's timeline
    at.button(key="tr_timeline").click().run()  # this run's is measured when asked for
    assert not at.exception, at.exception
    assert sum("In-context-learning score" in c.value for c in at.caption) == shipped + 1
    assert not any("no snapshots" in i.value for i in at.info)
    tokens, _ = eval_batch(entry.info["task"], entry.model.cfg.vocab_size)
    with torch.no_grad():
        logits = entry.model(tokens)[:, :-1]
    per = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none").mean(0)  # [T-1]
    task = entry.info["task"]
    early, late = icl_positions(tokens.shape[1], task.period_min, task.period_max)
    icl = float(per[late - 1] - per[early - 1])
    assert any(f"Its final value: {icl:.2f} nats." in c.value for c in at.caption)


@pytest.mark.app
def test_a_run_in_progress_shows_its_film_strip_and_marks_its_steps_on_the_loss_chart():
    at = app("app_pages/train.py")
    tiny_settings(at, steps=5000, layers=2)
    at.button(key="tr_train").click().run()
    run = rerun_until(at, lambda r: len(r.frames) >= 4, what="four logged steps")
    at.run()
    assert not at.exception, at.exception
    note = [c.value for c in at.caption if "film strip of this run so far" in c.value]
    assert len(note) == 1 and f"period {run.strip_period}" in note[0]
    loss_notes = [m.value for m in at.markdown if "numbered dashed lines are the steps of the film strip" in m.value]
    assert len(loss_notes) == 1
    rows = [m.value for m in at.markdown if m.value.startswith(("**previous-token head 1.", "**induction head 2."))]
    assert len(rows) == 2, rows
    images = at.get("image")
    assert len(images) == 2, images  # a row of tiles per head, each captioned "<frame>: step <s>"
    for row in images:
        steps = [int(c.split("step ")[1]) for c in row.captions]
        assert 1 <= len(steps) <= 6 and steps == sorted(steps) and set(steps) <= {s for s, _ in run.frames}
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert any('"film strip frame"' in sp for sp in specs), "no frame markers on the loss chart"
    at.button(key="tr_reset").click().run()
    assert not at.exception, at.exception


@pytest.mark.parametrize("periods, seq_len, phrase", [
    ((40, 64), 96, "no complete second copy"),
    ((32, 32), 40, "raise seq_len to at least 64"),
])
@pytest.mark.app
def test_impossible_settings_show_the_reason_and_cannot_train(periods, seq_len, phrase):
    at = app("app_pages/train.py")
    at.slider(key="tr_periods").set_value(periods)
    at.slider(key="tr_seq_len").set_value(seq_len)
    at.run()
    assert not at.exception, at.exception
    assert any(phrase in e.value for e in at.error)
    assert at.button(key="tr_train").disabled
    assert "train_run" not in at.session_state


@pytest.mark.app
def test_stop_keeps_the_model_and_history_of_the_last_finished_step():
    at = app("app_pages/train.py")
    tiny_settings(at, steps=5000)
    at.button(key="tr_train").click().run()
    run = rerun_until(at, lambda r: r.step > 0, what="the first steps")
    at.button(key="tr_stop").click().run()
    assert not at.exception, at.exception
    run = at.session_state["train_run"]
    if run.active:  # the button answers "Stopping…" if the model is not back within ui.training.STOP_ANSWER
        assert run.stopping and any("Stopping" in i.value for i in at.info)
        run = rerun_until(at, lambda r: not r.active, what="the stopped model")
    stopped_at = run.step
    assert run.status == RunStatus.STOPPED
    at.run()
    at.run()
    assert run.step == stopped_at, "a stopped run must not train on"
    entry = at.session_state["lab_models"][run.registered_key]
    assert entry.info["history"][-1]["step"] == stopped_at
    assert entry.info["train"]["steps_done"] == stopped_at
    reference = Trainer(*run.settings.configs())  # the same run, here, to the same step
    before = torch.get_num_threads()
    torch.set_num_threads(run.worker_threads)  # bit-exact needs the worker's thread count
    try:
        reference.run(stopped_at)
    finally:
        torch.set_num_threads(before)
    for name, w in entry.model.state_dict().items():  # the kept model is the trainer's at that step
        assert torch.equal(w, reference.model.state_dict()[name]), name
    assert at.selectbox(key="picked_model").value == run.registered_key
    assert not at.button(key="tr_train").disabled and at.button(key="tr_stop").disabled


LONG = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4,
               steps=100_000)


@pytest.mark.worker
@pytest.mark.app
def test_a_full_server_makes_training_wait_with_a_visible_status():
    pool = run_pool()
    others = [pool.start(LONG.with_settings(seed=100 + i), f"other-session-{i}") for i in range(pool.capacity)]
    try:
        at = app("app_pages/train.py")
        tiny_settings(at, steps=3, layers=0)
        at.button(key="tr_train").click().run()
        assert any(f"Waiting for a free training slot: {pool.capacity} running; you are next" in i.value
                   for i in at.info), [i.value for i in at.info]
        assert at.session_state["train_run"].step == 0
        pool.discard(others[0])
        run = run_until_done(at)
        assert run.status == RunStatus.FINISHED and run.step == 3
        assert any("no attention heads" in i.value for i in at.info)  # a 0-block model has none to chart
        assert pool.runs_of(at.session_state["train_owner"]) == []
    finally:
        for o in others:
            pool.discard(o)


def test_history_frames_and_the_drop_step():
    from core.model.drop import drop_threshold
    from core.model.task import TaskConfig
    from core.training.live import drop_step, head_score_frame, loss_frame

    limit = drop_threshold(64)
    history = [{"step": s, "loss_first_copy": 4.2, "loss_later_copies": later,
                "prev_token": [[0.1, 0.2]], "induction": [[0.0, 0.3]]}
               for s, later in [(0, 4.1), (25, limit + 0.01), (50, limit - 0.01), (75, 0.2)]]
    assert drop_step(history, 64) == 50
    assert drop_step(history[:2], 64) is None
    heads = head_score_frame(history)
    assert len(heads) == 4 * 2 * 2 and set(heads["layer"]) == {0} and set(heads["head"]) == {0, 1}
    assert set(heads["label"]) == {"1.1", "1.2"}
    assert set(loss_frame(history, "r")["part"]) == {"first copy", "later copies"}
    bad = RunConfig.of(n_layers=2, period_min=32, period_max=32, seq_len=40, lr=1e-2, batch_size=8, steps=10)
    with pytest.raises(ValueError) as e:
        TaskConfig(32, 32, 40).validate(64)
    assert bad.problem() == str(e.value)


@pytest.mark.app
def test_settings_survive_a_visit_to_another_page():
    at = app("app_pages/train.py")
    tiny_settings(at, steps=7, layers=3)
    at.switch_page("app_pages/attention.py").run()
    at.switch_page("app_pages/train.py").run()
    assert not at.exception, at.exception
    assert at.slider(key="tr_layers").value == 3
    assert at.slider(key="tr_periods").value == (4, 8)
    assert at.number_input(key="tr_steps").value == 7


def _write_study(path: Path) -> None:
    """A small study file in core.training.transition's format: 2-block seeds 0-3 drop, seed 4 does not."""
    rows = ["blocks,seed,steps_run,dropped,abrupt,drop_step,drop_start,drop_end,width,plateau_loss,final_loss_later"]
    for seed, start in enumerate([300, 420, 510, 650]):
        rows.append(f"2,{seed},1500,True,True,{start + 40},{start},{start + 80},80,3.6,0.3")
    rows.append("2,4,1500,False,False,,,,,3.7,3.6")
    rows += [f"1,{seed},1500,False,False,,,,,3.7,3.6" for seed in range(3)]
    header = "# a study for the test\n# command: python bench/transition_study.py --seeds 5\n"
    path.write_text(header + "\n".join(rows) + "\n")


@pytest.mark.app
def test_the_transition_study_is_shown_or_marked_not_yet_measured(tmp_path, monkeypatch):
    import core.training.transition as transition
    monkeypatch.setattr(transition, "STUDY_FILE", tmp_path / "transition_study.csv")
    at = app("app_pages/train.py")
    assert any("Not yet measured" in i.value for i in at.info)
    _write_study(transition.STUDY_FILE)
    at.run()
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "2 blocks: 4 of 5 seeds dropped (4 abruptly)" in text
    assert "1 block: 0 of 3 seeds dropped." in text
    assert any(c.language == "bash" and "transition_study.py --seeds 5" in c.value for c in at.code)
    transition.STUDY_FILE.write_text("not,a,study\n1,2,3\n")
    at.run()
    assert not at.exception and any("could not be read" in w.value for w in at.warning)


def test_the_cores_are_split_between_running_trainings():
    from core.training.threads import split_threads

    assert [split_threads(n, cores=8) for n in (0, 1, 2, 3, 8, 9)] == [8, 8, 4, 2, 1, 1]
    assert split_threads(2, cores=2) == 1 and split_threads(1, cores=1) == 1


@pytest.mark.app
def test_a_killed_training_process_gives_a_message_and_the_session_keeps_its_models():
    at = app("app_pages/train.py")
    tiny_settings(at, steps=3)
    at.button(key="tr_train").click().run()
    kept = run_until_done(at).registered_key
    assert kept in at.session_state["lab_models"]
    at.number_input(key="tr_steps").set_value(20_000).run()
    at.button(key="tr_train").click().run()
    run = rerun_until(at, lambda r: r.step > 30, what="the second run past its first logged step")
    os.kill(run.pid, signal.SIGKILL)  # what the OS does to a process that runs out of memory
    rerun_until(at, lambda r: not r.active, 30, "the page to notice")
    at.run()
    assert not at.exception, at.exception
    assert run.status == RunStatus.FAILED and run.step > 0 and run.step % 25 == 0  # its last logged step
    assert any("killed by signal 9" in e.value and "Nothing else in your session changed" in e.value
               for e in at.error)
    assert any(s.value.startswith(f"Kept at step {run.step}:") for s in at.success)
    assert any("its training process ended before the run did" in i.value for i in at.info), "why no timeline"
    assert kept in at.session_state["lab_models"] and at.selectbox(key="picked_model").value == run.registered_key
    assert sum(o.startswith("trained #") for o in at.selectbox(key="picked_model").options) == 2
    assert not at.button(key="tr_train").disabled, "the student can train again"


@pytest.mark.app
def test_two_sessions_train_at_once_and_each_gets_only_its_own_run():
    alice, bob = app("app_pages/train.py"), app("app_pages/train.py")
    tiny_settings(alice, steps=40, layers=1)
    tiny_settings(bob, steps=40, layers=0)
    alice.button(key="tr_train").click().run()
    bob.button(key="tr_train").click().run()
    a, b = alice.session_state["train_run"], bob.session_state["train_run"]
    assert a is not b and a.owner != b.owner
    run_until_done(alice)
    run_until_done(bob)
    assert a.status == b.status == RunStatus.FINISHED
    assert a.pid is not None and b.pid is not None and a.pid != b.pid  # known once each worker has started
    assert all(len(r["prev_token"]) == 1 for r in a.history())  # alice's rows are her 1-block run's
    assert all(r["prev_token"] == [] for r in b.history())  # bob's are his 0-block run's
    for at, run in ((alice, a), (bob, b)):
        options = at.selectbox(key="picked_model").options
        mine = at.session_state["lab_models"][run.registered_key]
        assert [o for o in options if o.startswith("trained #")] == ["trained #1, seed 0, step 40"]  # its own only
        assert mine.source == "trained" and mine.label in " ".join(c.value for c in at.sidebar.caption)
    assert run_pool().runs_of(a.owner) == [] and run_pool().runs_of(b.owner) == []


def test_plain_embedding_choice_reaches_the_trainer():
    """The Train page's 'enlarged embedding' box: on gives the preset's init, off the plain one."""

    from core.training.presets import get_preset

    d = RunConfig.of()
    assert d.init == "shared"
    _, _, shared = d.configs()
    _, _, plain = d.with_settings(shared_embedding=False).configs()
    preset = get_preset("variable-period-2block").train
    assert (shared.embed_scale, shared.embed_shared) == (preset.embed_scale, preset.embed_shared)
    assert (plain.embed_scale, plain.embed_shared) == (1.0, 0.0)
    assert shared.embed_shared > 0
    assert "plain init" in d.with_settings(shared_embedding=False).label() and "plain init" not in d.label()


def test_the_progress_line_says_what_the_run_is_doing():
    from ui.text import progress_text

    assert progress_text(0, 800, True, float("nan"), RunStatus.STARTING, 0.0) == \
        "step 0 / 800 · starting its training process"
    assert progress_text(100, 800, True, 10.0, RunStatus.RUNNING, 10.0) == \
        "step 100 / 800 · 10.0 steps/s · about 70 s left"
    assert progress_text(0, 800, True, float("nan"), RunStatus.WAITING, 0.0) == "step 0 / 800"
    assert progress_text(400, 800, False, 0.0, RunStatus.STOPPED, 150.0) == \
        "step 400 / 800 · stopped after 2.5 min of training"


def test_a_period_of_one_is_refused_or_warned_in_the_settings_and_no_question_prints_nan():
    """Period range 1-1 has no first-copy target (its loss is an empty mean: NaN): refused, with what to change.
    A range starting at 1 trains, with a warning; the first-copy question of a history without first-copy loss
    says so instead of formatting NaN."""
    import math

    from core.quiz.training import first_copy_during_drop

    d = RunConfig.of()
    only_one = d.with_settings(period_min=1, period_max=1, seq_len=192)
    assert "Raise the upper end of the period range to at least 2" in only_one.problem()
    with pytest.raises(ValueError, match="repeats a single token"):
        only_one.configs()
    assert only_one.warnings() == []  # refused, not warned
    from_one = d.with_settings(period_min=1, period_max=8)
    assert from_one.problem() is None
    assert [w for w in from_one.warnings() if "Raise the lower end of the period range to 2" in w]
    assert d.warnings() == [] and RunConfig.of(task="markov").warnings() == []
    # the period-1 run's history as the trainer logs it: a falling later-copy loss, first-copy loss NaN
    history = [{"step": s, "loss_later_copies": v, "loss_first_copy": math.nan}
               for s, v in zip(range(0, 200, 25), [4.0, 3.9, 3.5, 2.0, 0.5, 0.2, 0.1, 0.1])]
    q = first_copy_during_drop(history, 50)
    assert q.answer is None and "nan" not in q.why.lower() and "no first-copy loss" in q.why


def test_a_period_range_ending_at_one_is_refused_and_one_from_one_warned():
    """From Python (the page's period slider starts at 2): a range 1-1 repeats one token, nothing to measure; a
    range from 1 trains, with a sentence saying what it does not measure."""
    d = RunConfig.of()
    single = d.with_settings(period_min=1, period_max=1, seq_len=192)
    assert "Raise the upper end of the period range to at least 2" in single.problem()
    from_one = d.with_settings(period_min=1, period_max=8)
    assert from_one.problem() is None
    assert any("Sequences of period 1 repeat one token" in w for w in from_one.warnings())
    assert d.with_settings(period_min=2).warnings() == []


@pytest.mark.app
def test_the_period_slider_offers_no_range_ending_at_one():
    at = app("app_pages/train.py")
    assert at.slider(key="tr_periods").min == 2


REPEAT_WIDGETS = {"tr_layers": 3, "tr_periods": (4, 8), "tr_seq_len": 24, "tr_lr": 0.001, "tr_batch": 4,
                  "tr_steps": 7, "tr_seed": 5}
MARKOV_WIDGETS = {"tr_states": 5, "tr_alpha": 0.3, "tr_mk_len": 40, "tr_mk_steps": 9}


def _set(at: AppTest, key: str, value) -> None:
    widget = next(w for kind in ("slider", "select_slider", "number_input") for w in at.get(kind) if w.key == key)
    widget.set_value(value)


def _value(at: AppTest, key: str):
    return next(w for kind in ("slider", "select_slider", "number_input", "checkbox", "selectbox")
                for w in at.get(kind) if w.key == key).value


@pytest.mark.app
def test_restore_defaults_puts_every_setting_of_both_tasks_back():
    from core.training.markov import MARKOV_TASK, MARKOV_TRAIN
    from ui.train_form import WIDGET_KEYS, default_values

    assert set(default_values()) == set(WIDGET_KEYS) - {"tr_task"}  # every setting widget has its default
    at = app("app_pages/train.py")
    defaults = {key: _value(at, key) for key in REPEAT_WIDGETS} | {"tr_bias": False, "tr_shared": True}
    at.radio(key="tr_task").set_value("markov").run()
    for key, value in MARKOV_WIDGETS.items():
        _set(at, key, value)
    at.checkbox(key="tr_mk_smear").check()
    at.selectbox(key="tr_knock").set_value("1.2")
    at.radio(key="tr_task").set_value("repeat").run()
    for key, value in REPEAT_WIDGETS.items():
        _set(at, key, value)
    at.checkbox(key="tr_bias").check()
    at.checkbox(key="tr_shared").uncheck()
    at.selectbox(key="tr_hold").set_value("1.1")
    at.run()
    assert {key: _value(at, key) for key in REPEAT_WIDGETS} == REPEAT_WIDGETS
    at.button(key="tr_defaults").click().run()
    assert not at.exception, at.exception
    assert {key: _value(at, key) for key in defaults} == defaults
    assert _value(at, "tr_hold") == "none" and _value(at, "tr_knock") == "none"
    assert at.radio(key="tr_task").value == "repeat"
    d = RunConfig.of()
    assert (at.slider(key="tr_periods").value, at.slider(key="tr_seq_len").value) == (
        (d.task.period_min, d.task.period_max), d.task.seq_len)
    at.radio(key="tr_task").set_value("markov").run()  # the Markov form's settings were restored too
    assert not at.exception, at.exception
    assert (_value(at, "tr_states"), _value(at, "tr_alpha"), _value(at, "tr_mk_len"), _value(at, "tr_mk_steps"),
            _value(at, "tr_mk_smear"), _value(at, "tr_mk_shared")) == (
        MARKOV_TASK.n_states, MARKOV_TASK.concentration, MARKOV_TASK.seq_len, MARKOV_TRAIN.steps, False, False)


@pytest.mark.app
def test_after_a_run_each_question_once_and_a_task_switch_clears_the_result():
    from core.quiz.training import first_copy_during_drop, prev_head_timing

    at = app("app_pages/train.py")
    tiny_settings(at, steps=30, layers=2)
    at.button(key="tr_train").click().run()
    run = run_until_done(at)
    assert run.status == RunStatus.FINISHED
    history, vocab = run.result[1]["history"], run.model_cfg.vocab_size
    prompts = [first_copy_during_drop(history, vocab).prompt, prev_head_timing(history, vocab).prompt]
    shown = [m.value for m in at.markdown]
    # each question once about this run (the shipped runs' panel asks none), once before the next run
    assert [sum(p in v for v in shown) for p in prompts] == [2, 2], "a training question is asked twice"
    assert [sum(p in v and "Predict before your next run" in v for v in shown) for p in prompts] == [1, 1]
    assert any("Finished at step 30" in s.value for s in at.success)
    at.radio(key="tr_task").set_value("markov").run()
    assert not at.exception, at.exception
    assert "train_run" not in at.session_state
    assert not any("at step 30" in s.value for s in at.success) and not at.get("download_button")
    assert not any(h.value == "Watch the circuit form: this run" for h in at.subheader)
    assert any(o.startswith("trained #1") for o in at.selectbox(key="picked_model").options)
    at.radio(key="tr_task").set_value("repeat").run()  # and it does not come back
    assert not any("at step 30" in s.value for s in at.success)


@pytest.mark.app
def test_predict_before_you_train_is_recorded_at_the_press_and_graded_against_the_finished_run(monkeypatch):
    """With predict on, the Train page asks its two training questions before Train is pressed: the shipped runs'
    curves and head scores that answer them wait for an answer or a skip; a pick locks at once; pressing Train
    ties the picks to that run, and when it has ended its result panel grades them against its own history
    (this short run has no drop, so the box says why there is no clear answer), each question once in the
    result; the next run's questions start unpicked."""
    from core.quiz import training as qt
    from ui.quiz import BY_RUN

    monkeypatch.setenv("ATTENTION_LAB_PREDICT", "on")
    at = app("app_pages/train.py")
    keys = {k: f"quiz_before_{k}_0" for k, _, _ in qt.BEFORE_TRAINING}
    assert [at.radio(key=w).value for w in keys.values()] == [None, None]
    waiting = [c.value for c in at.caption if "show once you answer or skip" in c.value]
    assert len(waiting) == 2
    charts = len(at.get("vega_lite_chart"))  # the transition study: it does not answer these
    at.radio(key=keys["q_first"]).set_value(qt.FIRST_COPY_OPTIONS[1]).run()
    assert not at.exception, at.exception
    assert at.radio(key=keys["q_first"]).disabled, "a prediction is not locked"
    assert len([c for c in at.caption if "show once you answer or skip" in c.value]) == 1
    at.button(key=f"{keys['q_timing']}_skipbtn").click().run()
    assert not [c for c in at.caption if "show once you answer or skip" in c.value]
    assert len(at.get("vega_lite_chart")) > charts + 2  # the shipped curves, head scores and timeline, now answered

    tiny_settings(at, steps=30, layers=2)
    at.button(key="tr_train").click().run()
    run = at.session_state["train_run"]
    assert at.session_state[BY_RUN][run.id]["given"] == {"q_first": qt.FIRST_COPY_OPTIONS[1], "q_timing": None}
    run = run_until_done(at)
    history, vocab = run.result[1]["history"], run.model_cfg.vocab_size
    graded = [qt.first_copy_during_drop(history, vocab), qt.prev_head_timing(history, vocab)]
    shown = [m.value for m in at.markdown]
    assert any(qt.FIRST_COPY_OPTIONS[1] in v and "Your prediction before training" in v for v in shown)
    for q in graded:
        # once in the result (graded against this run) and once for the next run, above the Train button
        assert sum(q.prompt in v for v in shown) == 2, q.key
        if q.answer is None:
            assert any(i.value == q.why for i in at.info), q.key
    assert [at.radio(key=f"quiz_before_{k}_1").value for k in keys] == [None, None]
    assert not any(at.radio(key=f"quiz_before_{k}_1").disabled for k in keys)


@pytest.mark.app
def test_reset_before_a_run_ends_gives_its_predictions_back(monkeypatch):
    """Reset discards a run that has not ended: its predictions were never graded, so they are kept for the next
    run (shown locked, "Kept"), not lost."""
    from core.quiz import training as qt
    from ui.quiz import BEFORE, BY_RUN

    monkeypatch.setenv("ATTENTION_LAB_PREDICT", "on")
    at = app("app_pages/train.py")
    at.radio(key="quiz_before_q_first_0").set_value(qt.FIRST_COPY_OPTIONS[2]).run()
    tiny_settings(at, steps=5000, layers=2)
    at.button(key="tr_train").click().run()
    run = at.session_state["train_run"]
    assert run.active and at.session_state[BEFORE]["given"] == {}
    assert any("Your predictions for this run" in c.value for c in at.caption)
    at.button(key="tr_reset").click().run()
    assert not at.exception, at.exception
    assert at.session_state[BEFORE]["given"] == {"q_first": qt.FIRST_COPY_OPTIONS[2]}
    assert run.id not in at.session_state[BY_RUN]
    assert at.radio(key="quiz_before_q_first_1").disabled
    assert any(c.value.startswith(f"Kept: **{qt.FIRST_COPY_OPTIONS[2]}**") for c in at.caption)
