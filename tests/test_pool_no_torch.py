"""Pressing Train imports no torch in the server (bench/class.py run: `import torch` was 1.1 of the click's 1.4
server CPU-s): a process where any import of torch raises builds the pool, starts a run in a real worker (the
forkserver child imports torch, the server does not) and streams its rows and film-strip frames, and the Train
page's live film strip is drawn from them (core.training.frames.live_strip, ui.charts.timeline.strip_pngs)."""
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
    print("torch loaded:", any(m == "torch" or m.startswith("torch.") for m in sys.modules))
    sys.meta_path.pop(0)  # a run's end reads its checkpoint back: torch may load then
    pool.shutdown()
""")


def test_starting_and_streaming_a_run_imports_no_torch_in_the_server():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    rows, frames = int(lines[0].split()[1]), int(lines[0].split()[3])
    assert rows >= 3 and frames >= 1 and "error None" in lines[0], lines[0]
    assert int(lines[1].split()[1]) >= 1, lines[1]
    assert lines[2] == "torch loaded: False"
