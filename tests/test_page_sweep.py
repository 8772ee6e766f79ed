"""The Laws page's own sweep (core.series.page_sweep): the cap, the runs it makes, and finished runs' planted
histories read back as drop steps, points and a fit, through a stand-in pool (the real pool's Train-page
runs are tested in test_pages_train and test_runs; the page itself in test_laws_page)."""
import math
import pickle
import threading

import numpy as np
import pytest

from core.pool.live_run import run_key
from core.pool.status import RunStatus
from core.series import page_sweep as ps


class PlantedRun:
    """What PageSweep reads of a core.pool.runs.LiveRun, with a planted history."""

    def __init__(self, settings, drop_at: int | None, end: bool = True):
        self.settings, self.model_cfg = settings, settings.configs()[0]
        self.total_steps, self.position, self.blocked = settings.train.steps, 0, False
        self.error, self.result = None, "model"
        self.shared = None
        high, low = math.log(self.model_cfg.vocab_size), 0.5  # ln V, then far below ln V / 2
        steps = list(range(0, settings.train.steps + 1, 10))
        self.rows = [{"step": s, "loss_later_copies": low if drop_at is not None and s >= drop_at
                      else high - 0.001 * s} for s in steps]
        self.ended = threading.Event()
        self.status, self.step = RunStatus.RUNNING, 0
        if end:
            self.finish()

    def finish(self, status=RunStatus.FINISHED):
        self.status, self.step = status, self.settings.train.steps if status == RunStatus.FINISHED else self.step
        self.ended.set()

    def history(self):
        return list(self.rows)


class PlantedPool:
    """start() hands out PlantedRuns whose drop step is planted[(value, seed)]; hold=True: they run until discarded."""

    def __init__(self, planted: dict, setting: str, hold: bool = False):
        self.planted, self.setting, self.hold = planted, setting, hold
        self.started, self.discarded, self.runs = [], [], []

    def start(self, settings, owner, private=False):
        run = PlantedRun(settings, self.planted.get((settings.get(self.setting), settings.train.seed)), not self.hold)
        self.started.append((settings, owner))
        self.runs.append(run)
        return run

    def discard(self, run):
        self.discarded.append(run)
        run.finish(RunStatus.CANCELLED)


def test_the_runs_vary_one_setting_over_seeds_and_train_as_the_tables_first_300_steps():
    specs = ps.sweep_settings("vocab_size", [128, 32], seeds=2, steps=200)
    assert [(s.model.vocab_size, s.train.seed) for s in specs] == [(32, 0), (128, 0), (32, 1), (128, 1)]  # seed by seed
    model, task, train = specs[0].configs()
    assert (model.vocab_size, train.steps, train.log_every, train.decay_steps) == (32, 200, 10, 0)
    assert (model.n_layers, task.period_min, task.period_max, task.seq_len, train.batch_size) == (2, 16, 32, 96, 32)
    assert run_key(specs[0], 1) != run_key(specs[1], 1)  # the vocabulary is part of the pool's run key
    assert pickle.loads(pickle.dumps(specs[1])) == specs[1]  # the process backend sends it to the worker
    assert "vocabulary 128" in specs[1].label()


@pytest.mark.parametrize("args, said", [
    (("batch_size", [16, 32, 64], 3, 300), "9 runs; a sweep on this page trains at most 6"),
    (("batch_size", [8, 16, 32, 64], 2, 300), "Pick 2 or 3 values"),
    (("batch_size", [32], 2, 300), "Pick 2 or 3 values"),
    (("batch_size", [16, 32], 4, 300), "Train 2 or 3 seeds"),
    (("batch_size", [16, 32], 2, 400), "train 20 to 300 steps, got 400"),
    (("batch_size", [16, 12], 2, 300), "not 12"),
    (("lr", [0.01, 0.02], 2, 300), "not 'lr'"),
])
def test_a_sweep_over_the_cap_is_refused_with_what_to_change(args, said):
    with pytest.raises(ValueError, match=said):
        ps.sweep_settings(*args)


def test_planted_histories_give_their_drop_steps_points_and_the_tables_fit():
    specs = ps.sweep_settings("batch_size", [16, 32, 64], seeds=2, steps=300)
    planted = {(16, 0): 250, (16, 1): 210, (32, 0): 140, (32, 1): 120, (64, 0): 90}  # (64, 1) never drops
    pool = PlantedPool(planted, "batch_size")
    sweep = ps.PageSweep(pool, specs, "batch_size", owner="session|sweep").start()
    assert sweep.wait(10)
    assert {o for _, o in pool.started} == {"session|sweep"} and len(pool.started) == 6
    got = {(r["value"], r["seed"]): r["drop_step"] for r in sweep.results}
    assert got == {**planted, (64, 1): None}
    assert all(run.result is None for run in pool.runs)  # the sweep keeps summaries, not models
    assert all(set(r) >= {"curve", "final_loss_later"} and r["status"] == RunStatus.FINISHED for r in sweep.results)
    result, said = sweep.outcome()
    assert sweep.outcome()[1] is said  # computed once
    by_x = {p.x: p for p in result.points}
    assert by_x[64.0].steps == (90.0, None) and by_x[64.0].cap == 300 and math.isinf(by_x[64.0].median)
    # the fit: least squares through the medians that are below the cap (64 is not: half its runs never dropped)
    slope = np.polyfit(np.log([16, 32]), np.log([230, 130]), 1)[0]
    assert result.fit.slope == pytest.approx(slope) and result.fit.xs == (16.0, 32.0)
    said = "\n".join(ps.sentences(sweep.results, "batch_size", result, path="/nonexistent.csv"))
    assert "At batch size B = 64, 1 of 2 runs never dropped within 300 steps" in said
    assert "log-log slope is " + f"{slope:+.2f}".replace("-", "−") in said and "Aoyama" in said


def test_stop_ends_the_run_in_progress_keeps_the_finished_ones_and_starts_no_more():
    specs = ps.sweep_settings("seq_len", [64, 96], seeds=2, steps=100)
    pool = PlantedPool({(64, 0): 60}, "seq_len", hold=True)
    sweep = ps.PageSweep(pool, specs, "seq_len", owner="s|sweep").start()
    for _ in range(200):
        if sweep.current is not None:
            break
        threading.Event().wait(0.01)
    sweep.current.finish()  # the first run ends by itself
    for _ in range(200):
        if sweep.done == 1 and sweep.current is not None:
            break
        threading.Event().wait(0.01)
    assert (sweep.done, sweep.queued) == (1, 2)
    sweep.cancel()
    assert sweep.wait(5)
    assert len(pool.started) == 2 and len(pool.discarded) == 1 and sweep.queued == 0
    assert [(r["value"], r["seed"], r["drop_step"]) for r in sweep.results] == [(64, 0, 60)]
    assert sweep.law() is None  # one seed: nothing to fit, and the sentence says so
    assert ps.sentences(sweep.results, "seq_len", None, "/nonexistent.csv")[0].startswith("Too few finished runs")


def test_a_stopped_sweeps_values_with_one_seed_are_left_out_of_the_fit():
    done = RunStatus.FINISHED
    results = [{"value": v, "seed": s, "drop_step": d, "steps_run": 300, "status": done}
               for v, s, d in [(32, 0, 150), (64, 0, 140), (128, 0, 160), (32, 1, 120), (64, 1, 110)]]
    result = ps.law_result(results, "vocab_size")
    assert [p.x for p in result.points] == [32.0, 64.0] and result.fit.xs == (32.0, 64.0)
    said = ps.sentences(results, "vocab_size", result, "/nonexistent.csv")
    assert any(s.startswith("Against vocabulary size V") for s in said)
    assert "fewer than 2 finished seeds: vocabulary size V 128" in said[-1]


def test_same_as_table_compares_each_run_with_the_tables_run_of_its_seed(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("# planted\nbatch_size,seed,drop_step\n16,0,250\n16,1,\n32,0,140\n32,1,400\n")
    done = RunStatus.FINISHED
    results = [{"value": 16, "seed": 0, "drop_step": 250, "steps_run": 300, "status": done},
               {"value": 16, "seed": 1, "drop_step": None, "steps_run": 300, "status": done},  # both never
               {"value": 32, "seed": 0, "drop_step": 130, "steps_run": 300, "status": done},  # one log step off
               {"value": 32, "seed": 1, "drop_step": None, "steps_run": 300, "status": done},  # table's after 300
               {"value": 64, "seed": 0, "drop_step": 90, "steps_run": 300, "status": done, "shared": "finished"}]
    assert ps.same_as_table(results, "batch_size", table) == (4, [(32, 0, 140, 130)], 2)
    assert ps.same_as_table(results, "batch_size", tmp_path / "missing.csv") == (0, [], 0)
    said = ps.sentences(results, "batch_size", ps.law_result(results, "batch_size"), table)
    assert "3 of your 4 finished runs agree with the run of the same" in said[-2]  # 64 is not in the table
    assert ": 1 dropped at the same logged step and 2 did not drop within 300 steps, nor did the table's; " in said[-2]
    assert "batch size B 32, seed 0: step 130 here, 140 there" in said[-2]
    assert said[-1].startswith("1 of your runs had already been trained on this server")


@pytest.mark.parametrize("same_code", [True, False])
def test_a_table_from_other_training_code_is_said_to_be(tmp_path, same_code):
    """A shipped table's rows carry the code version that trained them; trained by other code (another attention
    kernel), its runs need not be a page run's bit for bit, and the page says so."""
    from core.pool.live_run import code_version

    code = code_version() if same_code else "0123456789abcdef"
    table = tmp_path / "t.csv"
    table.write_text(f"# planted\nbatch_size,seed,drop_step,code\n16,0,250,{code}\n32,0,140,{code}\n")
    done = RunStatus.FINISHED
    results = [{"value": 16, "seed": 0, "drop_step": 250, "steps_run": 300, "status": done},
               {"value": 32, "seed": 0, "drop_step": 170, "steps_run": 300, "status": done}]
    said = ps.sentences(results, "batch_size", ps.law_result(results, "batch_size"), table)
    other = [s for s in said if s.startswith("The table's runs were trained by another version")]
    assert len(other) == (0 if same_code else 1)
    if other:
        assert f"its rows' code 0123456789abcdef, this server's {code_version()}" in other[0]
    assert ps.table_code(table) == code and ps.table_code(tmp_path / "missing.csv") is None
