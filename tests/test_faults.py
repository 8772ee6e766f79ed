"""Faults, with nothing lost: a training process killed mid-run leaves its session the
model of its last logged step, bit-identical to the same steps trained here, and the session trains
again at once; the server restarted in the middle of a run leaves no process behind and the next
server trains at once; a view cache folder that takes nothing leaves every page working from memory.
(The killed run on the Train page: tests/test_pages_train.py's
test_a_killed_training_process_gives_a_message_and_the_session_keeps_its_models.)"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit as st
import torch
from test_runs import thread_pool

from core.pool.status import RunStatus
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

from helpers import ROOT, TWO_BLOCK, open_app, wait_until

TINY = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4,
               steps=100_000)

# A server's pool with one slot, training through real worker processes (forkserver and resource
# tracker started by the first training, ui/setup.py); it prints its process tree once the run
# has finished a few steps, then waits to be killed.
_SERVER = r"""
import json, os, sys, time
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from core.pool.runs import RunPool
from core.training.run_config import RunConfig
pool = RunPool(capacity=1)
run = pool.start(RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24,
                         batch_size=4, steps=100000), "student")
deadline = time.monotonic() + 120
while run.step < 3 and time.monotonic() < deadline:
    time.sleep(0.02)

def tree(pid):
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass
    out, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier}
        out += sorted(frontier)
    return out

print(json.dumps({"step": run.step, "worker": run.pid, "tree": tree(os.getpid())}), flush=True)
time.sleep(600)
"""


def test_a_training_killed_mid_run_keeps_its_last_logged_step_and_the_session_trains_again():
    """The thread backend's kill ends the worker without a word, as SIGKILL ends a process: the run
    fails with the reason, and its model is the worker's last "saved" checkpoint, the same weights as
    the same settings trained here for that many steps (one torch thread, as in the workers)."""
    pool = thread_pool()
    try:
        run = pool.start(TINY, "alice")
        wait_until(lambda: run.step > 30, 30, "training past its first logged step")
        (handle,) = [h for h in pool.backend.started if h.pid == run.pid]
        handle.kill()
        wait_until(lambda: run.ended.is_set(), 10, "the pool to notice")
        assert run.status == RunStatus.FAILED and "The training process was killed at step" in run.error
        every = run.train_cfg.log_every
        assert run.step > 0 and run.step % every == 0, run.step
        assert f"Its model at step {run.step}, the last logged step, is kept" in run.error, run.error
        model, info, data = run.result
        assert info["train"]["steps_done"] == run.step and info["history"][-1]["step"] == run.step
        assert [r["step"] for r in info["history"]] == list(range(0, run.step + 1, every))
        reference = Trainer(*TINY.configs())
        reference.run(run.step)
        want = reference.model.state_dict()
        assert all(torch.equal(v, want[k]) for k, v in model.state_dict().items())
        assert info["history"][-1]["loss_later_copies"] == reference.history[-1]["loss_later_copies"]
        assert pool.running() == 0
        again = pool.start(TINY.with_settings(steps=2), "alice")
        wait_until(lambda: again.ended.is_set(), 30, "a new run")
        assert again.status == RunStatus.FINISHED and again.result is not None
    finally:
        pool.shutdown()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def server_mid_run() -> tuple[subprocess.Popen, dict]:
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(ROOT)], stdout=subprocess.PIPE, text=True)
    seen = json.loads(server.stdout.readline())
    return server, seen


@pytest.mark.worker
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_server_restarted_mid_run_leaves_no_process_and_the_next_one_trains_at_once(how):
    server, seen = server_mid_run()
    try:
        assert seen["step"] >= 3 and seen["worker"] in seen["tree"]
        assert len(seen["tree"]) >= 2  # the worker and what started it (forkserver, resource tracker)
        server.send_signal(how)
        server.wait(30)
        wait_until(lambda: not any(alive(p) for p in seen["tree"]), 20,
                   "every process the server started to end with it")
    finally:
        server.kill()
    again, seen_again = server_mid_run()  # the restarted server: its one slot is free, its run trains
    try:
        assert seen_again["step"] >= 3
    finally:
        again.kill()
        again.wait(30)
        wait_until(lambda: not any(alive(p) for p in seen_again["tree"]), 20, "the second server's processes")


@pytest.mark.app
@pytest.mark.parametrize("failure", ["no shipped data", "damaged shipped data"])
def test_every_view_comes_from_memory_when_the_shipped_data_is_missing_or_damaged(tmp_path, monkeypatch, failure):
    """Home and the Attention page on the shipped 2-block model without usable shipped data: no error on the
    page, every view computed, and the second visit is served from memory (no view computed again)."""
    import shutil

    from ui import shipped_data

    data = tmp_path / "data"
    if failure == "damaged shipped data":
        shutil.copytree(shipped_data.DATA_DIR, data)
        for f in data.rglob("*.view"):
            f.write_bytes(f.read_bytes()[:-7])
    monkeypatch.setattr(shipped_data, "DATA_DIR", data)
    st.cache_data.clear()
    monkeypatch.setattr(shipped_data, "recorded", [])
    at = open_app(file=TWO_BLOCK, timeout=300)
    for page in ("app_pages/home.py", "app_pages/attention.py"):
        at.switch_page(page).run()
        assert not at.exception, at.exception
        assert not at.error, [e.value for e in at.error]
    computed = len(shipped_data.recorded)
    assert computed >= 2 and all(c.computed for c in shipped_data.recorded)
    for page in ("app_pages/home.py", "app_pages/attention.py"):
        at.switch_page(page).run()
        assert not at.exception, at.exception
    assert len(shipped_data.recorded) == computed  # from st.cache_data: the shipped data was not asked again
