"""Issue 21: a training pool that cannot freeze, and identical runs computed once (core.pool.runs).

The monitor outlives a connection closed between its snapshot and wait() and any exception in a
round; a monitor that died is started again on the next script run; nothing slow runs under the pool
lock; a session holds one training slot while others wait; two sessions with the same settings share
one worker, whose model is bit-identical to a private run; another seed or setting, and "Train my own
copy", train apart."""
from __future__ import annotations

import multiprocessing.process
import threading
from dataclasses import replace

import pytest
import torch
from test_runs import alive, wait_until

import core.pool.live_run as live_run
import core.pool.monitor as monitor
import core.pool.worker as worker
from core.pool.runs import RunPool
from core.pool.status import RunStatus
from core.training.train_settings import TrainSettings
from core.training.trainer import Trainer

from helpers import open_app

TINY = replace(TrainSettings.defaults(), n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=30)
LONG = replace(TINY, steps=100_000)


@pytest.fixture
def pool():
    p = RunPool(capacity=2, owner_grace=0.3)
    yield p
    p.shutdown()


def conn_of(run):
    """The server's end of the run's Pipe (the pool's internals, before and after issue 21)."""
    return getattr(run, "_conn", None) or run._src.conn


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def reference(settings: TrainSettings, steps: int | None = None):
    """The same run trained here (one torch thread, as in the workers)."""
    trainer = Trainer(*settings.configs())
    trainer.run(settings.steps if steps is None else steps)
    return trainer


# -- a pool that cannot freeze ------------------------------------------------------------------


@pytest.mark.worker
def test_a_connection_closed_between_the_snapshot_and_wait_does_not_stop_the_monitor(pool, monkeypatch):
    a = pool.start(replace(LONG, seed=1), "alice")
    b = pool.start(replace(LONG, seed=2), "bob")
    wait_until(lambda: a.step > 0 and b.step > 0, what="both training")
    real_wait, in_gap, go_on, armed = monitor.wait, threading.Event(), threading.Event(), [True]

    def slow_wait(conns, timeout=None):  # the monitor holds its snapshot while the test closes one
        if armed[0]:
            armed[0] = False
            in_gap.set()
            go_on.wait(10)
        return real_wait(conns, timeout)

    monkeypatch.setattr(monitor, "wait", slow_wait)
    assert in_gap.wait(10)
    a_conn = conn_of(a)
    pool.discard(a)  # reset: on the old code this closed a's connection under the monitor
    a_conn.close()  # ... and so does anything else that closes it
    go_on.set()
    step = b.step
    wait_until(lambda: b.step > step + 5, 30, "bob's run to go on streaming")
    pool.stop(b)
    assert b.status == RunStatus.STOPPED and b.result is not None
    assert a.status == RunStatus.CANCELLED and not alive(a.pid)


@pytest.mark.worker
def test_the_monitor_survives_an_exception_in_a_round(pool, monkeypatch):
    run = pool.start(LONG, "alice")
    wait_until(lambda: run.step > 0, what="training")
    real, failed = pool._check_health, []

    def boom_once(now):
        if not failed:
            failed.append(now)
            raise RuntimeError("a bug in one round")
        return real(now)

    monkeypatch.setattr(pool, "_check_health", boom_once)
    wait_until(lambda: failed, what="the failing round")
    step = run.step
    wait_until(lambda: run.step > step + 5, 30, "the run to go on streaming")
    pool.stop(run)
    assert run.status == RunStatus.STOPPED


@pytest.mark.worker
@pytest.mark.app
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the monitor is made to die
def test_a_dead_monitor_is_started_again_on_the_next_script_run(monkeypatch):
    from ui.training import run_pool

    at = open_app("app_pages/train.py")
    pool = run_pool()
    monitor = pool._monitor
    assert monitor is not None and monitor.is_alive()

    def die(now):
        raise SystemExit  # not an Exception: the thread ends

    monkeypatch.setattr(pool, "_check_health", die)
    wait_until(lambda: not monitor.is_alive(), 10, "the monitor to die")
    monkeypatch.delattr(pool, "_check_health")
    at.run()
    assert not at.exception, at.exception
    assert pool._monitor is not monitor and pool._monitor.is_alive(), "the script run did not restart it"
    run = pool.start(replace(TINY, steps=3, seed=21), "restart-check")
    wait_until(lambda: run.ended.is_set(), what="a run on the new monitor")
    assert run.status == RunStatus.FINISHED


@pytest.mark.worker
def test_nothing_slow_runs_under_the_pool_lock(pool, monkeypatch):
    """Starting a process, reading a checkpoint back and joining a process happen outside the lock."""
    held = []
    real_start, real_read, real_join = worker.start, monitor.read_checkpoint, multiprocessing.process.BaseProcess.join

    def watch(name, fn):
        def wrapped(*args, **kwargs):
            if pool._lock._is_owned():
                held.append(name)
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(worker, "start", watch("process start", real_start))
    monkeypatch.setattr(monitor, "read_checkpoint", watch("read_checkpoint", real_read))
    monkeypatch.setattr(live_run, "read_checkpoint", watch("read_checkpoint", real_read))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "join", watch("join", real_join))
    done = pool.start(replace(TINY, steps=3), "alice")
    wait_until(lambda: done.ended.is_set(), what="a short run")
    assert done.status == RunStatus.FINISHED and done.result is not None
    long = pool.start(LONG, "bob")
    wait_until(lambda: long.step > 0, what="training")
    pool.discard(long)
    assert not alive(long.pid)
    assert held == []


@pytest.mark.worker
def test_a_session_holds_one_training_slot_while_others_wait(pool):
    own = pool.start(replace(LONG, seed=1), "alice")
    wait_until(lambda: own.step > 0, what="alice training")
    seeds = pool.start(replace(LONG, seed=2), "alice|seeds")  # her several-seeds run: same session
    bob = pool.start(replace(LONG, seed=3), "bob")
    wait_until(lambda: bob.step > 0, what="bob training in the free slot")
    assert seeds.status == RunStatus.WAITING and seeds.step == 0 and pool.running() == 2
    pool.discard(bob)
    assert seeds.status == RunStatus.WAITING and seeds.blocked, "a free slot, but alice already holds one"
    pool.discard(own)
    wait_until(lambda: seeds.step > 0, what="alice's seeds once her own run ended")
    assert pool.running() == 1


# -- identical runs computed once ---------------------------------------------------------------


@pytest.mark.worker
def test_two_sessions_with_the_same_settings_share_one_training_and_a_private_run_matches(pool):
    alice = pool.start(TINY, "alice")
    bob = pool.start(TINY, "bob")
    private = pool.start(TINY, "carol", private=True)  # "Train my own copy"
    assert bob.shared == "live" and alice.shared is None and private.shared is None
    assert pool.trainings() == 2
    for run in (alice, bob, private):
        wait_until(lambda run=run: run.ended.is_set(), what="the runs to finish")
        assert run.status == RunStatus.FINISHED and run.step == TINY.steps
    assert alice.pid == bob.pid != private.pid, "bob follows alice's worker; carol's copy has its own"
    assert alice.result[0] is not bob.result[0], "each session gets its own model object"
    assert same_weights(alice.result[0], bob.result[0])
    assert same_weights(alice.result[0], private.result[0])
    assert same_weights(alice.result[0], reference(TINY).model)
    assert [r["loss_later_copies"] for r in alice.history()] == [r["loss_later_copies"] for r in bob.history()]
    # a session that starts the same run later gets the finished one at once
    late = pool.start(TINY, "dan")
    assert late.ended.is_set() and late.status == "finished" and late.shared == "finished"
    assert late.step == TINY.steps and same_weights(late.result[0], alice.result[0])


@pytest.mark.worker
def test_another_seed_or_setting_trains_apart(pool):
    a = pool.start(replace(LONG, seed=5), "alice")
    b = pool.start(replace(LONG, seed=6), "bob")
    c = pool.start(replace(LONG, seed=5, lr=LONG.lr / 2), "carol")
    d = pool.start(replace(LONG, seed=5), "dan")
    assert (a.shared, b.shared, c.shared, d.shared) == (None, None, None, "live")
    assert pool.trainings() == 3
    wait_until(lambda: a.step > 0 and b.step > 0, what="two trainings")
    assert a.pid == d.pid and b.pid != a.pid and c.status == RunStatus.WAITING


@pytest.mark.worker
def test_stop_in_a_shared_training_keeps_that_step_and_the_others_train_on(pool):
    alice, bob = pool.start(LONG, "alice"), pool.start(LONG, "bob")
    wait_until(lambda: alice.step >= 10, what="training")
    pool.stop(alice)
    assert alice.status == RunStatus.STOPPED and bob.active and pool.trainings() == 1
    stopped_at = alice.step
    wait_until(lambda: bob.step > stopped_at + 10, what="bob's run to go on")
    pool.stop(bob)  # the last follower: the worker stops
    assert bob.status == RunStatus.STOPPED and not alive(bob.pid) and pool.trainings() == 0
    trainer = reference(LONG, stopped_at)
    assert alice.result[1]["history"][-1]["step"] == stopped_at
    assert same_weights(alice.result[0], trainer.model), "alice's model is the training's at her step"
    trainer.run(bob.step - stopped_at)
    assert same_weights(bob.result[0], trainer.model), "handing alice her model did not change bob's run"


def test_the_run_key_names_every_setting_and_the_code():
    key = live_run.run_key(TINY, 1)
    assert key == live_run.run_key(replace(TINY), 1)
    assert key != live_run.run_key(TINY, 2)
    for change in (dict(seed=1), dict(lr=TINY.lr * 2), dict(steps=31), dict(knockout=(0, 1)),
                   dict(shared_embedding=False)):
        assert live_run.run_key(replace(TINY, **change), 1) != key, change
    assert len(live_run.code_version()) == 16


def _tiny_settings(at) -> None:
    at.slider(key="tr_layers").set_value(1)
    at.slider(key="tr_periods").set_value((4, 8))
    at.slider(key="tr_seq_len").set_value(24)
    at.select_slider(key="tr_batch").set_value(4)
    at.number_input(key="tr_steps").set_value(30)
    at.number_input(key="tr_seed").set_value(77)
    at.run()
    assert not at.exception, at.exception


def _until_done(at, timeout: float = 120):
    wait_until(lambda: not at.session_state["train_run"].active, timeout, "the run to end")
    at.run()
    at.run()  # the run after the one that saw it end: the model is registered and picked
    assert not at.exception, at.exception
    return at.session_state["train_run"]


@pytest.mark.app
def test_the_train_page_says_it_follows_another_sessions_run_and_trains_a_copy_on_request():
    alice, bob = open_app("app_pages/train.py"), open_app("app_pages/train.py")
    _tiny_settings(alice)
    _tiny_settings(bob)
    alice.button(key="tr_train").click().run()
    bob.button(key="tr_train").click().run()
    a, b = alice.session_state["train_run"], bob.session_state["train_run"]
    assert b.shared and a.pid == b.pid
    assert not [i for i in alice.info if "already" in i.value]
    notes = [i.value for i in bob.info if "already" in i.value and "this seed" in i.value]
    assert len(notes) == 1, [i.value for i in bob.info]
    assert bob.button(key="tr_seeds_start").disabled, "one training slot per session: the seeds wait"
    bob.button(key="tr_own_copy").click().run()
    assert not bob.exception, bob.exception
    own = bob.session_state["train_run"]
    assert own is not b and own.shared is None and own.private and b.status == "cancelled"
    a, own = _until_done(alice), _until_done(bob)
    assert a.status == own.status == RunStatus.FINISHED and a.pid != own.pid
    assert same_weights(a.result[0], own.result[0])
    assert not [i for i in bob.info if "already" in i.value]
    assert own.registered_key in bob.session_state["lab_models"]


@pytest.mark.worker
def test_stop_before_a_shared_training_started_takes_only_that_follower_off():
    pool = RunPool(capacity=0)  # training switched off: everything waits
    try:
        alice, bob = pool.start(TINY, "alice"), pool.start(TINY, "bob")
        assert bob.shared == "live" and alice.status == bob.status == "waiting"
        pool.stop(alice)
        assert alice.status == RunStatus.CANCELLED and bob.status == RunStatus.WAITING and pool.trainings() == 1
        pool.stop(bob)
        assert bob.status == RunStatus.CANCELLED and pool.trainings() == 0
    finally:
        pool.shutdown()
