"""The command lines (docs/DESIGN.md "Command line"): bad input is one stderr line and exit status 2,
`core.report --json` has the documented shape, and the end-to-end training claim holds.

Most commands go through the `cli` fixture (conftest.py: a forked `python -m`, same exit status and
output, without paying torch's import each time); a few run as real processes to check that."""
from __future__ import annotations

import json
import math
import re

import pytest
import torch

from core.model.checkpoints import save_checkpoint
from core.model.metrics import METRIC_NAMES
from core.model.task import TaskConfig
from core.reading.report import build_report

from helpers import python_m, tiny_model

BAD_FILES = ["arbitrary-object", "arbitrary-pickle", "arbitrary-pickle-4", "truncated", "version-3", "wrong-shape",
             "missing-key", "extra-key", "nan-weights", "impossible-task", "bad-config", "foreign-dict", "non-dict",
             "random-bytes", "empty", "no-such-file"]
HEAD_KEYS = {"layer", "head", "prev_token", "induction", "induction_any", "duplicate", "first_token", "self",
             "ov_diag_top1", "ov_copying_eig", "ov_diag_top1_effective", "ov_copying_eig_effective",
             "ablation_loss_later_delta"}


def assert_one_line_error(result, prog: str, *phrases: str):
    """Exit status 2, nothing on stdout, exactly one line on stderr naming the problem."""
    assert result.returncode == 2, result
    assert result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and result.stderr.endswith("\n"), result
    assert lines[0].startswith(f"python -m {prog}: error: "), result
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, result)


# ---------------------------------------------------------------------------------------------
# core.report on bad files


def test_bad_file_list_is_complete(bad_files):
    assert sorted(BAD_FILES) == sorted(bad_files[0])


@pytest.mark.parametrize("name", BAD_FILES)
def test_report_refuses_each_bad_file_in_one_line(cli, bad_files, name):
    files, marker = bad_files
    path, phrase = files[name]
    result = cli("core.report", path, "--json")
    assert_one_line_error(result, "core.report", phrase)
    assert not marker.exists()


@pytest.mark.worker
def test_real_process_matches_the_forked_runner(cli, bad_files):
    """The fast runner reports exactly what a real `python -m core.report` process does (this file
    also made torch warn on stderr before the loader silenced it)."""
    path = bad_files[0]["arbitrary-pickle-4"][0]
    real = python_m("core.report", path)
    forked = cli("core.report", path)
    assert (real.returncode, real.stdout, real.stderr) == (forked.returncode, forked.stdout, forked.stderr)
    assert_one_line_error(forked, "core.report")
    assert not bad_files[1].exists()


# ---------------------------------------------------------------------------------------------
# bad arguments


TRAIN_CASES = {
    "min-above-max": (["--period-min", "40", "--period-max", "32"], ["period_min (40)", "period_max (32)"]),
    "no-second-copy": (["--period-max", "60"], ["second copy", "seq_len"]),
    "short-seq-len": (["--seq-len", "50"], ["seq_len 50", "64"]),
    "negative-steps": (["--steps", "-5"], ["steps", "-5"]),
    "unknown-preset": (["--preset", "nope"], ["unknown preset", "variable-period-2block"]),
    "non-numeric-lr": (["--lr", "fast"], ["--lr", "fast"]),
    "non-numeric-layers": (["--layers", "two"], ["--layers", "two"]),
    "too-many-layers": (["--layers", "7"], ["n_layers"]),
    "zero-batch": (["--batch-size", "0"], ["batch_size"]),
    "unknown-flag": (["--colour", "red"], ["--colour"]),
}


@pytest.mark.worker
@pytest.mark.parametrize("case", TRAIN_CASES)
def test_train_refuses_bad_arguments_in_one_line(cli, tmp_path, case):
    args, phrases = TRAIN_CASES[case]
    out = tmp_path / "m.pt"
    result = cli("core.train", *args, "--out", out)
    assert_one_line_error(result, "core.train", *phrases)
    assert not out.exists()


@pytest.mark.worker
def test_train_refuses_a_missing_out_folder_or_a_folder_as_out(cli, tmp_path):
    assert_one_line_error(cli("core.train", "--out", tmp_path / "no" / "m.pt"), "core.train", "does not exist")
    assert_one_line_error(cli("core.train", "--out", tmp_path, "--steps", "0"), "core.train", str(tmp_path))
    assert_one_line_error(cli("core.train", "--steps", "3"), "core.train", "--out")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


@pytest.mark.parametrize("args, phrases", [
    (["--offsets", "a,b"], ["--offsets", "'a,b'"]),
    (["--offsets", "3,-1"], ["offsets"]),
    (["--n-seqs", "0"], ["--n-seqs"]),
    (["--period", "0"], ["period"]),
    (["--period", "24"], ["period 24", "23"]),
    (["--seed", "x"], ["--seed"]),
    (["--wat"], ["--wat"]),
], ids=["offsets-text", "offsets-negative", "n-seqs-0", "period-0", "period-too-long", "seed-text", "unknown-flag"])
def test_report_refuses_bad_arguments_in_one_line(cli, small_checkpoint, args, phrases):
    assert_one_line_error(cli("core.report", small_checkpoint[0], *args), "core.report", *phrases)


def test_report_without_a_file_argument(cli):
    assert_one_line_error(cli("core.report"), "core.report", "file")


# ---------------------------------------------------------------------------------------------
# core.report --json


def _report(cli, path, *args) -> dict:
    result = cli("core.report", path, "--json", *args)
    assert result.returncode == 0 and result.stderr == "", result
    assert len(result.stdout.strip().splitlines()) == 1  # one JSON object
    return json.loads(result.stdout)


def test_report_json_shape(cli, small_checkpoint):
    path, model, task = small_checkpoint
    report = _report(cli, path, "--offsets", "1,3", "--n-seqs", "16", "--seed", "2")
    assert report["config"] == model.cfg.to_dict()
    assert report["task"] == task.to_dict()
    assert set(METRIC_NAMES) == {"loss_first_copy", "loss_second_copy", "loss_later_copies", "acc_second_copy",
                                 "acc_later_copies"}
    assert set(METRIC_NAMES) <= set(report["metrics"])
    for name in METRIC_NAMES:
        assert isinstance(report["metrics"][name], float) and math.isfinite(report["metrics"][name])
    assert 0 <= report["metrics"]["acc_later_copies"] <= 1

    heads = report["heads"]
    assert sorted((h["layer"], h["head"]) for h in heads) == [(l, h) for l in range(2) for h in range(4)]
    for h in heads:
        assert set(h) >= HEAD_KEYS, set(h)
        for key in ("prev_token", "induction", "induction_any", "duplicate", "first_token", "self", "ov_diag_top1",
                    "ov_diag_top1_effective"):
            assert 0 <= h[key] <= 1 + 1e-6, (key, h)
        assert h["induction"] <= h["induction_any"] + 1e-6  # the latest copy is one of the earlier copies
        assert -1 - 1e-6 <= h["ov_copying_eig"] <= 1 + 1e-6 and -1 - 1e-6 <= h["ov_copying_eig_effective"] <= 1 + 1e-6

    rows = report["offset_mass"]
    assert len(rows) == 2 * 4 * 2
    assert all(set(r) == {"layer", "head", "offset", "mass"} for r in rows)
    assert {(r["layer"], r["head"], r["offset"]) for r in rows} == {(l, h, k) for l in range(2) for h in range(4)
                                                                   for k in (1, 3)}
    by_head = {(h["layer"], h["head"]): h for h in heads}
    for r in rows:  # offset 1 is the previous token, by definition
        if r["offset"] == 1:
            assert r["mass"] == pytest.approx(by_head[(r["layer"], r["head"])]["prev_token"], abs=2e-6)

    # the command prints build_report's numbers for the same sample
    expected = build_report(model, task, offsets=[1, 3], n_seqs=16, seed=2)
    for name in METRIC_NAMES:
        assert report["metrics"][name] == pytest.approx(expected["metrics"][name], abs=1e-5)
    assert "offset_mass" not in _report(cli, path, "--n-seqs", "4")


def test_report_fixed_period_probe(cli, small_checkpoint):
    path = small_checkpoint[0]
    report = _report(cli, path, "--period", "6", "--offsets", "5,6", "--n-seqs", "8")
    mass = {(r["layer"], r["head"], r["offset"]): r["mass"] for r in report["offset_mass"]}
    for h in report["heads"]:  # at period 6, duplicate (A[i, i-6] over i >= 6) is the offset-6 mass
        assert h["duplicate"] == pytest.approx(mass[(h["layer"], h["head"], 6)], abs=2e-6)


def test_report_text_mode(cli, small_checkpoint):
    result = cli("core.report", small_checkpoint[0], "--n-seqs", "4")
    assert result.returncode == 0 and result.stderr == ""
    for name in METRIC_NAMES:
        assert name in result.stdout


def test_report_on_a_zero_block_file(cli, tmp_path):
    path = tmp_path / "zero.pt"
    save_checkpoint(tiny_model(0), path, task=TaskConfig(4, 8, 24))
    report = _report(cli, path, "--n-seqs", "4", "--offsets", "2")
    assert report["heads"] == [] and report["offset_mass"] == []


# ---------------------------------------------------------------------------------------------
# The end-to-end claim, with real processes


@pytest.mark.worker
@pytest.mark.slow
def test_train_to_stopping_loss_then_report(tmp_path):
    """docs/DESIGN.md: `--stop-at-loss X` ends training as soon as later copies are below X on the fixed
    evaluation batch, and the report's own sample agrees. Real processes, on the fixed-period preset
    (1 block with biases: below 0.5 nats in a few dozen steps; an explicit flag overrides the preset).
    That the default 2-block run gets there is the shipped file's history (last test of this section)."""
    train = python_m("core.train", "--preset", "fixed-period-1block-bias", "--seed", "1", "--stop-at-loss", "0.5",
                     "--out", "m.pt", cwd=tmp_path, timeout=900)
    assert train.returncode == 0, train.stderr[-2000:]
    assert (tmp_path / "m.pt").is_file()
    report = python_m("core.report", "m.pt", "--json", cwd=tmp_path)
    assert report.returncode == 0 and report.stderr == "", report.stderr[-2000:]
    data = json.loads(report.stdout)
    assert data["config"]["n_layers"] == 1 and data["config"]["bias"] is True
    assert data["task"] == {"period_min": 32, "period_max": 32, "seq_len": 96}
    assert data["metrics"]["loss_later_copies"] < 0.6, data["metrics"]
    saved = torch.load(tmp_path / "m.pt", weights_only=True)
    assert saved["train"]["seed"] == 1 and saved["train"]["stop_at_loss"] == 0.5
    assert saved["history"][-1]["loss_later_copies"] < 0.5
    assert all(r["loss_later_copies"] >= 0.5 for r in saved["history"][:-1])  # it stopped at the first one below
    assert saved["history"][-1]["step"] == saved["train"]["steps_done"] < saved["train"]["steps"]
    print(f"stopped at step {saved['train']['steps_done']} after {saved['train']['seconds']} s of training; "
          f"report loss_later_copies {data['metrics']['loss_later_copies']:.3f}")  # shown by pytest -rP


def test_the_default_two_block_run_reaches_half_a_nat():
    """README's `python -m core.train --layers 2 --period-min 16 --period-max 32 --stop-at-loss 0.5`
    ends: the shipped 2-block file, the same settings trained by core.train (checkpoints/manifest.json),
    is below 0.5 nats on its fixed evaluation batch within its 800 steps, after its drop."""
    from helpers import TWO_BLOCK, shipped

    saved = torch.load(shipped(TWO_BLOCK), weights_only=True)
    manifest = json.loads((shipped(TWO_BLOCK).parent / "manifest.json").read_text())
    row = next(r for r in manifest["checkpoints"] if r["file"] == TWO_BLOCK)
    assert row["command"].startswith("python -m core.train ") and row["model"]["n_layers"] == 2
    assert saved["task"] == {"period_min": 16, "period_max": 32, "seq_len": 96} == row["task"]
    below = [r["step"] for r in saved["history"] if r["loss_later_copies"] < 0.5]
    assert below and below[0] < saved["train"]["steps"] and saved["history"][-1]["loss_later_copies"] < 0.5


def test_text_report_counts_blocks_and_heads_from_one():
    """The text output labels heads "block.head" counted from 1 (as the app does); JSON keeps 0-based."""
    from core.reading.report import format_text

    from helpers import tiny_model

    report = build_report(tiny_model(2), TaskConfig(period_min=4, period_max=6, seq_len=16), offsets=[2], n_seqs=4)
    rows = [line.split()[0] for line in format_text(report).splitlines() if re.match(r"^\d+\.\d+ ", line)]
    assert rows == [f"{l}.{h}" for l in (1, 2) for h in (1, 2, 3, 4)]
    assert "offset mass head 1.1 offset 2" in format_text(report)
    assert {(h["layer"], h["head"]) for h in report["heads"]} == {(l, h) for l in (0, 1) for h in range(4)}


def test_initial_embedding_is_disclosed_in_settings_and_sidebar():
    """Home's settings table and the sidebar summary say how W_E started; an upload without training
    settings says it is not stored."""
    from core.training.overview import initial_embedding_label, settings_rows

    assert initial_embedding_label({"embed_scale": 3.0, "embed_shared": 3.0}) == "×3 + shared 3"
    assert initial_embedding_label({"embed_scale": 1.0, "embed_shared": 0.0}) == "plain"
    assert initial_embedding_label({}) == "not stored"
    from core.model.config import ModelConfig
    rows = settings_rows({"config": ModelConfig(), "task": TaskConfig(),
                          "train": {"embed_scale": 1.0, "embed_shared": 0.0}})
    assert dict(zip(rows.setting, rows.value))["initial embedding"] == "plain"
