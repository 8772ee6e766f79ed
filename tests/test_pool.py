"""A training pool that cannot freeze, and identical runs computed once (core.pool.runs).

The monitor outlives a connection closed between its snapshot and wait() and any exception in a
round; a monitor that died is started again on the next script run, one stuck in a round is replaced
and acts on nothing once it wakes; a worker start that stalls ends only its own run; two Stops at
once write one command at a time; nothing slow runs under the pool lock; a session holds one
training slot while others wait; two sessions with the same settings share one worker, whose model
is bit-identical to a private run; another seed or setting, and "Train my own copy", train apart.

The pools here run their workers as threads (core.pool.backend.ThreadBackend: the same worker loop);
the `worker`-marked test uses the app's real pool of processes."""
from __future__ import annotations

import threading
import time
from multiprocessing import connection
from pathlib import Path

import pytest
import torch
from test_runs import gone, thread_pool, wait_until

import core.pool.backend as backend
import core.pool.live_run as live_run
import core.pool.runs as runs
from core.pool.backend import ThreadBackend
from core.pool.status import RunStatus
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

from helpers import open_app

TINY = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=30)
LONG = TINY.with_settings(steps=100_000)


@pytest.fixture
def pool():
    p = thread_pool()
    yield p
    p.shutdown()


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def reference(settings: RunConfig, steps: int | None = None):
    """The same run trained here (one torch thread, as in the workers)."""
    trainer = Trainer(*settings.configs())
    trainer.run(settings.train.steps if steps is None else steps)
    return trainer


# -- a pool that cannot freeze ------------------------------------------------------------------


def test_a_connection_closed_between_the_snapshot_and_wait_does_not_stop_the_monitor(pool, monkeypatch):
    a = pool.start(LONG.with_settings(seed=1), "alice")
    b = pool.start(LONG.with_settings(seed=2), "bob")
    wait_until(lambda: a.step > 0 and b.step > 0, what="both training")
    real_wait, in_gap, go_on, armed = backend.wait_any, threading.Event(), threading.Event(), [True]

    def slow_wait(conns, timeout=None):  # the monitor holds its snapshot while the test closes one
        if armed[0]:
            armed[0] = False
            in_gap.set()
            go_on.wait(10)
        return real_wait(conns, timeout)

    monkeypatch.setattr(backend, "wait_any", slow_wait)
    assert in_gap.wait(10)
    a_handle = a.source.handle
    pool.discard(a)  # reset must not close a's connection under the monitor
    a_handle.close()  # ... and so does anything else that closes it
    go_on.set()
    step = b.step
    wait_until(lambda: b.step > step + 5, 30, "bob's run to go on streaming")
    pool.stop(b)
    assert b.status == RunStatus.STOPPED and b.result is not None
    assert a.status == RunStatus.CANCELLED and gone(pool, a)


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


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the monitor is made to die
def test_a_dead_monitor_is_started_again_by_ensure_monitor(pool, monkeypatch):
    run = pool.start(LONG, "alice")
    wait_until(lambda: run.step > 0, what="training")
    dead = pool.monitor.thread

    def die(now):
        raise SystemExit  # not an Exception: the thread ends

    monkeypatch.setattr(pool, "_check_health", die)
    wait_until(lambda: not dead.is_alive(), 10, "the monitor to die")
    monkeypatch.delattr(pool, "_check_health")
    step = run.step
    time.sleep(0.3)
    assert run.step == step, "nothing reads the worker while no monitor runs"
    assert pool.ensure_monitor() and pool.monitor_restarts == 1 and pool.monitor.thread is not dead
    assert not pool.ensure_monitor(), "a running monitor is left alone"
    wait_until(lambda: run.step > step + 5, 30, "the run to go on streaming under the new monitor")
    pool.stop(run)
    assert run.status == RunStatus.STOPPED


@pytest.mark.worker
@pytest.mark.app
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the monitor is made to die
def test_a_dead_monitor_is_started_again_on_the_next_script_run(monkeypatch):
    from ui.training import run_pool

    at = open_app("app_pages/train.py")
    pool = run_pool()  # the page makes its pool on first use (a press on Train); from then on every run checks
    at.run()
    monitor = pool.monitor.thread
    assert monitor is not None and monitor.is_alive()

    def die(now):
        raise SystemExit  # not an Exception: the thread ends

    monkeypatch.setattr(pool, "_check_health", die)
    wait_until(lambda: not monitor.is_alive(), 10, "the monitor to die")
    monkeypatch.delattr(pool, "_check_health")
    at.run()
    assert not at.exception, at.exception
    assert pool.monitor.thread is not monitor and pool.monitor.alive(), "the script run did not restart it"
    run = pool.start(TINY.with_settings(steps=3, seed=21), "restart-check")
    wait_until(lambda: run.ended.is_set(), what="a run on the new monitor")
    assert run.status == RunStatus.FINISHED


class OwnedLock:
    """A plain Lock that knows which thread holds it (threading.Lock does not say)."""

    def __init__(self):
        self._lock, self.owner = threading.Lock(), None

    def __enter__(self):
        self._lock.acquire()
        self.owner = threading.get_ident()

    def __exit__(self, *exc):
        self.owner = None
        self._lock.release()

    def held_here(self) -> bool:
        return self.owner == threading.get_ident()


def test_nothing_slow_runs_under_the_pool_lock(pool, monkeypatch):
    """Starting a worker, reading a checkpoint back and joining a worker happen outside the lock."""
    held, lock = [], OwnedLock()
    pool._lock = lock
    from core.model import checkpoints  # the pool reads a checkpoint back from here, at a run's end (lazily)

    real_start, real_read, real_join = pool.backend.start, checkpoints.read_checkpoint, backend.ThreadHandle.join

    def watch(name, fn):
        def wrapped(*args, **kwargs):
            if lock.held_here():
                held.append(name)
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(pool.backend, "start", watch("worker start", real_start))
    monkeypatch.setattr(checkpoints, "read_checkpoint", watch("read_checkpoint", real_read))
    monkeypatch.setattr(backend.ThreadHandle, "join", watch("join", real_join))
    done = pool.start(TINY.with_settings(steps=3), "alice")
    wait_until(lambda: done.ended.is_set(), what="a short run")
    assert done.status == RunStatus.FINISHED and done.result is not None
    long = pool.start(LONG, "bob")
    wait_until(lambda: long.step > 0, what="training")
    pool.discard(long)
    assert gone(pool, long)
    assert held == []


def test_a_session_holds_one_training_slot_while_others_wait(pool):
    own = pool.start(LONG.with_settings(seed=1), "alice")
    wait_until(lambda: own.step > 0, what="alice training")
    seeds = pool.start(LONG.with_settings(seed=2), "alice|seeds")  # her several-seeds run: same session
    bob = pool.start(LONG.with_settings(seed=3), "bob")
    wait_until(lambda: bob.step > 0, what="bob training in the free slot")
    assert seeds.status == RunStatus.WAITING and seeds.step == 0 and pool.running() == 2
    pool.discard(bob)
    assert seeds.status == RunStatus.WAITING and seeds.blocked, "a free slot, but alice already holds one"
    pool.discard(own)
    wait_until(lambda: seeds.step > 0, what="alice's seeds once her own run ended")
    assert pool.running() == 1


# -- identical runs computed once ---------------------------------------------------------------


def test_two_sessions_with_the_same_settings_share_one_training_and_a_private_run_matches(pool):
    alice = pool.start(TINY, "alice")
    bob = pool.start(TINY, "bob")
    private = pool.start(TINY, "carol", private=True)  # "Train my own copy"
    assert bob.shared == "live" and alice.shared is None and private.shared is None
    assert pool.trainings() == 2
    for run in (alice, bob, private):
        wait_until(lambda run=run: run.ended.is_set(), what="the runs to finish")
        assert run.status == RunStatus.FINISHED and run.step == TINY.train.steps
    assert alice.pid == bob.pid != private.pid, "bob follows alice's worker; carol's copy has its own"
    assert alice.result[0] is not bob.result[0], "each session gets its own model object"
    assert same_weights(alice.result[0], bob.result[0])
    assert same_weights(alice.result[0], private.result[0])
    assert same_weights(alice.result[0], reference(TINY).model)
    assert [r["loss_later_copies"] for r in alice.history()] == [r["loss_later_copies"] for r in bob.history()]
    # a session that starts the same run later gets the finished one at once
    late = pool.start(TINY, "dan")
    assert late.ended.is_set() and late.status == "finished" and late.shared == "finished"
    assert late.step == TINY.train.steps and same_weights(late.result[0], alice.result[0])


def test_another_seed_or_setting_trains_apart(pool):
    a = pool.start(LONG.with_settings(seed=5), "alice")
    b = pool.start(LONG.with_settings(seed=6), "bob")
    c = pool.start(LONG.with_settings(seed=5, lr=LONG.train.lr / 2), "carol")
    d = pool.start(LONG.with_settings(seed=5), "dan")
    assert (a.shared, b.shared, c.shared, d.shared) == (None, None, None, "live")
    assert pool.trainings() == 3
    wait_until(lambda: a.step > 0 and b.step > 0, what="two trainings")
    assert a.pid == d.pid and b.pid != a.pid and c.status == RunStatus.WAITING


def test_stop_in_a_shared_training_keeps_that_step_and_the_others_train_on(pool):
    alice, bob = pool.start(LONG, "alice"), pool.start(LONG, "bob")
    wait_until(lambda: alice.step >= 10, what="training")
    pool.stop(alice)
    assert alice.status == RunStatus.STOPPED and bob.active and pool.trainings() == 1
    stopped_at = alice.step
    wait_until(lambda: bob.step > stopped_at + 10, what="bob's run to go on")
    pool.stop(bob)  # the last follower: the worker stops
    assert bob.status == RunStatus.STOPPED and gone(pool, bob) and pool.trainings() == 0
    trainer = reference(LONG, stopped_at)
    assert alice.result[1]["history"][-1]["step"] == stopped_at
    assert same_weights(alice.result[0], trainer.model), "alice's model is the training's at her step"
    trainer.run(bob.step - stopped_at)
    assert same_weights(bob.result[0], trainer.model), "handing alice her model did not change bob's run"


def test_the_run_key_names_every_setting_and_the_code():
    key = live_run.run_key(TINY, 1)
    assert key == live_run.run_key(TINY, 1)
    assert key != live_run.run_key(TINY, 2)
    for change in (dict(seed=1), dict(lr=TINY.train.lr * 2), dict(steps=31), dict(knockout="1.2"),
                   dict(shared_embedding=False)):
        assert live_run.run_key(TINY.with_settings(**change), 1) != key, change
    assert len(live_run.code_version()) == 16


def test_the_code_version_names_the_attention_kernel_and_its_source(monkeypatch):
    """The compiled attention's floats are not the eager kernel's: a table or a shared run made with one is not
    the other's, so the kernel a process trains with, and the C++ source, are part of the code version."""
    import core.pool.live_run as lr
    from core.model import attention, attention_cpp

    versions = {}
    for kernel in ("eager", "cpp"):
        monkeypatch.setenv(attention_cpp.ENV_SWITCH, kernel)
        monkeypatch.setattr(attention_cpp, "_compiler", lambda: "/usr/bin/g++")
        lr.code_version.cache_clear()
        versions[attention.kernel_choice().kernel] = lr.code_version()
    lr.code_version.cache_clear()
    assert set(versions) == {"eager", "compiled"} and versions["eager"] != versions["compiled"]
    cpp = Path(attention_cpp.__file__).with_name("causal_attention.cpp")
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda p: real(p) + (b"// changed" if p == cpp else b""))
    assert lr.code_version() != versions["compiled"]
    lr.code_version.cache_clear()


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
    for at in (alice, bob):  # long enough to outlast Bob's two renders below (30 steps ended before them once)
        _tiny_settings(at)
        at.number_input(key="tr_steps").set_value(1500).run()
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


def test_stop_before_a_shared_training_started_takes_only_that_follower_off():
    pool = thread_pool(capacity=0)  # training switched off: everything waits
    try:
        alice, bob = pool.start(TINY, "alice"), pool.start(TINY, "bob")
        assert bob.shared == "live" and alice.status == bob.status == "waiting"
        pool.stop(alice)
        assert alice.status == RunStatus.CANCELLED and bob.status == RunStatus.WAITING and pool.trainings() == 1
        pool.stop(bob)
        assert bob.status == RunStatus.CANCELLED and pool.trainings() == 0
    finally:
        pool.shutdown()


# -- a stuck monitor, two Stops at once ---------------------------------------------------------


def test_a_stuck_monitor_is_replaced_and_the_stale_one_changes_nothing():
    """A round that never finishes (here: is_alive blocks) stops every run's rows; ensure_monitor()
    must see it by its heartbeat, start a new monitor, and the old one, once it wakes, must not act
    on what it saw (here: 'alice is gone', which would end her run)."""
    armed, blocked, release = [True], threading.Event(), threading.Event()

    def is_alive(owner):
        if armed[0]:
            armed[0] = False
            blocked.set()
            release.wait(60)
            return False  # a stale answer: acting on it would end alice's run
        return True

    pool = thread_pool(is_alive=is_alive, owner_grace=0.0, stuck_seconds=0.5)
    try:
        run = pool.start(LONG, "alice")
        assert blocked.wait(30), "the monitor never asked is_alive"
        stale = pool.monitor.thread
        time.sleep(1.0)
        step = run.step
        assert pool.ensure_monitor() and pool.monitor_restarts == 1  # what every script run does
        wait_until(lambda: run.step > step + 5, 30, "alice's rows to go on under a new monitor")
        release.set()
        time.sleep(0.5)
        assert run.active and run.status == RunStatus.RUNNING, "the stale monitor ended alice's run"
        assert not stale.is_alive(), "the stale monitor ends once it wakes"
        step = run.step
        wait_until(lambda: run.step > step + 5, 30, "alice's rows to go on after the stale round woke")
        pool.stop(run)
        assert run.status == RunStatus.STOPPED and run.result is not None
    finally:
        release.set()
        pool.shutdown()


def test_two_followers_pressing_stop_at_once_never_write_to_one_connection_together(pool, monkeypatch):
    alice, bob, carol = (pool.start(LONG, who) for who in ("alice", "bob", "carol"))
    wait_until(lambda: alice.step >= 5, what="training")
    inside, overlaps, real_send = {}, [], connection._ConnectionBase.send

    def send(conn, obj):  # a slow command write, so two at once would overlap
        if not (isinstance(obj, tuple) and obj and obj[0] in ("stop", "keep")):
            return real_send(conn, obj)
        if inside.setdefault(id(conn), 0):
            overlaps.append(obj)
        inside[id(conn)] += 1
        try:
            time.sleep(0.2)
            return real_send(conn, obj)
        finally:
            inside[id(conn)] -= 1

    monkeypatch.setattr(connection._ConnectionBase, "send", send)
    barrier = threading.Barrier(2)

    def press(run):
        barrier.wait()
        pool.stop(run, wait_seconds=10)

    presses = [threading.Thread(target=press, args=(r,)) for r in (alice, bob)]
    for t in presses:
        t.start()
    for t in presses:
        t.join(30)
    assert overlaps == [], "two Stops wrote to one connection at the same time"
    assert alice.status == bob.status == RunStatus.STOPPED and carol.active
    assert alice.result is not None and bob.result is not None
    pool.stop(carol)
    assert carol.status == RunStatus.STOPPED


class StallingBackend(ThreadBackend):
    """Threads, but the start of a seed-1 training stalls until released."""

    def __init__(self):
        super().__init__()
        self.stalled, self.release = threading.Event(), threading.Event()

    def start(self, settings, threads, name):
        if settings.train.seed == 1:
            self.stalled.set()
            self.release.wait(60)
        return super().start(settings, threads, name)


def test_a_worker_start_that_stalls_ends_only_its_own_run_with_a_sentence():
    """Starts leave the caller and the monitor: a stalled one holds up nobody, and past its deadline
    its run fails with a sentence; the worker that starts late after all is killed."""
    slow = StallingBackend()
    pool = thread_pool(backend=slow, start_seconds=1.0)
    try:
        stuck = pool.start(LONG.with_settings(seed=1), "alice")
        assert stuck.status == RunStatus.STARTING, "start() returns while the worker starts"
        assert slow.stalled.wait(10)
        other = pool.start(LONG.with_settings(seed=2), "bob")
        wait_until(lambda: other.step > 5, what="bob's run to train while alice's start stalls")
        wait_until(lambda: stuck.ended.is_set(), 10, "the stalled start to pass its deadline")
        assert stuck.status == RunStatus.FAILED and "had not started 1 s after it got its slot" in stuck.error
        assert other.active and pool.running() == 1
        slow.release.set()
        wait_until(lambda: len(slow.started) == 2, 10, "the late start to finish")
        late = next(h for h in slow.started if h.pid != other.pid)
        wait_until(lambda: not late.alive(), 10, "the late worker to be killed")
        step = other.step
        wait_until(lambda: other.step > step + 5, 30, "bob's run to go on")
        pool.stop(other)
        assert other.status == RunStatus.STOPPED and other.result is not None
    finally:
        slow.release.set()
        pool.shutdown()


def test_a_sessions_ended_runs_and_their_models_are_released_when_the_session_lets_go(pool):
    """Once a run has ended, the pool holds nothing of it but the finished key's checkpoint
    bytes (core.pool.finished, for identical runs): the LiveRun, its model and its follower list go with
    the session's last reference (st.session_state), finished or failed with its last logged model alike."""
    import gc
    import weakref

    def ended(settings, owner, how):
        run = pool.start(settings, owner)
        if how == "finished":
            wait_until(lambda: run.ended.is_set(), 30, "the run to finish")
        else:
            wait_until(lambda: run.source.saved is not None, 30, "the run's first saved log")
            next(h for h in pool.backend.started if h.pid == run.pid).kill()
            wait_until(lambda: run.ended.is_set(), 10, "the pool to notice")
        model = run.result[0]
        assert model is not None and run.status == how, (run.status, run.error)
        return weakref.ref(run), weakref.ref(model), weakref.ref(run.source)

    refs = [ended(TINY.with_settings(seed=1), "alice|1", "finished"),
            ended(LONG.with_settings(seed=3), "carol|1", "failed")]
    gc.collect()
    assert [[r() is None for r in three] for three in refs] == [[True] * 3] * 2
    assert pool.runs_of("alice|1") == pool.runs_of("carol|1") == [] and pool.trainings() == 0
    again = pool.start(TINY.with_settings(seed=1), "dave|1")  # the finished key is still handed back at once
    assert again.shared == "finished" and again.result is not None


class RestingThreadBackend(ThreadBackend):
    def __init__(self):
        super().__init__()
        self.rested = []

    def rest(self) -> bool:
        self.rested.append(len(self.started))
        return True


def test_the_backend_rests_once_per_idle_spell_and_trains_again_after():
    """Nothing training or waiting for rest_seconds lets the backend rest (the process
    backend stops its forkserver), once, and never while a training runs."""
    pool = thread_pool(backend=RestingThreadBackend(), rest_seconds=0.1)
    try:
        run = pool.start(LONG.with_settings(seed=5), "alice")
        wait_until(lambda: run.step > 3, what="training")
        time.sleep(0.3)
        assert pool.backend.rested == []  # never while it trains
        pool.discard(run)
        wait_until(lambda: pool.backend.rested == [1], 10, "a rest after the run")
        time.sleep(0.3)
        assert pool.backend.rested == [1] and pool.rests == 1  # once per idle spell
        again = pool.start(TINY.with_settings(seed=6), "alice")
        wait_until(lambda: again.ended.is_set(), 30, "a run after the rest")
        assert again.status == RunStatus.FINISHED
        wait_until(lambda: pool.backend.rested == [1, 2], 10, "a rest after the second run")
    finally:
        pool.shutdown()


@pytest.mark.worker
def test_an_idle_pool_stops_its_forkserver_and_the_next_training_starts_a_new_one():
    from multiprocessing import forkserver

    from test_runs import alive

    pool = runs.RunPool(1, rest_seconds=0.5)
    try:
        first = pool.start(TINY.with_settings(steps=3), "alice")
        wait_until(lambda: first.ended.is_set(), 120, "the first run")
        server = forkserver._forkserver._forkserver_pid
        assert first.status == RunStatus.FINISHED and server is not None and alive(server)
        wait_until(lambda: pool.rests == 1, 30, "the idle pool to stop its forkserver")
        assert not alive(server) and forkserver._forkserver._forkserver_pid is None
        again = pool.start(TINY.with_settings(steps=3, seed=9), "alice")
        wait_until(lambda: again.ended.is_set(), 120, "a run after the rest")
        assert again.status == RunStatus.FINISHED and alive(forkserver._forkserver._forkserver_pid)
    finally:
        pool.shutdown()
