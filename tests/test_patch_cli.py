"""`python -m core.patch` (DESIGN.md "Command line"): the documented JSON, the same numbers as the
Python functions, and bad arguments as one stderr line with exit status 2."""
from __future__ import annotations

import json
import math

import pytest
from test_cli import BAD_FILES, assert_one_line_error

from core.causal import patching
from core.model.checkpoints import save_checkpoint
from core.model.task import TaskConfig

from helpers import python_m, tiny_model


def test_json_has_the_documented_shape_and_core_numbers(cli, small_checkpoint):
    path, model, task = small_checkpoint
    r = cli("core.patch", path, "--json", "--n-seqs", 16, "--seed", 3)
    assert r.returncode == 0 and r.stderr == "", r
    out = json.loads(r.stdout)
    assert set(out) == {"corruption", "clean", "corrupted", "heads"} and out["corruption"] == "first-copy"
    assert [(h["layer"], h["head"]) for h in out["heads"]] == [(l, h) for l in range(2) for h in range(4)]
    assert all(set(h) == {"layer", "head", "patch_effect", "effect_low", "effect_high"} for h in out["heads"])
    assert all(h["effect_low"] <= h["patch_effect"] + 1e-9 and h["patch_effect"] <= h["effect_high"] + 1e-9
               for h in out["heads"])
    runs = patching.task_runs(model, task, 16, seed=3)
    assert math.isclose(out["clean"], runs.m_clean, abs_tol=1e-5)
    assert math.isclose(out["corrupted"], runs.m_corrupted, abs_tol=1e-5)
    want = patching.head_patch_effects(model, runs)["patch_effect"].tolist()
    assert all(math.isclose(h["patch_effect"], w, abs_tol=1e-5) for h, w in zip(out["heads"], want))


def test_resample_corruption_keeps_the_fields_and_says_which_was_used(cli, small_checkpoint):
    path, model, task = small_checkpoint
    r = cli("core.patch", path, "--json", "--n-seqs", 16, "--seed", 3, "--corruption", "resample")
    assert r.returncode == 0 and r.stderr == "", r
    out = json.loads(r.stdout)
    assert set(out) == {"corruption", "clean", "corrupted", "heads"} and out["corruption"] == "resample"
    runs = patching.task_runs(model, task, 16, seed=3, corruption="resample")
    assert math.isclose(out["corrupted"], runs.m_corrupted, abs_tol=1e-5)
    first = patching.task_runs(model, task, 16, seed=3)
    assert not math.isclose(runs.m_corrupted, first.m_corrupted, abs_tol=1e-3)
    want = patching.head_patch_effects(model, runs)["patch_effect"].tolist()
    assert all(math.isclose(h["patch_effect"], w, abs_tol=1e-5) for h, w in zip(out["heads"], want))
    assert_one_line_error(cli("core.patch", path, "--corruption", "bogus"), "core.patch", "invalid choice")


def test_period_fixes_every_sequence(cli, small_checkpoint):
    path, model, task = small_checkpoint
    out = json.loads(cli("core.patch", path, "--json", "--period", 5, "--n-seqs", 8).stdout)
    runs = patching.task_runs(model, task, 8, seed=0, period=5)
    assert math.isclose(out["clean"], runs.m_clean, abs_tol=1e-5)


def test_text_output_names_heads_from_one(cli, small_checkpoint):
    r = cli("core.patch", small_checkpoint[0], "--n-seqs", 4)
    assert r.returncode == 0 and "M(clean)" in r.stdout and "\n2.4 " in r.stdout


def test_zero_block_checkpoint_gives_null_effects(cli, tmp_path):
    path = tmp_path / "zero.pt"
    save_checkpoint(tiny_model(0), path, task=TaskConfig(period_min=4, period_max=8, seq_len=24))
    out = json.loads(cli("core.patch", path, "--json", "--n-seqs", 4).stdout)
    assert out["clean"] == out["corrupted"] and out["heads"] == []


@pytest.mark.parametrize("args, phrase", [
    (["--period", "1"], "--period"), (["--period", "13"], "no complete second copy"), (["--n-seqs", "0"], "--n-seqs"),
    (["--n-seqs", "x"], "invalid int"), (["--seed", "-1"], "--seed"), (["--bogus"], "unrecognized"),
])
def test_bad_arguments_are_one_line(cli, small_checkpoint, args, phrase):
    assert_one_line_error(cli("core.patch", small_checkpoint[0], *args), "core.patch", phrase)


def test_missing_file_argument_is_one_line(cli):
    assert_one_line_error(cli("core.patch"), "core.patch", "required")


@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_files_are_refused_in_one_line(cli, bad_files, name):
    files, marker = bad_files
    path, phrase = files[name]
    assert_one_line_error(cli("core.patch", path, "--json"), "core.patch", phrase)
    assert not marker.exists()


@pytest.mark.worker
def test_a_real_process_agrees(small_checkpoint):
    r = python_m("core.patch", small_checkpoint[0], "--json", "--n-seqs", 4, "--period", 6)
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) == {"corruption", "clean", "corrupted", "heads"}
    bad = python_m("core.patch", small_checkpoint[0], "--period", "99")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
