"""Several seeds on the Train page (core.series.seeds, ui/seeds.py): the seeds train one after
another in workers (threads here, core.pool.backend.ThreadBackend; processes on the page), each row
is that seed's own run (checked against the same run trained here), Cancel ends the series, and the
series never ends the session's ordinary run."""
from __future__ import annotations

import math
import time

import pytest
from test_runs import thread_pool

from core.pool.status import RunStatus
from core.series.seeds import SeedSeries
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

from helpers import open_app

TINY = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=30)


def reference_row(settings: RunConfig, seed: int) -> dict:
    """The seed's run trained here: its final later-copy loss and, by a plain loop over the logged
    rows, its drop step (first logged step below ln V / 2)."""
    trainer = Trainer(*settings.with_settings(seed=seed).configs())
    trainer.run(settings.train.steps)
    drop = None
    for row in trainer.history:
        if row["loss_later_copies"] < math.log(64) / 2:
            drop = row["step"]
            break
    return {"final": trainer.history[-1]["loss_later_copies"], "drop_step": drop}


@pytest.fixture
def pool():
    p = thread_pool()  # one torch thread per worker, as in this process
    yield p
    p.shutdown()


def test_seeds_train_one_after_another_and_each_row_is_that_seeds_run(pool):
    series = SeedSeries(pool, TINY.with_settings(seed=7), 3, "alice|seeds").start()
    overlap = []
    while series.active:
        overlap.append(len(pool.runs_of("alice|seeds")))
        time.sleep(0.01)
    assert series.wait(1)
    assert max(overlap) <= 1, "the seeds run one at a time"
    assert [r["seed"] for r in series.results] == [7, 8, 9]
    for r in series.results:
        assert r["status"] == RunStatus.FINISHED and r["steps"] == 30 and r["error"] is None
        ref = reference_row(TINY, r["seed"])
        assert r["final_loss_later"] == ref["final"]  # bit-exact: same settings, seed and thread count
        assert r["drop_step"] == ref["drop_step"]
    assert len({r["final_loss_later"] for r in series.results}) == 3, "different seeds, different runs"


def test_cancel_ends_the_run_in_progress_and_starts_no_further_seed(pool):
    series = SeedSeries(pool, TINY.with_settings(steps=5000), 4, "alice|seeds").start()
    deadline = time.monotonic() + 60
    while not (series.current is not None and series.current.step > 0) and time.monotonic() < deadline:
        time.sleep(0.02)
    series.cancel()
    assert series.wait(10)
    assert [r["status"] for r in series.results] == [RunStatus.CANCELLED]
    assert pool.running() == 0 and not pool.runs_of("alice|seeds")


def test_the_series_leaves_the_sessions_ordinary_run_alone_and_waits_for_its_slot(pool):
    """One training slot per session: the series waits while the session's own run trains (a slot
    is free all the while), and does not end that run."""
    ordinary = pool.start(TINY.with_settings(steps=5000), "alice")
    series = SeedSeries(pool, TINY, 3, "alice|seeds").start()
    deadline = time.monotonic() + 60
    while not (ordinary.step > 25 and series.current is not None) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert series.current.status == RunStatus.WAITING and series.current.blocked and series.done == 0
    assert ordinary.active, "the ordinary run must still be training"
    pool.stop(ordinary)
    assert series.wait(120)
    assert ordinary.status == RunStatus.STOPPED
    assert [r["status"] for r in series.results] == [RunStatus.FINISHED] * 3


def test_a_seed_that_never_ends_is_ended_after_its_deadline():
    """Every wait has a deadline: with training switched off the seed waits in line for ever, so
    the series ends it and says so."""
    pool = thread_pool(capacity=0)
    try:
        series = SeedSeries(pool, TINY, 3, "alice|seeds", seed_deadline=0.5).start()
        assert series.wait(10), "the series waited without a deadline"
        (row,) = series.results
        assert row["status"] == "timed out" and "had not ended 0.5 s after it was started" in row["error"]
        assert pool.runs_of("alice|seeds") == [] and pool.trainings() == 0
    finally:
        pool.shutdown()


@pytest.mark.parametrize("n, phrase", [(2, "between 3 and 5"), (6, "between 3 and 5")])
def test_a_series_needs_three_to_five_seeds(pool, n, phrase):
    with pytest.raises(ValueError, match=phrase):
        SeedSeries(pool, TINY, n, "alice|seeds")


def test_bad_settings_are_refused_with_the_settings_own_sentence(pool):
    with pytest.raises(ValueError, match="no complete second copy"):
        SeedSeries(pool, TINY.with_settings(period_min=40, period_max=64, seq_len=96), 3, "alice|seeds")


@pytest.mark.app
def test_train_page_trains_several_seeds_and_shows_each_next_to_the_study():
    at = open_app("app_pages/train.py", timeout=60)
    at.slider(key="tr_layers").set_value(1)
    at.slider(key="tr_periods").set_value((4, 8))
    at.slider(key="tr_seq_len").set_value(24)
    at.select_slider(key="tr_batch").set_value(4)
    at.number_input(key="tr_steps").set_value(30)
    at.number_input(key="tr_seed").set_value(3)
    at.run()
    at.slider(key="tr_n_seeds").set_value(3).run()
    at.button(key="tr_seeds_start").click().run()
    assert not at.exception, at.exception
    series = at.session_state["tr_series"]
    assert at.button(key="tr_seeds_cancel").disabled is False
    deadline = time.monotonic() + 120
    while series.active and time.monotonic() < deadline:
        time.sleep(0.2)
        at.run()
        assert not at.exception, at.exception
    assert not series.active, "the seeds did not finish"
    at.run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "drop step" in d.value.columns)
    assert table["seed"].tolist() == [3, 4, 5] and (table["status"] == RunStatus.FINISHED).all()
    for seed, final in zip(table["seed"], table["final later-copy loss"]):
        ref = reference_row(TINY.with_settings(seed=3), int(seed))  # one thread, as in the workers: equal
        assert final == ref["final"]
    assert any("3 of 3 seeds never fell below ln V / 2" in m.value for m in at.markdown)
    assert any("What am I looking at?" in m.value and "shipped transition study" in m.value for m in at.markdown)
    assert not at.button(key="tr_seeds_start").disabled and at.button(key="tr_seeds_cancel").disabled


def test_the_backend_does_not_rest_between_the_seeds_of_a_series():
    """The pool stops its worker process server after REST_SECONDS with nothing training or
    waiting; a series starts each seed as the last ends, so its seeds share one server (a rest between
    them would cost each seed a new one, 1.6-1.9 CPU-s), and the rest comes after the last."""
    from test_pool import RestingThreadBackend

    from core.pool.runs import REST_SECONDS

    pool = thread_pool(backend=RestingThreadBackend())
    assert pool.rest_seconds == REST_SECONDS
    try:
        series = SeedSeries(pool, TINY.with_settings(seed=7), 3, "alice|seeds").start()
        assert series.wait(120)
        assert [r["status"] for r in series.results] == [RunStatus.FINISHED] * 3
        assert pool.backend.rested == []  # no rest between the seeds
        deadline = time.monotonic() + REST_SECONDS + 10
        while not pool.backend.rested and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.backend.rested == [3]  # one rest, once the three had trained
    finally:
        pool.shutdown()
