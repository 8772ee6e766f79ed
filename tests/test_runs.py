"""Trainings in workers (core.pool.runs, core.pool.worker): rows stream in, Stop keeps the model of the
last finished step, a dead or silent worker gives a sentence, owners' runs end with their sessions,
the limit and one thread per worker, and no worker outlives its server (tests/test_pool.py: a pool that
cannot freeze, shared runs).

Most tests run the pool on core.pool.backend.ThreadBackend (the same worker loop and messages, in a
thread: the fast tier); the `worker`-marked ones start real processes (forkserver, a SIGKILL, a
SIGSTOP, a server that dies)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from core.pool.backend import ThreadBackend
from core.pool.runs import RunPool
from core.pool.status import RunStatus
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

from helpers import ROOT

TINY = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=5000)


def wait_until(predicate, timeout: float = 60, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def gone(pool: RunPool, run) -> bool:
    """The run's worker has ended: a process that is gone (or a zombie), a thread that returned."""
    if isinstance(pool.backend, ThreadBackend):
        return not any(h.alive() for h in pool.backend.started if h.pid == run.pid)
    return not alive(run.pid)


def thread_pool(**kwargs) -> RunPool:
    """A pool whose workers are threads of this process (one torch thread each, as here)."""
    return RunPool(**{"capacity": 2, "owner_grace": 0.3, "backend": ThreadBackend(), **kwargs})


@pytest.fixture
def pool():
    p = thread_pool()
    yield p
    p.shutdown()


@pytest.fixture
def process_pool():
    p = RunPool(capacity=2, owner_grace=0.3)  # one torch thread per worker process, as in this process
    yield p
    p.shutdown()


@pytest.fixture(params=["threads", pytest.param("processes", marks=pytest.mark.worker)])
def either_pool(request):
    """The same test on both backends: the seam's contract."""
    p = thread_pool() if request.param == "threads" else RunPool(capacity=2, owner_grace=0.3)
    yield p
    p.shutdown()


def test_rows_stream_stop_within_half_a_second_and_the_model_of_that_step_comes_back(either_pool):
    pool = either_pool
    run = pool.start(TINY, "alice")  # one torch thread in the worker, as here: the reference below is bit-exact
    wait_until(lambda: len(run.rows) >= 3 and run.step >= 60, what="three logged rows")
    assert run.active and run.status == RunStatus.RUNNING
    assert [r["step"] for r in run.rows[:3]] == [0, 25, 50], "rows arrive once each, in order"
    assert run.worker_threads == 1
    t0 = time.perf_counter()
    pool.stop(run)
    took = time.perf_counter() - t0
    assert run.status == RunStatus.STOPPED and took < 0.5, f"Stop took {took:.2f} s"
    assert gone(pool, run), "the worker must end with its run"
    model, info, data = run.result
    steps = run.step
    assert 60 <= steps < TINY.train.steps and info["train"]["steps_done"] == steps
    assert info["history"][-1]["step"] == steps
    # The same settings trained here to the same step give the very same weights.
    reference = Trainer(*TINY.configs())
    reference.run(steps)
    for name, w in reference.model.state_dict().items():
        assert torch.equal(model.state_dict()[name], w), name
    logged = [r for r in reference.history if r["step"] <= run.rows[-1]["step"]]
    assert [r["loss_later_copies"] for r in run.rows] == [r["loss_later_copies"] for r in logged]
    assert data[:2] == b"PK", "the downloadable file is a torch checkpoint"
    # Stop kept the model: the run stays ended, the slot is free.
    time.sleep(0.3)
    assert run.step == steps and pool.running() == 0


def test_a_run_that_finishes_hands_back_its_checkpoint_with_the_full_history(pool):
    run = pool.start(TINY.with_settings(steps=30), "alice")
    assert wait_until(lambda: run.ended.is_set(), what="the run to finish")
    assert run.status == RunStatus.FINISHED and run.step == 30
    model, info, _ = run.result
    assert [r["step"] for r in info["history"]] == [0, 25, 30]
    assert info["config"].n_layers == 1 and info["task"].period_max == 8
    assert not model.training


def test_a_worker_run_brings_back_its_snapshots_and_its_training_experiments(pool):
    """The worker hands back the trainer's own checkpoint, so the snapshots (checkpoint format v2)
    and the experiments (core.training.interventions) travel with it: the same as the same run trained here."""
    settings = TINY.with_settings(n_layers=2, steps=40, hold="1.1", knockout="2.4")
    run = pool.start(settings, "alice")
    assert wait_until(lambda: run.ended.is_set(), what="the run to finish")
    assert run.status == RunStatus.FINISHED and run.step == 40, run.error
    model, info, _ = run.result
    reference = Trainer(*settings.configs())
    reference.run(40)
    expected = reference.checkpoint_fields()["snapshots"]
    assert [s["step"] for s in info["snapshots"]] == [s["step"] for s in expected] == [0, 10, 20, 30]
    for got, want in zip(info["snapshots"], expected):
        for name, w in want["state_dict"].items():
            assert torch.equal(got["state_dict"][name], w), (got["step"], name)
    assert torch.count_nonzero(model.blocks[1].W_O[3]) == 0, "the knocked-out head writes nothing"
    assert model.held_head == 0, "the hold is part of the kept model"
    assert list(model.standing) == ["blocks.0.attn.hook_pattern"]
    train = info["train"]
    assert (train["hold"], train["knockout"]) == ("1.1", "2.4")


@pytest.mark.worker
def test_a_killed_worker_ends_its_run_with_a_sentence_and_frees_the_slot(process_pool):
    pool = process_pool
    run = pool.start(TINY, "alice")
    wait_until(lambda: run.step > 5, what="training")
    os.kill(run.pid, signal.SIGKILL)
    wait_until(lambda: run.ended.is_set(), 10, "the pool to notice")
    assert run.status == RunStatus.FAILED and "killed by signal 9" in run.error and "press Train" in run.error
    # a kill after the first logged step keeps that step's model (tests/test_faults.py)
    assert (run.result is None) == (run.step < run.train_cfg.log_every) and pool.running() == 0
    again = pool.start(TINY.with_settings(steps=3), "alice")  # the pool still works
    wait_until(lambda: again.ended.is_set(), what="a new run")
    assert again.status == RunStatus.FINISHED


def test_a_worker_killed_through_its_handle_ends_its_run_with_the_handles_exit_reason(pool):
    """The thread backend's kill (a flag read between steps) is seen as a process kill is: no "done",
    the worker gone, and the handle's exit reason in the sentence."""
    run = pool.start(TINY, "alice")
    wait_until(lambda: run.step > 5, what="training")
    (handle,) = [h for h in pool.backend.started if h.pid == run.pid]
    handle.kill()
    wait_until(lambda: run.ended.is_set(), 10, "the pool to notice")
    assert run.status == RunStatus.FAILED and "The training process was killed at step" in run.error
    assert "press Train" in run.error and pool.running() == 0 and gone(pool, run)
    assert (run.result is None) == (run.step < run.train_cfg.log_every)  # kept from the first log on (test_faults)


@pytest.mark.worker
def test_a_silent_worker_is_ended_after_hang_seconds(process_pool):
    pool = process_pool
    run = pool.start(TINY, "alice")
    wait_until(lambda: run.step > 5, what="training")
    pool.hang_seconds = 1.0
    pid = run.pid
    os.kill(pid, signal.SIGSTOP)  # a real hang: the process exists and sends nothing
    try:
        wait_until(lambda: run.ended.is_set(), 10, "the pool to give up on the worker")
        assert run.status == RunStatus.FAILED and "sent nothing for 1 s" in run.error
        wait_until(lambda: not alive(pid), 5, "the hung worker to be killed")
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_reset_retrain_and_a_gone_session_end_the_worker():
    sessions = {"alice", "bob"}
    pool = thread_pool(is_alive=lambda owner: owner in sessions)
    try:
        first = pool.start(TINY, "alice")
        wait_until(lambda: first.step > 0, what="alice training")
        second = pool.start(TINY, "alice")  # train again: the first run's worker ends
        assert first.status == RunStatus.CANCELLED and gone(pool, first)
        wait_until(lambda: second.step > 0, what="alice's second run")
        pool.discard(second)  # reset
        assert gone(pool, second) and pool.running() == 0
        bob = pool.start(TINY, "bob")
        wait_until(lambda: bob.step > 0, what="bob training")
        sessions.discard("bob")  # bob closed his tab
        wait_until(lambda: bob.ended.is_set(), 10, "bob's run to end with his session")
        assert bob.status == RunStatus.CANCELLED
        wait_until(lambda: gone(pool, bob), 10, "bob's worker to be killed")
    finally:
        pool.shutdown()


def test_the_limit_makes_runs_wait_in_order_on_one_thread_each(pool):
    """One torch thread per worker, whatever runs beside it: the most steps per CPU-second when
    trainings queue, and a fixed count keeps runs of the same settings bit-identical."""
    a = pool.start(TINY.with_settings(seed=1), "alice")
    b = pool.start(TINY.with_settings(seed=2), "bob")
    c = pool.start(TINY.with_settings(seed=3), "carol")
    d = pool.start(TINY.with_settings(seed=4), "dan")
    wait_until(lambda: a.worker_threads == 1 and b.worker_threads == 1, what="two runs on one thread each")
    assert (c.status, c.position, c.step) == (RunStatus.WAITING, 1, 0)
    assert (d.status, d.position) == (RunStatus.WAITING, 2)
    pool.stop(a)
    wait_until(lambda: c.step > 0, what="carol's run to start once a slot is free")
    assert c.worker_threads == 1 and d.position == 1
    pool.stop(b)
    wait_until(lambda: d.step > 0, what="dan's run next")
    assert pool.runs_of("alice") == [] and pool.runs_of("carol") == [c]


def test_runs_of_different_owners_are_apart(pool):
    a = pool.start(TINY, "alice")
    b = pool.start(TINY.with_settings(n_layers=0), "bob")
    wait_until(lambda: len(a.rows) >= 2 and len(b.rows) >= 2, what="rows for both")
    assert pool.runs_of("alice") == [a] and pool.runs_of("bob") == [b]
    assert all(len(r["prev_token"]) == 1 for r in a.rows)  # alice's 1-block rows
    assert all(r["prev_token"] == [] for r in b.rows)  # bob's 0-block rows
    assert a.pid != b.pid


_SERVER_THAT_DIES = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from dataclasses import replace
from core.pool.backend import ThreadBackend
from core.pool.runs import RunPool
from core.training.run_config import RunConfig
pool = RunPool(capacity=1)
run = pool.start(RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24,
                         batch_size=4, steps=100000), "x")
while run.step < 3:
    time.sleep(0.02)
print(run.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.worker
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_no_worker_outlives_its_server(how):
    """SIGTERM: the server exits normally and ends its workers; SIGKILL: nothing runs in the server,
    and the worker ends itself when its Pipe reads end-of-file."""
    server = subprocess.Popen([sys.executable, "-c", _SERVER_THAT_DIES, str(ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(server.stdout.readline())
        assert alive(pid)
        server.send_signal(how)
        server.wait(30)
        wait_until(lambda: not alive(pid), 10, "the worker to end with its server")
    finally:
        server.kill()
