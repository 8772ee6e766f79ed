"""The laws of the drop (core.pool.laws): the log-log fit recovers slopes planted in synthetic sweep
tables, never-dropped runs are counted, bad tables are refused, and each shipped table is what its
header's command makes."""
import math
import shlex
from dataclasses import asdict, replace

import numpy as np
import pytest

import core.pool.sweep as sweep_module
from core.pool.laws import (
    AOYAMA,
    LAWS,
    LAWS_DIR,
    MUSAT,
    SINGH,
    Law,
    clamp_arms,
    clamp_sentences,
    fit_points,
    groups,
    median_ratio,
    read_law,
    readings_sentences,
    sentences,
    table_command,
    verdict,
)
from core.pool.sweep import COLUMNS, read_table, write_table
from core.pool.sweep_grid import RunSpec

BATCH = Law("batch", "batch_size", "batch size B", "batch size B", (AOYAMA,))


def planted(path, slope, xs=(8, 16, 32, 64), seeds=7, noise=0.05, scale=3000.0, axis="batch_size",
            never=None, steps=10 ** 6):
    """A sweep table whose drop step is scale * x**slope times lognormal noise; `never` {x: count} of
    runs per point that never dropped."""
    rng = np.random.default_rng(1)
    rows = []
    for x in xs:
        for seed in range(seeds):
            spec = replace(RunSpec.defaults(), **{axis: x}, seed=seed, steps=steps)
            dropped = seed >= (never or {}).get(x, 0)
            step = round(scale * x ** slope * math.exp(noise * rng.standard_normal())) if dropped else None
            rows.append({c: None for c in COLUMNS} | asdict(spec) | {
                "run_id": f"{x}-{seed}", "steps_run": steps, "drop_step": step, "dropped": dropped})
    write_table(path, rows, f"python -m core.sweep --batch {','.join(map(str, xs))}")
    return path


@pytest.mark.parametrize("slope", [2.0, -0.5, 0.0])
def test_the_fit_recovers_a_planted_slope_inside_its_interval(tmp_path, slope):
    law = read_law(planted(tmp_path / "t.csv", slope), BATCH)
    assert [p.x for p in law.points] == [8, 16, 32, 64] and all(p.n == 7 for p in law.points)
    assert abs(law.fit.slope - slope) < 0.05
    assert law.fit.low <= slope <= law.fit.high and law.fit.high - law.fit.low < 0.2
    assert law.fit.resamples == 1000
    assert law.command == "python -m core.sweep --batch 8,16,32,64"


def test_the_verdicts_and_sentences_follow_the_interval(tmp_path):
    law = read_law(planted(tmp_path / "t.csv", -0.5), Law("x", "batch_size", "B", "B", (MUSAT, AOYAMA)))
    assert verdict(law.fit, AOYAMA) == "agrees" and verdict(law.fit, MUSAT) == "below"
    text = " ".join(sentences(law))
    assert "comes earlier" in text and "follows Aoyama here" in text
    assert "whole interval is below +2.00" in text
    up = read_law(planted(tmp_path / "u.csv", 0.8), Law("v", "batch_size", "V", "V", (SINGH,)))
    assert verdict(up.fit, SINGH) == "agrees" and "agrees: the whole interval is above 0" in " ".join(sentences(up))
    flat = read_law(planted(tmp_path / "f.csv", 0.0, noise=0.3), Law("v", "batch_size", "V", "V", (SINGH, MUSAT)))
    assert verdict(flat.fit, SINGH) == "unclear" and "Neither" not in " ".join(sentences(flat))
    assert "no clear trend" in " ".join(sentences(flat))


def test_a_wide_interval_holding_the_prediction_and_zero_is_said_to_agree_only_weakly(tmp_path):
    law = read_law(planted(tmp_path / "t.csv", -0.2, seeds=5, noise=0.8), Law("x", "batch_size", "B", "B",
                                                                                (MUSAT, AOYAMA)))
    assert law.fit.low < -0.5 and law.fit.high > 0 and law.fit.high < 2
    text = " ".join(sentences(law))
    assert "TinyCharLM agrees only weakly: the predicted slope −0.50 is inside the interval, but so is 0" in text
    assert "Only Aoyama's slope is inside the interval, but no trend is too" in text and "follows" not in text


def test_runs_that_never_dropped_are_counted_ranked_last_and_a_censored_median_is_left_out(tmp_path):
    law = read_law(planted(tmp_path / "t.csv", 1.0, seeds=5, noise=0.0, never={32: 1, 64: 3}), BATCH)
    by_x = {p.x: p for p in law.points}
    assert by_x[32].n_dropped == 4 and by_x[64].n_dropped == 2
    # 4 runs at 96000 and one later than the cap: the median is 96000, not the mean of the dropped
    assert by_x[32].median == 96000 and math.isinf(by_x[64].median)
    assert law.fit.xs == (8, 16, 32) and abs(law.fit.slope - 1.0) < 1e-9
    text = " ".join(sentences(law))
    assert "At batch size B = 32, 1 of 5 runs never dropped within 1000000 steps." in text
    assert "At batch size B = 64, 3 of 5 runs never dropped" in text and "left out of the fit" in text
    none = read_law(planted(tmp_path / "n.csv", 1.0, seeds=3, never={8: 2, 16: 2, 32: 2, 64: 2}), BATCH)
    assert none.fit is None and "no slope can be fitted" in " ".join(sentences(none))


def test_the_bootstrap_interval_widens_with_the_seeds_spread(tmp_path):
    narrow = fit_points(read_law(planted(tmp_path / "a.csv", 1.0, noise=0.05), BATCH).points)
    wide = fit_points(read_law(planted(tmp_path / "b.csv", 1.0, noise=0.5), BATCH).points)
    assert wide.high - wide.low > 4 * (narrow.high - narrow.low)


def test_bad_tables_are_refused_with_a_clear_message(tmp_path):
    with pytest.raises(ValueError, match="no table at"):
        read_law(tmp_path / "missing.csv", BATCH)
    (tmp_path / "junk.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="lacks the column.*batch_size.*drop_step"):
        read_law(tmp_path / "junk.csv", BATCH)
    path = planted(tmp_path / "t.csv", 1.0)
    table = read_table(path)
    cases = [
        (table.assign(lr=np.where(table["seed"] == 0, 0.02, 0.01)), "varies lr besides batch_size"),
        (table[table["batch_size"] == 8], "one value of batch_size"),
        (table[table["seed"] == 0], "has 1 seed"),
        (table.assign(seed=0), "seed 0 appears twice"),
        (table.iloc[:0], "no runs"),
        (table.assign(batch_size=table["batch_size"] - 8), "positive number"),
    ]
    for bad, message in cases:
        write_table(tmp_path / "bad.csv", bad.to_dict("records"), "x")
        with pytest.raises(ValueError, match=message):
            read_law(tmp_path / "bad.csv", BATCH)
    scaled = table.assign(period_max=table["batch_size"])  # a setting varied with the axis, not allowed here
    write_table(tmp_path / "bad.csv", scaled.to_dict("records"), "x")
    with pytest.raises(ValueError, match="period_max"):
        read_law(tmp_path / "bad.csv", BATCH)


def planted_clamps(path, medians: dict, seeds=5, spread=0.1, steps=600):
    """A clamps table: arm (hold, clamp) -> its median drop step (None: no run drops), seeds spread by +-spread."""
    rows = []
    for (hold, clamp), median in medians.items():
        for seed in range(seeds):
            spec = replace(RunSpec.defaults(), hold=hold, clamp=clamp, seed=seed, steps=steps)
            step = None if median is None else round(median * (1 + spread * (seed - seeds // 2) / seeds))
            rows.append({c: None for c in COLUMNS} | asdict(spec) | {
                "run_id": f"{hold}{clamp}{seed}", "steps_run": steps, "drop_step": step, "dropped": step is not None,
                "abrupt": step is not None and seed % 2 == 0, "drop_start": None if step is None else step - 20})
    write_table(path, rows, "python -m core.sweep --hold none,1.1 --clamp none,2.1")
    return path


def test_the_clamps_are_set_against_the_unclamped_runs(tmp_path):
    path = planted_clamps(tmp_path / "c.csv", {("none", "none"): 200, ("1.1", "none"): 100, ("none", "2.1"): 40,
                                               ("1.1", "2.1"): 30})
    arms = clamp_arms(path)
    assert arms[("1.1", "none")].median == 100 and arms[("none", "none")].n == 5
    r = median_ratio(arms[("none", "2.1")], arms[("none", "none")])
    assert r.ratio == pytest.approx(0.2) and r.low <= 0.2 <= r.high < 1 and r.resamples == 1000
    said = clamp_sentences(path)
    assert said[0].startswith("No clamp: median drop step 200")
    assert "3 of its 5 drops are abrupt" in said[0] and "3 nats or more at step 180 (median)" in said[0]
    assert any(t.startswith("With the layer-2 clamp (head 2.1 on the ideal induction pattern), the median drop step "
                            "is 0.20 times") and t.endswith("clearly earlier.") for t in said)
    assert said[-1].endswith("TinyCharLM agrees: each clamp alone brings the drop clearly earlier.")
    # a clamp that changes nothing, and one whose runs never drop
    path = planted_clamps(tmp_path / "d.csv", {("none", "none"): 200, ("1.1", "none"): 200, ("none", "2.1"): None})
    said = clamp_sentences(path)
    assert any("cannot tell it from no clamp" in t for t in said)
    assert any("none of 5 runs dropped within 600 steps" in t for t in said)
    assert said[-1].endswith("TinyCharLM agrees only in part: the layer-1 clamp does not clearly move it; the layer-2 "
                             "clamp brings it later.")
    with pytest.raises(ValueError, match="unclamped arm"):
        clamp_arms(planted_clamps(tmp_path / "e.csv", {("1.1", "none"): 100, ("none", "2.1"): 40}))


def test_the_readings_say_on_how_many_seeds_each_holds(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("# command: python bench/seed_readings.py\n"
                    "seed,prev_head,prev_token,prev_clear,prev_noise,prev_noise_low,prev_noise_high,prev_needed,"
                    "key_sender,prev_key,key_is_prev,best_block,block2_effect,block2_sum,induction_heads\n"
                    "0,1.4,0.9,True,0.30,0.25,0.35,True,1.4,0.3,True,block 2,0.5,1.6,4\n"
                    "1,1.2,0.8,True,0.50,0.40,0.60,True,,0.5,False,block 2,0.4,1.4,3\n"
                    "2,1.4,0.4,False,0.95,0.90,1.00,False,1.1,0.9,False,,0.2,0.8,2\n")
    said = readings_sentences(path)
    assert "clear previous-token score (at least 0.5) on 2 of 3 seeds; the sharpest one scores median 0.80, from " \
           "0.40 to 0.90" in said[1]
    assert "a different head on different seeds (1.2 on seed 1; 1.4 on seeds 0, 2)" in said[1]
    assert "leaves median 0.50, from 0.30 to 0.95 of M, clearly needed (its interval ending below 0.9) on 2 of 3" \
           in said[2] and "interval over its sequences is 0.10 wide (median); the seeds spread over 0.65" in said[2]
    assert "most needed one into all of block 2 on 1 of 3 seeds, another head's on 1, no clear answer on 1" in said[3]
    assert "from 0.30 to 0.90 of M, within 0.05 of noising the head's whole output on every seed." in said[3]
    assert "restores the most of M on 2 of 3 seeds" in said[4] and "per seed: 4, 3, 2." in said[4]


SHIPPED = [p for p in [*(law.path for law in LAWS.values()), LAWS_DIR / "init.csv", LAWS_DIR / "clamps.csv"]
           if p.is_file()]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_each_shipped_table_is_what_its_command_makes_with_five_seeds_a_point(path, monkeypatch):
    if path.stem in LAWS:
        result = read_law(path, LAWS[path.stem])
        assert len(result.points) >= 3 and all(p.n >= 5 for p in result.points)
    elif path.stem == "clamps":
        assert len(clamp_arms(path)) >= 3 and all(p.n >= 5 for p in clamp_arms(path).values())
    else:
        assert all(p.n >= 5 for p in groups(path, "init").values())
    caught = {}
    monkeypatch.setattr(sweep_module, "sweep", lambda specs, out, *a, **k: caught.update(specs=specs, out=out))
    args = shlex.split(table_command(path))
    assert args[:3] == ["python", "-m", "core.sweep"]
    monkeypatch.chdir(path.parents[2])  # the command's paths are relative to the repository
    sweep_module.main(args[3:])
    table = read_table(path)
    assert caught["out"] == f"checkpoints/laws/{path.name}"
    assert table["code"].nunique() == 1
    assert sorted(s.run_id(table["code"][0]) for s in caught["specs"]) == sorted(table["run_id"])


def test_an_interval_end_beside_a_prediction_gets_the_decimals_that_show_which_side_it_is_on(tmp_path):
    law = read_law(planted(tmp_path / "t.csv", -0.2), Law("x", "batch_size", "B", "B", (AOYAMA,)))
    near = replace(law, fit=replace(law.fit, low=-0.502, high=-0.05))
    text = " ".join(sentences(near))
    assert "(95% interval −0.502 to −0.050" in text and "the predicted slope −0.50 is inside the interval" in text
    clear = replace(law, fit=replace(law.fit, low=-0.498, high=-0.05))
    text = " ".join(sentences(clear))
    assert "(95% interval −0.498 to −0.050" in text and "the whole interval is above −0.50" in text
    plain = replace(law, fit=replace(law.fit, low=-0.61, high=-0.32))
    assert "(95% interval −0.61 to −0.32" in " ".join(sentences(plain))
