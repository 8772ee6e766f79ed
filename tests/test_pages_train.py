"""Home and Train pages through AppTest: every shipped checkpoint renders, live training adds a model
to the sidebar picker, bad settings give a message, Stop keeps the last finished step, the limiter."""
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.slots import shared_slots

from helpers import SHIPPED, open_app


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


def run_until_done(at: AppTest, max_runs: int = 40):
    for _ in range(max_runs):
        if not at.session_state["train_run"].active:
            return at.session_state["train_run"]
        at.run()
        assert not at.exception, at.exception
    raise AssertionError("training did not finish")


@pytest.mark.parametrize("file", SHIPPED)
def test_home_and_train_render_on_every_shipped_checkpoint(file):
    at = app()
    at.selectbox(key="picked_model").set_value(f"shipped:{file}").run()
    assert not at.exception, at.exception
    assert at.session_state["picked_model"] == f"shipped:{file}"
    assert len(at.metric) == 4 and all(m.value for m in at.metric)
    assert len(at.get("page_link")) == 7
    assert len(at.latex) >= 2
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    assert not at.button(key="tr_train").disabled
    assert at.button(key="tr_stop").disabled
    assert not at.error


def test_training_a_few_steps_adds_a_picked_downloadable_model():
    at = app("pages/train.py")
    before = [w.options for w in at.selectbox if w.key == "picked_model"]  # no picker without any model
    before = before[0] if before else []
    tiny_settings(at, steps=3)
    at.checkbox(key="tr_shared").uncheck().run()  # the plain initial embedding, through its widget
    at.button(key="tr_train").click().run()
    run = run_until_done(at)
    assert run.status == "finished" and run.step == 3
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
    assert "plain init" in key or any("plain init" in o for o in options)
    assert at.get("download_button"), "the finished model should be downloadable"
    assert at.success and "step 3" in at.success[0].value
    at.switch_page("pages/attention.py").run()  # the picked model is the trained one on other pages too
    assert not at.exception and at.session_state["picked_model"] == key


@pytest.mark.parametrize("periods, seq_len, phrase", [
    ((40, 64), 96, "no complete second copy"),
    ((32, 32), 40, "raise seq_len to at least 64"),
])
def test_impossible_settings_show_the_reason_and_cannot_train(periods, seq_len, phrase):
    at = app("pages/train.py")
    at.slider(key="tr_periods").set_value(periods)
    at.slider(key="tr_seq_len").set_value(seq_len)
    at.run()
    assert not at.exception, at.exception
    assert any(phrase in e.value for e in at.error)
    assert at.button(key="tr_train").disabled
    assert "train_run" not in at.session_state


def test_stop_keeps_the_model_and_history_of_the_last_finished_step():
    at = app("pages/train.py")
    tiny_settings(at, steps=500)
    at.button(key="tr_train").click().run()
    at.run()
    run = at.session_state["train_run"]
    assert 0 < run.step < 500
    at.button(key="tr_stop").click().run()
    assert not at.exception, at.exception
    run = at.session_state["train_run"]
    stopped_at = run.step
    assert run.status == "stopped"
    at.run()
    at.run()
    assert run.step == stopped_at, "a stopped run must not train on"
    entry = at.session_state["lab_models"][run.registered_key]
    assert entry.info["history"][-1]["step"] == stopped_at
    assert entry.info["train"]["steps_done"] == stopped_at
    for name, w in entry.model.state_dict().items():  # the kept model is the trainer's at that step
        assert torch.equal(w, run.trainer.model.state_dict()[name])
    assert at.selectbox(key="picked_model").value == run.registered_key
    assert not at.button(key="tr_train").disabled and at.button(key="tr_stop").disabled


def test_a_full_server_makes_training_wait_with_a_visible_status():
    pool = shared_slots()
    others = [f"other-session-{i}" for i in range(pool.capacity)]
    try:
        for o in others:
            assert pool.request(o).granted
        at = app("pages/train.py")
        tiny_settings(at, steps=3, layers=0)
        at.button(key="tr_train").click().run()
        assert any(f"waiting for a free training slot: {pool.capacity} running" in i.value.lower() for i in at.info)
        assert at.session_state["train_run"].step == 0
        pool.release(others[0])
        run = run_until_done(at)
        assert run.status == "finished" and run.step == 3
        assert any("no attention heads" in i.value for i in at.info)  # a 0-block model has none to chart
        assert not pool.holds(at.session_state["train_holder"])
    finally:
        for o in others:
            pool.release(o)


def test_history_frames_and_the_drop_step():
    from core.live import TrainSettings, drop_step, drop_threshold, head_score_frame, loss_frame
    from core.task import TaskConfig

    limit = drop_threshold(64)
    history = [{"step": s, "loss_first_copy": 4.2, "loss_later_copies": later,
                "prev_token": [[0.1, 0.2]], "induction": [[0.0, 0.3]]}
               for s, later in [(0, 4.1), (25, limit + 0.01), (50, limit - 0.01), (75, 0.2)]]
    assert drop_step(history, 64) == 50
    assert drop_step(history[:2], 64) is None
    heads = head_score_frame(history)
    assert len(heads) == 4 * 2 * 2 and set(heads["block"]) == {1} and set(heads["head"]) == {1, 2}
    assert set(loss_frame(history, "r")["part"]) == {"first copy", "later copies"}
    bad = TrainSettings(2, 32, 32, 40, False, 1e-2, 8, 10, 0)
    with pytest.raises(ValueError) as e:
        TaskConfig(32, 32, 40).validate(64)
    assert bad.problem() == str(e.value)


def test_settings_survive_a_visit_to_another_page():
    at = app("pages/train.py")
    tiny_settings(at, steps=7, layers=3)
    at.switch_page("pages/attention.py").run()
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    assert at.slider(key="tr_layers").value == 3
    assert at.slider(key="tr_periods").value == (4, 8)
    assert at.number_input(key="tr_steps").value == 7


def _write_study(path: Path) -> None:
    """A small study file in core.transition's format: 2-block seeds 0-3 drop, seed 4 does not."""
    rows = ["blocks,seed,steps_run,dropped,abrupt,drop_step,drop_start,drop_end,width,plateau_loss,final_loss_later"]
    for seed, start in enumerate([300, 420, 510, 650]):
        rows.append(f"2,{seed},1500,True,True,{start + 40},{start},{start + 80},80,3.6,0.3")
    rows.append("2,4,1500,False,False,,,,,3.7,3.6")
    rows += [f"1,{seed},1500,False,False,,,,,3.7,3.6" for seed in range(3)]
    header = "# a study for the test\n# command: python bench/transition_study.py --seeds 5\n"
    path.write_text(header + "\n".join(rows) + "\n")


def test_the_transition_study_is_shown_or_marked_not_yet_measured(tmp_path, monkeypatch):
    transition = pytest.importorskip("core.transition")
    monkeypatch.setattr(transition, "STUDY_FILE", tmp_path / "transition_study.csv")
    at = app("pages/train.py")
    assert any("Not yet measured" in i.value for i in at.info)
    _write_study(transition.STUDY_FILE)
    at.run()
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "2 blocks: 4 of 5 seeds dropped (4 abruptly)" in text
    assert "1 block: 0 of 3 seeds dropped." in text
    assert "transition_study.py --seeds 5" in at.code[0].value
    transition.STUDY_FILE.write_text("not,a,study\n1,2,3\n")
    at.run()
    assert not at.exception and any("could not be read" in w.value for w in at.warning)


def test_concurrent_trainings_split_the_cores_for_a_chunk_only(monkeypatch):
    from dataclasses import replace

    from core.live import LiveRun, TrainSettings, chunk_threads

    assert chunk_threads(1) is None  # a lone training keeps torch's own setting
    assert chunk_threads(2) >= 1 and chunk_threads(2) <= max(1, torch.get_num_threads() * 2)
    run = LiveRun(replace(TrainSettings.defaults(), n_layers=1, period_min=4, period_max=8, seq_len=24,
                          batch_size=4, steps=3))
    seen, real_run = [], run.trainer.run

    def spy(n, **kw):
        seen.append(torch.get_num_threads())
        return real_run(n, **kw)

    monkeypatch.setattr(run.trainer, "run", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        run.advance(0.3, threads=1)
        assert seen == [1] and torch.get_num_threads() == 2
        run.advance(0.3)
        assert seen[-1] == 2
    finally:
        torch.set_num_threads(before)


def test_one_chunk_at_a_time_and_stop_waits_for_it(monkeypatch):
    """A second advance while a chunk is inside trainer.run backs off (returns 0 steps) instead of
    stepping the same model concurrently; stop waits for the chunk and keeps its steps."""
    import threading
    from dataclasses import replace

    from core.live import LiveRun, TrainSettings

    run = LiveRun(replace(TrainSettings.defaults(), n_layers=1, period_min=4, period_max=8, seq_len=24,
                          batch_size=4, steps=50))
    entered, gate, real_run = threading.Event(), threading.Event(), run.trainer.run

    def held(n, **kw):
        entered.set()
        assert gate.wait(10)
        return real_run(n, **kw)

    monkeypatch.setattr(run.trainer, "run", held)
    first = threading.Thread(target=run.advance, args=(0.3,))
    first.start()
    assert entered.wait(10)
    assert run.advance(0.3) == 0 and run.step == 0
    stopper = threading.Thread(target=run.stop)
    stopper.start()
    stopper.join(0.3)
    assert stopper.is_alive() and run.active  # stop waits for the chunk in progress
    gate.set()
    first.join(10)
    stopper.join(10)
    assert run.status == "stopped" and run.step == 2 and run.result is not None


def test_plain_embedding_choice_reaches_the_trainer():
    """The Train page's 'enlarged embedding' box: on gives the preset's init, off the plain one."""
    from dataclasses import replace

    from core.live import TrainSettings
    from core.presets import get_preset

    d = TrainSettings.defaults()
    assert d.shared_embedding
    _, _, shared = d.configs()
    _, _, plain = replace(d, shared_embedding=False).configs()
    preset = get_preset("variable-period-2block").train
    assert (shared.embed_scale, shared.embed_shared) == (preset.embed_scale, preset.embed_shared)
    assert (plain.embed_scale, plain.embed_shared) == (1.0, 0.0)
    assert shared.embed_shared > 0
    assert "plain init" in replace(d, shared_embedding=False).label() and "plain init" not in d.label()
