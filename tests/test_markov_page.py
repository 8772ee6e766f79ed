"""The Train page on the Markov-chain task through AppTest: the task is picked with its widgets, a run trains
through the pool, its KL chart and measured stages show, bad settings give a message, the model is
downloadable but not put in the picker, and the repeat task's settings come back when it is picked again."""
from __future__ import annotations

import json

import pytest
from test_pages_train import app, rerun_until

from core.pool.status import RunStatus
from core.shipped import MARKOV_MANIFEST
from core.training import markov as mk
from core.training.run_config import RunConfig


def markov_settings(at, steps: int) -> None:
    at.radio(key="tr_task").set_value("markov").run()
    assert not at.exception, at.exception
    at.slider(key="tr_states").set_value(3)
    at.slider(key="tr_mk_len").set_value(30)
    at.select_slider(key="tr_batch").set_value(4)
    at.number_input(key="tr_mk_steps").set_value(steps)
    at.run()
    assert not at.exception, at.exception


@pytest.mark.app
def test_a_markov_run_trains_shows_its_stages_and_is_downloadable():
    at = app("app_pages/train.py")
    at.slider(key="tr_periods").set_value((4, 8)).run()
    markov_settings(at, steps=20)
    assert any("Markov chain" in m.value for m in at.markdown)
    at.button(key="tr_train").click().run()
    run = rerun_until(at, lambda r: not r.active, what="the Markov run to finish")
    at.run()
    assert not at.exception, at.exception
    assert run.status == RunStatus.FINISHED and run.step == 20 and run.settings.kind == "markov"
    assert run.task_cfg.seq_len == 30 and run.model_cfg.vocab_size == 3
    notes = " ".join(m.value for m in at.markdown)
    assert "KL(strategy ‖ model)" in notes
    expected = mk.stages(run.history(), run.task_cfg)["onset"]
    for name, step in expected.items():  # the page's numbers are the measured ones
        assert (f"{name} from step {step}" if step is not None else f"{name} not (yet) nearest") in notes
    assert at.success and "step 20" in at.success[0].value
    assert at.get("download_button")
    # the finished run joins the sidebar picker and is picked, for the reading pages
    assert run.registered_key and at.session_state["picked_model"] == run.registered_key
    shipped = next(m.value for m in at.markdown if "shipped Markov-chain runs" in m.value)
    rows = {r["preset"]: r for r in json.loads(MARKOV_MANIFEST.read_text())["checkpoints"]}
    assert f"bigram from step {rows['markov-2block']['figures']['onset']['bigram']}" in shipped
    assert "bigram never" in shipped  # the 1-block run
    table = next(d.value for d in at.dataframe if "this lab" in d.value.columns)
    assert list(table["this lab"])[:3] == ["3", "Dirichlet(1) per row", "30"]
    # the finished run beside the paper's run, in training sequences (step x batch 4), and the shipped run's too
    rows_, sentence = mk.beside_paper(run.history(), run.task_cfg, 4)
    assert sentence and sentence in notes
    beside = next(d.value for d in at.dataframe if "this run" in d.value.columns)
    assert list(beside["this run"]) == [r["this run"] for r in rows_]
    onset = rows["markov-2block"]["figures"]["onset"]
    assert f"after {onset['unigram'] * 32:,} and {onset['bigram'] * 32:,}" in notes
    # back to the repeat task: its period range is the one set before
    at.radio(key="tr_task").set_value("repeat").run()
    assert not at.exception, at.exception
    assert at.slider(key="tr_periods").value == (4, 8)


@pytest.mark.app
def test_bad_markov_settings_get_a_message_and_no_training():
    at = app("app_pages/train.py")
    markov_settings(at, steps=5)
    at.slider(key="tr_mk_len").set_value(8)
    at.run()
    assert not at.error
    at.selectbox(key="tr_hold").set_value("1.4").run()  # the Markov model has 2 heads a block
    assert at.error and "not a head of block 1" in at.error[0].value
    assert at.button(key="tr_train").disabled
    assert RunConfig.of().kind == "repeat"
