"""Trainings and sweeps on a real local Ray cluster (core.pool.ray_backend, core.sweeps.run's RayRunner),
started by these tests with `ray start --head` in a temporary directory, token authentication on, and
stopped at the end with no process of it left: a training through Ray equals a local one bit for bit
at one thread; Stop keeps the last finished step; a killed actor gives a sentence and the pool trains
on; no actor outlives its run; a sweep on Ray writes the table local processes write, and resumes."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from core.pool.backend import ProcessBackend
from core.pool.runs import RunPool
from core.pool.status import RunStatus
from core.sweeps.grid import grid
from core.sweeps.run import TIMES, LocalRunner, read_table, sweep
from core.training.run_config import RunConfig

from helpers import wait_until

if importlib.util.find_spec("ray") is None:
    pytest.skip("Ray is not installed (requirements-ray.txt)", allow_module_level=True)
pytestmark = pytest.mark.ray
ray = None  # imported by the cluster fixture once the token settings are in the environment (Ray reads them then)

SHORT = RunConfig.of(n_layers=1, steps=30)
LONG = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=5000)
AUTH = {"RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}


def _processes_of(root: str) -> set[int]:
    """Processes whose command line names `root` (the cluster's own daemons), with their descendants."""
    parent, mine = {}, set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] == "Z":
                continue
            parent[int(d.name)] = int(stat[1])
            if root in (d / "cmdline").read_bytes().decode(errors="replace"):
                mine.add(int(d.name))
        except OSError:
            continue
    grew = True
    while grew:
        kids = {p for p, pp in parent.items() if pp in mine} - mine
        mine |= kids
        grew = bool(kids)
    return mine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """The address of a fresh 2-CPU head node with token auth; every process of it ended afterwards."""
    root = tempfile.mkdtemp(prefix="alray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    token = Path(root) / "auth_token"
    token.write_text(secrets.token_hex(32))
    saved = {k: os.environ.get(k) for k in [*AUTH, "RAY_AUTH_TOKEN_PATH"]}
    os.environ.update(AUTH, RAY_AUTH_TOKEN_PATH=str(token))
    global ray
    ray = importlib.import_module("ray")
    address = f"127.0.0.1:{_free_port()}"
    # the venv's own `ray`, next to this interpreter, whether or not the venv is activated (on PATH)
    beside = Path(sys.executable).with_name("ray")
    ray_cli = str(beside) if beside.exists() else shutil.which("ray") or "ray"
    cmd = [ray_cli, "start", "--head", f"--port={address.split(':')[1]}",
           f"--temp-dir={root}/t", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=180)
        yield address
    finally:
        ray.shutdown()
        left = _processes_of(root)
        for sig, grace in ((signal.SIGTERM, 3), (signal.SIGKILL, 15)):  # some daemons outlive a SIGTERM for 15 s
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while (left := _processes_of(root)) and time.monotonic() < deadline:
                time.sleep(0.2)
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"processes of the test cluster still running: {sorted(left)}"


@pytest.fixture
def ray_pool(cluster):
    from core.pool.ray_backend import RayBackend

    pool = RunPool(1, backend=RayBackend(cluster), owner_grace=0.3)
    yield pool
    pool.shutdown()


def no_training_actor() -> bool:
    """No training actor holds a CPU, and no process of one runs."""
    cpus = ray.available_resources().get("CPU", 0) == ray.cluster_resources().get("CPU", -1)
    procs = [d for d in Path("/proc").iterdir() if d.name.isdigit() and _cmdline_has(d, "_TrainingActor")]
    return cpus and not procs


def _cmdline_has(d: Path, text: str) -> bool:
    try:
        return text in (d / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def finished(pool: RunPool, settings: RunConfig):
    run = pool.start(settings, owner="a|1", private=True)
    assert run.ended.wait(240), f"the run is still {run.status} at step {run.step}"
    return run


def test_a_training_through_ray_equals_a_local_one_bit_for_bit(ray_pool):
    frames = []
    run = ray_pool.start(SHORT, owner="a|1", private=True)
    wait_until(lambda: frames.append(len(run.frames)) or run.ended.is_set(), 240, "the Ray run to end")
    assert run.status == RunStatus.FINISHED, run.error
    assert max(frames) > 0  # the film strip's frames streamed while it trained
    local_pool = RunPool(1, backend=ProcessBackend())
    try:
        local = finished(local_pool, SHORT)
    finally:
        local_pool.shutdown()
    assert local.status == RunStatus.FINISHED
    (m_ray, _, _), (m_local, _, _) = run.result, local.result
    for (name, a), (_, b) in zip(m_ray.state_dict().items(), m_local.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    untimed = [[{k: v for k, v in r.items() if k != "seconds"} for r in x.history()] for x in (run, local)]
    assert len(untimed[0]) > 1 and repr(untimed[0]) == repr(untimed[1])  # repr: NaN train_loss at step 0
    wait_until(no_training_actor, 30, "the finished run's actor to end")


def test_stop_keeps_the_last_finished_step_and_ends_the_actor(ray_pool):
    run = ray_pool.start(LONG, owner="a|1")
    wait_until(lambda: run.step >= 3, 120, "training on Ray")
    ray_pool.stop(run, wait_seconds=30)
    assert run.ended.is_set() and run.status == RunStatus.STOPPED
    model, info, _ = run.result
    assert info["history"][-1]["step"] == run.step >= 3
    wait_until(no_training_actor, 30, "the stopped run's actor to end")


def test_a_killed_actor_ends_its_run_with_a_sentence_and_the_pool_trains_on(ray_pool):
    run = ray_pool.start(LONG, owner="a|1")
    wait_until(lambda: run.step >= 1, 120, "training on Ray")
    os.kill(run.pid, signal.SIGKILL)  # the actor's process (this one machine is the whole cluster)
    assert run.ended.wait(60)
    assert run.status == RunStatus.FAILED
    assert "Ray actor" in run.error and "Nothing else in your session changed" in run.error, run.error
    again = finished(ray_pool, SHORT.with_settings(steps=3))
    assert again.status == RunStatus.FINISHED and again.step == 3
    wait_until(no_training_actor, 30, "every actor to end")


def test_an_identical_run_follows_the_training_and_discarding_both_ends_the_actor(cluster):
    from core.pool.ray_backend import RayBackend

    backend = RayBackend(cluster)
    pool = RunPool(2, backend=backend, owner_grace=0.3)
    try:
        a = pool.start(LONG, owner="a|1")
        wait_until(lambda: a.step >= 1, 120, "training on Ray")
        b = pool.start(LONG, owner="b|1")
        assert b.shared == "live" and pool.trainings() == 1 and len(backend.started) == 1  # trained once
        pool.discard(a)
        step = b.step
        wait_until(lambda: b.step > step, 60, "the followed training to go on for the other session")
        pool.discard(b)
        assert a.status == b.status == RunStatus.CANCELLED
        wait_until(no_training_actor, 30, "the discarded run's actor to end")
    finally:
        pool.shutdown()


class Counting:
    def __init__(self, runner):
        self.runner, self.given = runner, []

    def run(self, specs, threads):
        self.given.append([s.train.seed for s in specs])
        yield from self.runner.run(specs, threads)


def test_a_sweep_on_ray_gives_the_table_of_local_processes_and_resumes(cluster, tmp_path):
    from core.sweeps.run import RayRunner

    specs = grid({"n_layers": [0, 1], "steps": [6], "every": [3], "seed": [0, 1]})
    sweep(specs, tmp_path / "local.csv", "x", LocalRunner(jobs=2), progress=None)
    on_ray = Counting(RayRunner(cluster))
    sweep(specs, tmp_path / "ray.csv", "x", on_ray, progress=None)
    local, remote = read_table(tmp_path / "local.csv"), read_table(tmp_path / "ray.csv")
    assert len(remote) == 4
    untimed = [f.drop(columns=list(TIMES)).sort_values("run_id").reset_index(drop=True) for f in (local, remote)]
    assert untimed[0].equals(untimed[1])
    sweep(grid({"n_layers": [0, 1], "steps": [6], "every": [3], "seed": [0, 1, 2]}), tmp_path / "ray.csv", "x",
          on_ray, progress=None)
    assert on_ray.given[1] == [2, 2]  # only the new seed, at both depths
    assert len(read_table(tmp_path / "ray.csv")) == 6
    wait_until(lambda: ray.available_resources().get("CPU", 0) == 2, 30, "the sweep's tasks to end")


def test_the_cluster_refuses_a_client_without_its_token(cluster, tmp_path):
    wrong = tmp_path / "token"
    wrong.write_text(secrets.token_hex(32))
    env = {**os.environ, "RAY_AUTH_TOKEN_PATH": str(wrong)}
    code = f"import ray; ray.init(address={cluster!r}); print('connected')"
    # The client retries once a second for about 20 s before it gives up: the GCS's refusal is what
    # counts, so the test reads it and ends the client there.
    client = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    seen, deadline = [], time.monotonic() + 60
    try:
        for line in client.stdout:
            seen.append(line)
            if "InvalidAuthToken" in line or line.strip() == "connected" or time.monotonic() > deadline:
                break
    finally:
        client.kill()
        client.wait(timeout=30)
    assert any("InvalidAuthToken" in line for line in seen), "".join(seen)[-2000:]
    assert not any(line.strip() == "connected" for line in seen)
