"""Pressing Train, watching and stopping a run import no torch in the server (bench/class.py run: `import torch`
was 1.1 of the click's 1.4 server CPU-s, and 1.3 CPU-s more at the run's end): a process where any import of torch
raises builds the pool, starts a run in a real worker (the forkserver child imports torch, the server does not),
streams its rows and film-strip frames, draws the Train page's live film strip from them
(core.training.frames.live_strip, ui.charts.timeline.strip_pngs), stops the run and reads how it ended (the
worker's reading of its checkpoint, without weights), and puts it in the picker's form (ui.state.TrainedModel).
Only the model's weights, asked for after, load torch."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT

pytestmark = pytest.mark.worker

SCRIPT = textwrap.dedent("""
    import sys, time

    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"the server imported {name}")
            return None

    sys.meta_path.insert(0, NoTorch())

    from core.pool.runs import RunPool
    from core.training.run_config import RunConfig

    pool = RunPool(capacity=1, owner_grace=0.3)
    run = pool.start(RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=5000),
                     "alice")
    deadline = time.monotonic() + 120
    while (len(run.rows) < 3 or not run.frames) and time.monotonic() < deadline and run.error is None:
        time.sleep(0.05)
    print("rows", len(run.rows), "frames", len(run.frames), "status", run.status.name, "error", run.error)
    from core.training.frames import live_strip
    from ui.charts.timeline import strip_pngs

    strip = live_strip(run.frames, run.history(), run.model_cfg.vocab_size, run.strip_period)
    print("tiles", len(strip_pngs(strip)))
    pool.stop(run, wait_seconds=60)
    from ui.state import TrainedModel

    entry = TrainedModel("session:x", "trained #1", run.checkpoint, run.info)
    print("ended", run.status.name, run.step, entry.info["history"][-1]["step"], len(run.history()),
          len(entry.info["snapshots"]), entry.info["config"] == run.model_cfg)
    print("torch loaded:", any(m == "torch" or m.startswith("torch.") for m in sys.modules))
    sys.meta_path.pop(0)  # the weights, asked for: torch loads now
    print("weights", entry.model.cfg == entry.info["config"],
          repr(entry.full_info["history"]) == repr(entry.info["history"]),  # repr: NaN rows
          [s["step"] for s in entry.full_info["snapshots"]] == [s["step"] for s in entry.info["snapshots"]])
    pool.shutdown()
""")


def test_starting_streaming_and_stopping_a_run_import_no_torch_in_the_server():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    rows, frames = int(lines[0].split()[1]), int(lines[0].split()[3])
    assert rows >= 3 and frames >= 1 and "error None" in lines[0], lines[0]
    assert int(lines[1].split()[1]) >= 1, lines[1]
    ended, step, last, rows, snapshots, same_config = lines[2].split()[1:]
    assert ended == "STOPPED" and step == last and int(rows) >= 3, lines[2]
    assert int(snapshots) >= 1 and same_config == "True", lines[2]
    assert lines[3] == "torch loaded: False"
    assert lines[4] == "weights True True True", lines[4]
