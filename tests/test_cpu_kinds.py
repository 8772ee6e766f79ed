"""The shipped checkpoints do not depend on the CPU kind they were trained on beyond the tolerance
docs/DESIGN.md states (core.model.cpu.TOLERANCE): two presets retrained as an AVX2 machine
(core.model.cpu.emulate, the way bench/cpu_reproduce.py measures every preset) give the shipped drop
step, and copy metrics, head scores and OV scores within it. The fixed-period preset moved most in that
bench (its OV top-1 score by 7 of 64 tokens), the 2-block one carries the lab's headline figures.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from core.model import cpu

from helpers import ROOT

spec = importlib.util.spec_from_file_location("cpu_reproduce", ROOT / "bench" / "cpu_reproduce.py")
cpu_reproduce = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_reproduce)


@pytest.mark.slow
@pytest.mark.worker
@pytest.mark.parametrize("preset", ["fixed-period-1block-bias", "variable-period-2block"])
def test_a_shipped_checkpoint_retrained_as_an_avx2_machine_keeps_its_figures(preset, tmp_path):
    if cpu.native_kind() != "AVX-512":
        pytest.skip(f"emulating AVX2 needs an AVX-512 host; this one is {cpu.native_kind()}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "ATTENTION_LAB_CACHE": str(tmp_path / "cache")}
    native = dict(env)
    env.update(cpu.emulate("avx2"))
    kind = cpu_reproduce._run([sys.executable, "-c", "from core.model import cpu; print(cpu.kind())"], env)
    assert kind.strip() == "AVX2"
    out = tmp_path / f"{preset}.pt"
    cpu_reproduce._run([sys.executable, "-m", "core.train", "--preset", preset, "--out", str(out)], env)
    row = cpu_reproduce.compare(ROOT / "checkpoints" / f"{preset}.pt", out, native)
    assert not row["same_bytes"]  # another kind's floats: this is a real cross-CPU retraining
    assert row["drop_step"]["retrained"] == row["drop_step"]["shipped"] is not None, row
    tol = cpu.TOLERANCE
    assert row["metric_max_abs_diff"] <= tol["metric"], row
    assert row["head_score_max_abs_diff"] <= tol["head_score"], row
    assert row["ov_score_max_abs_diff"] <= tol["ov_score"], row
    assert row["within_tolerance"]
