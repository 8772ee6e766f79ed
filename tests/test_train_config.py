"""One training configuration: TrainConfig holds every training option, heads written as the pages write them
("1.2", counted from 1; None for off); a RunConfig is one run whole (model, task, TrainConfig), and the command
line, the Train page's settings and a sweep's runs build it by the options' field names (RunConfig.of); the old
forms (0-based ints, -1 and "none", the old schedule name) are read at the edges where old files hold them: every
shipped checkpoint and every shipped laws table reads as before."""
from __future__ import annotations

import io

import pandas as pd
import pytest

from core.model.checkpoints import read_checkpoint, save_checkpoint
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.sweeps.grid import SETTINGS, run_id, sweep_run
from core.sweeps.run import read_table
from core.training.config import TrainConfig, with_settings
from core.training.interventions import describe
from core.training.run_config import RunConfig

from helpers import ROOT

OLD = {"hold_prev_head": 1, "clamp_induction_head": 2, "knockout_layer": 1, "knockout_head": 0,
       "schedule": "constant", "steps": 10, "steps_done": 10}  # a train entry as files before the labels hold it


def test_the_old_forms_read_as_the_labels_the_pages_show():
    cfg = TrainConfig.from_dict(OLD)
    assert (cfg.hold, cfg.clamp, cfg.knockout, cfg.schedule) == ("1.2", "2.3", "2.1", "linear_decay")
    assert cfg == TrainConfig(steps=10, hold="1.2", clamp="2.3", knockout="2.1")
    assert cfg.head("hold") == (0, 1) and cfg.head("knockout") == (1, 0)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # the new entry reads back the same
    assert TrainConfig.from_dict({"hold_prev_head": -1, "knockout_layer": -1}).hold is None
    assert describe(OLD) == describe(cfg.to_dict())  # one sentence for either form
    assert "head 1.2 held" in describe(OLD)
    with pytest.raises(ValueError, match="hold takes a head of block 1, e.g. 1.2, got '2.1'"):
        TrainConfig(hold="2.1").validate()
    with pytest.raises(ValueError, match="knockout takes a head as block.head"):
        TrainConfig(knockout="two")


def test_a_file_written_with_the_old_hold_keeps_it():
    from core.model.tinycharlm import TinyCharLM

    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=2))
    for train in ({"hold_prev_head": 2}, {"hold": "1.3"}):
        buf = io.BytesIO()
        save_checkpoint(model, buf, TaskConfig(4, 8, 24), train=train)
        loaded, info = read_checkpoint(buf.getvalue(), name="held.pt")
        assert loaded.held_head == 2, train


def _shipped_files():
    return sorted([*ROOT.glob("checkpoints/*.pt"), *ROOT.glob("checkpoints/markov/*.pt")])


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda p: p.name)
def test_every_shipped_checkpoint_reads_its_training_as_before(path):
    model, info = read_checkpoint(path)
    train = info["train"]
    cfg = TrainConfig.from_dict(train).validate()
    old_hold = train.get("hold_prev_head", -1)
    assert cfg.head("hold") == (None if old_hold == -1 else (0, old_hold))
    assert model.held_head == (None if old_hold == -1 else old_hold)
    assert cfg.lr == train["lr"] and cfg.steps == train["steps"] and cfg.seed == train["seed"]


RUN_TABLES = sorted(p for p in (ROOT / "checkpoints" / "laws").glob("*.csv")
                    if "run_id" in read_table(p).columns and "n_layers" in read_table(p).columns)


@pytest.mark.parametrize("path", RUN_TABLES, ids=lambda p: p.name)
def test_every_row_of_every_shipped_sweep_table_is_still_its_specs_run(path):
    """Each row's settings make a spec that trains (configs) and whose id is the row's: the ids are the keys
    the laws pages and readings.csv look runs up by, and a resumed sweep skips a row only by its id."""
    table = read_table(path)
    assert len(table)
    for row in table.itertuples():
        spec = sweep_run(**{c: getattr(row, c) for c in SETTINGS})
        assert run_id(spec, row.code) == row.run_id, (path.name, row.run_id)
        model, task, train = spec.configs()
        assert (model.n_layers, task.seq_len, train.steps, train.seed) == (row.n_layers, row.seq_len, row.steps,
                                                                            row.seed)
        assert (train.hold, train.clamp, train.knockout) == tuple(None if v == "none" else v
                                                                 for v in (row.hold, row.clamp, row.knockout))


def test_the_readings_table_names_runs_of_the_shipped_tables():
    ids = {i for p in RUN_TABLES for i in read_table(p)["run_id"]}
    readings = pd.read_csv(ROOT / "checkpoints" / "laws" / "readings.csv", comment="#", dtype={"run_id": str})
    assert len(readings) and set(readings["run_id"]) <= ids


@pytest.mark.parametrize("name", ["markov.csv", "markov_prior.csv"])
def test_every_row_of_the_markov_tables_is_a_task_that_trains(name):
    from core.model.markov import OPTIONAL, MarkovTask

    table = pd.read_csv(ROOT / "checkpoints" / "laws" / name, comment="#")
    for row in table.to_dict("records"):
        keys = ("n_states", "concentration", "seq_len", *(k for k in OPTIONAL if k in row))
        MarkovTask(**{k: row[k] for k in keys}).validate()


def test_a_setting_goes_to_the_config_with_its_name():
    model, task, train = with_settings({"n_layers": 1, "seq_len": 64, "lr": 0.5, "hold": "1.1"},
                                       ModelConfig(), TaskConfig(), TrainConfig())
    assert (model.n_layers, task.seq_len, train.lr, train.hold, train.seq_len) == (1, 64, 0.5, "1.1", 0)
    with pytest.raises(ValueError, match="no model, task or training setting is called 'lr_typo'"):
        with_settings({"lr_typo": 1}, ModelConfig(), TaskConfig(), TrainConfig())


def test_a_run_is_built_by_name_and_its_changes_build_it_again():
    """RunConfig.of routes each setting to the config with its field (seq_len: the task's), reads the few names
    that are not a field (task, init/shared_embedding, period) and refuses a name nothing has; changes() is the
    shortest set of settings that builds the same run again, on both tasks."""
    run = RunConfig.of(n_layers=1, seq_len=64, period=(8, 16), lr=0.5, hold="1.1", shared_embedding=False)
    assert (run.model.n_layers, run.task.seq_len, run.task.period_max, run.train.lr) == (1, 64, 16, 0.5)
    assert (run.train.hold, run.train.seq_len, run.init, run.kind) == ("1.1", 0, "plain", "repeat")
    assert run.changes() == {"task": "repeat", "n_layers": 1, "period_min": 8, "period_max": 16, "seq_len": 64,
                             "lr": 0.5, "hold": "1.1", "init": "plain"}
    markov = RunConfig.of(task="markov", n_states=5, seq_len=40, weight_decay=0.0)
    assert (markov.kind, markov.model.vocab_size, markov.train.steps) == ("markov", 5, 1000)  # core.training.markov's
    for r in (run, markov, RunConfig.of(), RunConfig.of("fixed-period-1block-bias", seed=3)):
        assert RunConfig.of(**r.changes()) == r and r.with_settings() == r
        assert r.get("seed") == r.seed == r.train.seed and r.get("task") == r.kind and r.seq_len == r.task.seq_len
    with pytest.raises(ValueError, match="no model, task or training setting is called 'lr_typo'"):
        RunConfig.of(lr_typo=1)
    with pytest.raises(AttributeError, match="no attribute or setting 'lr_typo'"):
        RunConfig.of().lr_typo  # noqa: B018 -- read by name as RunConfig.get reads it, or refused
    with pytest.raises(ValueError, match="period_min"):  # the Markov task has no periods
        RunConfig.of(task="markov", period_min=4)
    with pytest.raises(ValueError, match="init must be"):
        RunConfig.of(init="wide")


def test_a_run_is_validated_and_labelled_in_one_place():
    assert RunConfig.of().problem() is None and RunConfig.of().label() == "2 blocks, periods 16–32, length 96, seed 0"
    assert "Train for at least 1 step" in RunConfig.of(steps=0).problem()
    assert RunConfig.of(steps=0).validate(min_steps=0).train.steps == 0  # the command line writes step 0
    assert "offered on the Markov-chain task only" in RunConfig.of(smeared_keys=True).problem()
    assert "not a head of block 2" in RunConfig.of(n_layers=1, clamp="2.1").problem()
    assert "stop_below" in RunConfig.of(stop_below=-1.0).problem()
    assert RunConfig.of(hold="1.2", clamp="2.1").label() == ("2 blocks, head 1.2 held, head 2.1 clamped, periods "
                                                             "16–32, length 96, seed 0")
    assert RunConfig.of(task="markov", n_layers=1, smeared_keys=True, seed=2).label() == (
        "1 block, smeared keys, Markov chains of 3 states, Dirichlet 1, length 100, seed 2")


def test_the_command_line_builds_its_run_as_every_caller_does():
    from core.training.train import build_parser, configs_from_args

    args = build_parser().parse_args(["--out", "x.pt", "--layers", "1", "--seq-len", "64", "--lr", "0.5",
                                      "--hold-prev-head", "1.1", "--plain-embedding"])
    run = RunConfig.of(n_layers=1, seq_len=64, lr=0.5, hold="1.1", init="plain")
    assert configs_from_args(args) == run.configs()
