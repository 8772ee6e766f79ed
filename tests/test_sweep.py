"""Sweeps (core.sweeps.run, core.sweeps.grid): the grid, run ids, the table, resuming, local
processes equal to in-process runs, and Ray imported only when asked for. The Ray runner's own
checks are in tests/test_ray.py (a real local cluster)."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from core.model.drop import drop_step
from core.pool.live_run import code_version
from core.sweeps.grid import grid, int_list, period_list, run_id, sweep_run
from core.sweeps.run import COLUMNS, TIMES, LocalRunner, main, read_table, run_one, sweep

from helpers import ROOT

TINY = {"n_layers": [0], "steps": [4], "every": [2]}


class InProcess:
    """A runner that trains here and records what it was given."""

    def __init__(self):
        self.given = []

    def run(self, specs, threads):
        self.given.append(list(specs))
        for spec in specs:
            yield spec, run_one(spec, threads)


def comparable(frame):
    return frame.drop(columns=TIMES).sort_values("run_id").reset_index(drop=True)


def test_the_grid_is_every_combination_with_seeds_fastest_and_periods_paired():
    specs = grid({"n_layers": [1, 2], "period": [(16, 32), (8, 16)], "seed": [0, 1, 2]})
    assert len(specs) == 12
    assert [s.train.seed for s in specs[:3]] == [0, 1, 2] and len({s.model.n_layers for s in specs[:6]}) == 1
    assert {(s.task.period_min, s.task.period_max) for s in specs} == {(16, 32), (8, 16)}
    base = sweep_run()
    assert all(s.train.lr == base.train.lr and s.model.vocab_size == base.model.vocab_size for s in specs)


def test_a_key_naming_several_fields_sets_them_together():
    # the laws' context sweep: periods scaled with the sequence length, not crossed with it
    specs = grid({"period_min, period_max, seq_len": [(8, 16, 48), (16, 32, 96)], "seed": [0, 1]})
    assert [(s.task.period_min, s.task.period_max, s.task.seq_len, s.train.seed) for s in specs] == [
        (8, 16, 48, 0), (8, 16, 48, 1), (16, 32, 96, 0), (16, 32, 96, 1)]
    with pytest.raises(ValueError, match="must give 3 numbers"):
        grid({"period_min, period_max, seq_len": [(8, 16)]})
    with pytest.raises(ValueError, match="given twice: seq_len"):
        grid({"period_min, period_max, seq_len": [(8, 16, 48)], "seq_len": [96]})


def test_a_bad_run_in_the_grid_is_named():
    with pytest.raises(ValueError, match="period_min=40"):
        grid({"period": [(40, 20)]})
    with pytest.raises(ValueError, match="unknown sweep fields: depth"):
        grid({"depth": [1]})
    with pytest.raises(ValueError, match="knockout"):
        grid({"knockout": ["first"]})


def test_flag_lists():
    assert int_list("0-3,7") == [0, 1, 2, 3, 7] and int_list("-1,0") == [-1, 0]
    assert period_list("16-32,12") == [(16, 32), (12, 12)]


def test_spec_configs_carry_every_swept_field():
    spec = sweep_run(n_layers=1, vocab_size=32, batch_size=8, lr=3e-3, warmup_steps=5, init="plain",
                            knockout="1.2", hold="1.3", steps=7)
    model, task, train = spec.configs()
    assert (model.n_layers, model.vocab_size) == (1, 32)
    assert (train.batch_size, train.lr, train.warmup_steps, train.steps) == (8, 3e-3, 5, 7)
    assert (train.embed_scale, train.embed_shared) == (1.0, 0.0)
    assert (train.knockout, train.hold) == ("1.2", "1.3")
    with pytest.raises(ValueError, match="hold takes a head of block 1"):
        spec.with_settings(hold="2.1").configs()
    assert sweep_run(clamp="2.3").configs()[2].clamp == "2.3"
    with pytest.raises(ValueError, match="clamp takes a head of block 2"):
        sweep_run(clamp="1.1").configs()
    with pytest.raises(ValueError, match="not a head of block 2"):
        spec.with_settings(hold="none", knockout="none", clamp="2.1").configs()  # one block


def test_run_ids_differ_by_settings_seed_and_code():
    a = sweep_run()
    assert run_id(a, "c1") == run_id(sweep_run(), "c1")
    assert len({run_id(a, "c1"), run_id(a, "c2"), run_id(a.with_settings(seed=1), "c1"),
                run_id(a.with_settings(lr=0.02), "c1"), run_id(a.with_settings(clamp="2.1"), "c1")}) == 5


def test_a_setting_beyond_the_first_tables_is_a_column_and_in_the_id_only_when_changed(tmp_path):
    """Any TrainConfig field is a sweep setting by its name: at the sweep's default it leaves the run id as the
    shipped tables have it; changed, it changes the id, names the run and gets a column of its own."""
    from core.sweeps.grid import SETTINGS, label, row_settings

    base = sweep_run()
    assert run_id(base.with_settings(weight_decay=base.train.weight_decay), "c") == run_id(base, "c")
    other, same = grid({"weight_decay": [0.0, base.train.weight_decay], "n_layers": [0], "steps": [4], "every": [2]})
    assert other.train.weight_decay == 0.0 and run_id(other, "c") != run_id(other.with_settings(weight_decay=0.1), "c")
    assert row_settings(other)["weight_decay"] == 0.0 and "weight_decay" not in row_settings(base)
    assert "weight_decay=0.0" in label(other)
    rows = sweep([other, same], tmp_path / "wd.csv", "test", InProcess(), progress=None)
    table = read_table(tmp_path / "wd.csv")  # the run at the default has it written out
    assert list(table.columns) == COLUMNS + ["weight_decay"]
    assert sorted(table["weight_decay"]) == [0.0, base.train.weight_decay]
    assert set(SETTINGS) <= set(rows[0]) and rows[0]["weight_decay"] == 0.0
    with pytest.raises(ValueError, match="unknown sweep fields: weight_decy"):
        grid({"weight_decy": [0.0]})


def test_a_table_written_before_the_clamp_existed_reads_as_unclamped(tmp_path):
    old = tmp_path / "old.csv"
    lines = (ROOT / "checkpoints/laws/init.csv").read_text().splitlines()
    header = [line for line in lines if not line.startswith("#")][0].split(",")
    keep = [i for i, c in enumerate(header) if c != "clamp"]
    old.write_text("\n".join(",".join(line.split(",")[i] for i in keep) if not line.startswith("#") else line
                             for line in lines) + "\n")
    table = read_table(old)
    assert list(table.columns) == COLUMNS and set(table["clamp"]) == {"none"}


def test_the_shipped_tables_run_ids_survive_the_settings_added_since():
    """A setting added after tables were shipped (ADDED: clamp, decay_steps, stop_below) is left out of the run
    id at the value those tables ran, so every shipped row's id is still its settings' id (and resuming skips it)."""
    from core.sweeps.grid import SETTINGS

    for name in ("init", "clamps", "batch"):
        table = read_table(ROOT / f"checkpoints/laws/{name}.csv")
        for row in table.head(3).itertuples():
            spec = sweep_run(**{c: getattr(row, c) for c in SETTINGS})
            assert run_id(spec, row.code) == row.run_id
    assert run_id(sweep_run(decay_steps=0), "c") != run_id(sweep_run(), "c")
    assert run_id(sweep_run(stop_below=0.5), "c") != run_id(sweep_run(), "c")


def test_a_constant_rate_run_and_its_stop():
    """decay_steps reaches TrainConfig (0: the rate is lr at every step); stop_below ends the run at its first
    measurement below it, so steps_run is that measured step."""
    train = sweep_run(decay_steps=0, steps=900).configs()[2]
    assert train.decay_steps == 0 and {train.lr_at(s) for s in (0, 500, 899)} == {train.lr}
    with pytest.raises(ValueError, match="stop_below"):
        sweep_run(stop_below=-1.0).configs()
    never = run_one(sweep_run(n_layers=0, steps=6, every=2))
    at_once = run_one(sweep_run(n_layers=0, steps=6, every=2, stop_below=never["final_loss_later"] + 10))
    assert never["steps_run"] == 6 and at_once["steps_run"] == 0  # the first measurement is already below
    assert at_once["completion_step"] is None and never["onset_step"] is None  # no heads: no head-score onset


def test_completion_and_the_head_score_onset_read_off_a_curve():
    from core.sweeps.run import first_below, onset_step

    steps = [0, 10, 20, 30, 40, 50]
    assert first_below(steps, [4.1, 3.0, 2.0, 0.6, 0.49, 0.3], 0.5) == 40
    assert first_below(steps, [4.1] * 6, 0.5) is None
    # an early flicker above 0.1 that falls back does not count; the onset is where the score stays up
    assert onset_step(steps, [0.19, 0.001, 0.05, 0.12, 0.4, 0.8], 0.1) == 30
    assert onset_step(steps, [0.19, 0.001, 0.05, 0.12, 0.4, 0.08], 0.1) is None  # fell back at the end
    assert onset_step(steps, [0.2] * 6, 0.1) == 0
    assert onset_step(steps, [None] * 6, 0.1) is None


def test_a_row_reads_the_drop_step_from_its_curve():
    spec = sweep_run(n_layers=1, steps=6, every=3)
    row = run_one(spec)
    assert list(row) == COLUMNS
    assert row["steps_run"] == 6 and row["code"] == code_version() and row["run_id"] == run_id(spec, code_version())
    fell = drop_step([6], [row["final_loss_later"]], spec.model.vocab_size) is not None
    assert row["drop_step"] is None or row["drop_step"] % 3 == 0  # a measured step
    assert not fell or row["drop_step"] is not None  # fallen by the end: a drop step at or before it
    assert row["final_loss_later"] > 0 and math.isfinite(row["loss_second_copy"]) and row["cpu_s"] > 0


def test_resuming_skips_finished_runs_and_keeps_their_rows(tmp_path):
    out = tmp_path / "sweep.csv"
    runner = InProcess()
    first = grid({**TINY, "seed": [0, 1]})
    sweep(first, out, "first", runner, progress=None)
    before = read_table(out)
    assert len(before) == 2
    more = grid({**TINY, "seed": [0, 1, 2]})
    sweep(more, out, "second", runner, progress=None)
    assert [s.train.seed for s in runner.given[1]] == [2]
    after = read_table(out)
    assert len(after) == 3
    kept = after[after["seed"] < 2].reset_index(drop=True)
    assert kept.equals(before.reset_index(drop=True))  # the finished rows, times included, unchanged
    sweep(more, out, "third", runner, progress=None)
    assert runner.given[2:] == []  # nothing left to train: the runner is not even asked
    assert "# command: second" in out.read_text()


def test_progress_gives_the_time_left(tmp_path, capsys):
    sweep(grid({**TINY, "seed": [0, 1]}), tmp_path / "s.csv", "x", InProcess(), progress=sys.stderr)
    err = capsys.readouterr().err
    assert "2 runs, 0 already in" in err and "2/2 done" in err and "left" in err


@pytest.mark.worker
def test_local_processes_give_the_table_of_in_process_runs(tmp_path):
    specs = grid({**TINY, "n_layers": [0, 1], "seed": [0, 1]})
    sweep(specs, tmp_path / "here.csv", "x", InProcess(), progress=None)
    sweep(specs, tmp_path / "procs.csv", "x", LocalRunner(jobs=2), progress=None)
    here, procs = read_table(tmp_path / "here.csv"), read_table(tmp_path / "procs.csv")
    assert len(procs) == 4
    assert comparable(procs).equals(comparable(here))


@pytest.mark.worker
def test_the_command_line_writes_the_table_with_its_command(tmp_path):
    out = tmp_path / "cli.csv"
    assert main(["--depth", "0", "--steps", "4", "--every", "2", "--seeds", "0-1", "--jobs", "1",
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert "# command: python -m core.sweep --depth 0" in text and len(read_table(out)) == 2
    bad = subprocess.run([sys.executable, "-m", "core.sweep", "--period", "40-20", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "period_min" in bad.stderr


@pytest.mark.worker  # a fresh interpreter that builds the pool: the rest tier
def test_ray_is_imported_only_when_asked_for():
    code = ("import os, sys; os.environ.pop('ATTENTION_LAB_RAY_ADDRESS', None)\n"
            "import core.sweep, core.sweeps.run, core.pool.ray_backend, ui.training\n"
            "pool = ui.training.run_pool()\n"
            "print(type(pool.backend).__name__, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ProcessBackend", "False"]
