"""The Causal page's headline readings per training seed (bench/seed_readings.py): on the planted induction
circuit they name the heads it was built with, on a random model they say nothing is clear, and the shipped
table (checkpoints/laws/readings.csv) is what its command trains: the plain runs of clamps.csv."""
import importlib.util
import shlex

import pandas as pd
import pytest

from core.laws.clamps import CLAMPS_FILE
from core.laws.readings import READINGS_FILE
from core.laws.stats import table_command
from core.sweeps.grid import int_list, run_id, sweep_run
from core.sweeps.run import read_table
from exercises.planted import TASK, planted_induction_model, random_model

from helpers import ROOT

spec = importlib.util.spec_from_file_location("seed_readings", ROOT / "bench" / "seed_readings.py")
seed_readings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed_readings)


def test_the_planted_circuit_reads_as_built():
    row = seed_readings.readings(planted_induction_model(), TASK, n_seqs=8)
    assert row["prev_head"] == "1.1" and row["prev_clear"] and row["prev_token"] > 0.9  # built as head 1.1
    assert row["prev_needed"] and row["prev_noise_high"] < 0.9
    assert row["key_sender"] == "1.1" and row["key_is_prev"]  # 2.2's keys read 1.1's slot
    assert row["best_block"] == "block 2" and row["block2_best"] == "2.2" and row["block2_effect"] > 0.9
    assert row["induction_heads"] == 1


def test_a_random_model_has_no_clear_reading():
    row = seed_readings.readings(random_model(), TASK, n_seqs=8)
    assert not row["prev_clear"] and not row["prev_needed"] and not row["key_is_prev"]
    assert row["key_sender"] == "" and row["best_block"] == "" and row["induction_heads"] == 0


@pytest.mark.skipif(not READINGS_FILE.is_file(), reason="checkpoints/laws/readings.csv is not shipped")
def test_the_shipped_readings_are_the_plain_runs_of_the_clamps_sweep():
    args = shlex.split(table_command(READINGS_FILE))
    assert args[:2] == ["python", "bench/seed_readings.py"]
    parsed = dict(zip(args[2::2], args[3::2]))
    table = pd.read_csv(READINGS_FILE, comment="#", dtype={"run_id": str, "code": str})
    seeds = int_list(parsed.get("--seeds", "0-4"))
    assert table["seed"].tolist() == seeds and len(seeds) >= 5 and table["code"].nunique() == 1
    specs = [sweep_run(steps=int(parsed.get("--steps", 600)), seed=s) for s in seeds]
    assert table["run_id"].tolist() == [run_id(s, table["code"][0]) for s in specs]
    if CLAMPS_FILE.is_file():  # the same runs, trained twice: the same drop steps
        clamps = read_table(CLAMPS_FILE).set_index("run_id")
        same = table[table["run_id"].isin(clamps.index)]
        assert len(same) == len(table)
        assert same["drop_step"].tolist() == clamps.loc[same["run_id"], "drop_step"].tolist()
