"""The laws of the drop (core.laws): the log-log fit recovers slopes planted in synthetic sweep
tables, never-dropped runs are counted, bad tables are refused, and each shipped table is what its
header's command makes."""
import math
import shlex
from dataclasses import replace

import numpy as np
import pytest

import core.sweeps.run as sweep_module
from core.laws.clamps import clamp_arms, clamp_sentences, median_ratio
from core.laws.drop import AOYAMA, LAWS, MUSAT, SINGH, Law, read_law, sentences, verdict
from core.laws.readings import readings_sentences
from core.laws.stats import LAWS_DIR, fit_points, groups, paired, seed_rank_correlation, seed_slopes, table_command
from core.sweeps.grid import row_settings, run_id, sweep_run
from core.sweeps.run import COLUMNS, read_table, write_table

BATCH = Law("batch", "batch_size", "batch size B", "batch size B", (AOYAMA,))


def planted(path, slope, xs=(8, 16, 32, 64), seeds=7, noise=0.05, scale=3000.0, axis="batch_size",
            never=None, steps=10 ** 6):
    """A sweep table whose drop step is scale * x**slope times lognormal noise; `never` {x: count} of
    runs per point that never dropped."""
    rng = np.random.default_rng(1)
    rows = []
    for x in xs:
        for seed in range(seeds):
            spec = sweep_run(**{axis: x}, seed=seed, steps=steps)
            dropped = seed >= (never or {}).get(x, 0)
            step = round(scale * x ** slope * math.exp(noise * rng.standard_normal())) if dropped else None
            rows.append({c: None for c in COLUMNS} | row_settings(spec) | {
                "run_id": f"{x}-{seed}", "steps_run": steps, "drop_step": step, "dropped": dropped})
    write_table(path, rows, f"python -m core.sweep --batch {','.join(map(str, xs))}")
    return path


def _seeds_late_everywhere(seeds, missing: dict | None = None) -> list[dict]:
    """Planted batch-sweep rows: a seed late at one point is late at all (x3 between seeds), drop step
    1000 x 3^(seed/3) x batch^-0.5 (slope -0.5 exactly); `missing` {batch: seed} leaves that run out."""
    rows = []
    for x in (8, 16, 32, 64):
        for seed in seeds:
            if (missing or {}).get(x) == seed:
                continue
            spec = sweep_run(batch_size=x, seed=seed, steps=10 ** 6)
            rows.append({c: None for c in COLUMNS} | row_settings(spec) | {
                "run_id": f"{x}-{seed}", "steps_run": 10 ** 6, "drop_step": round(1000 * 3 ** (seed / 3) * x ** -0.5),
                "dropped": True})
    return rows


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
    law = read_law(planted(tmp_path / "t.csv", -0.05, seeds=5, noise=1.0), Law("x", "batch_size", "B", "B",
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
            spec = sweep_run(hold=hold, clamp=clamp, seed=seed, steps=steps)
            step = None if median is None else round(median * (1 + spread * (seed - seeds // 2) / seeds))
            rows.append({c: None for c in COLUMNS} | row_settings(spec) | {
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
    readings = tmp_path / "r.csv"  # each seed's own previous-token head, as bench/seed_readings.py writes it
    readings.write_text("seed,prev_head\n0,1.1\n1,1.3\n2,1.4\n3,1.3\n4,1.4\n")
    said = clamp_sentences(path, readings)
    assert said[0].startswith("No clamp: median drop step 200")
    assert "3 of its 5 drops are abrupt" in said[0] and "3 nats or more at step 180 (median)" in said[0]
    assert any(t.startswith("With the induction clamp on 2.1, the median drop step is 0.20 times")
               and "the same seeds resampled together in both arms" in t
               and t.endswith("clearly earlier.") for t in said)
    verdict = said[-1]
    assert verdict.startswith("Singh et al. (2024) find") and "These arms test it only weakly: " in verdict
    assert "holding 1.1 brings the drop clearly earlier, and 1.1 is the previous-token head the unclamped run of " \
           "the same seed grows on 1 of those 5 seeds (the readings below find 1.1 or 1.3 or 1.4)" in verdict
    # the early drop under the induction clamp is said to be nearly forced, with the planted table's figures
    assert "clamping 2.1 brings the drop clearly earlier, but nearly by construction" in verdict
    assert "3 of its 5 drops are abrupt" in verdict
    # a clamp that changes nothing, one whose runs never drop, and a held head no seed grows by itself
    path = planted_clamps(tmp_path / "d.csv", {("none", "none"): 200, ("1.1", "none"): 200, ("none", "2.1"): None})
    readings.write_text("seed,prev_head\n0,1.4\n1,1.3\n2,1.4\n3,1.3\n4,1.4\n")
    said = clamp_sentences(path, readings)
    assert any("cannot tell it from no clamp" in t for t in said)
    assert any("none of 5 runs dropped within 600 steps (censored: training stopped there" in t for t in said)
    assert said[-1].endswith("holding 1.1 is inconclusive (the interval holds 1), and 1.1 is the previous-token head "
                             "the unclamped run of the same seed grows on 0 of those 5 seeds (the readings below find "
                             "1.3 or 1.4), so on every one of them the hold adds a previous-token head beside the one "
                             "the seed would grow instead of holding that one in place; clamping 2.1 brings the drop "
                             "later.")
    assert "nearly by construction" not in said[-1]
    # without the readings table, nothing is said about whose head is held
    assert "readings below" not in clamp_sentences(path, tmp_path / "none.csv")[-1]
    with pytest.raises(ValueError, match="unclamped arm"):
        clamp_arms(planted_clamps(tmp_path / "e.csv", {("1.1", "none"): 100, ("none", "2.1"): 40}))


def test_the_interval_resamples_whole_seeds_across_points(tmp_path):
    """A seed that drops late at one point drops late at all (a seed factor of x3 between seeds, the same at
    every point, and an exact slope): the paired bootstrap keeps each seed's runs together, so its interval is
    tight around the slope, where resampling each point's seeds on its own would mix a late seed at one point
    with an early one at the next."""
    rows = _seeds_late_everywhere(range(7))
    write_table(tmp_path / "t.csv", rows, "x")
    law = read_law(tmp_path / "t.csv", BATCH)
    assert paired(law.points) and seed_rank_correlation(law.points) == pytest.approx(1.0)
    assert law.fit.high - law.fit.low < 0.02 and law.fit.low <= -0.5 <= law.fit.high
    assert all(s == pytest.approx(-0.5, abs=0.01) for s in seed_slopes(law.points).values())
    unpaired = tuple(replace(p, seeds=tuple(s + 10 * i for s in p.seeds)) for i, p in enumerate(law.points))
    assert not paired(unpaired) and seed_rank_correlation(unpaired) is None
    wide = fit_points(unpaired)  # each point's seeds drawn on their own
    assert wide.slope == law.fit.slope and wide.high - wide.low > 10 * (law.fit.high - law.fit.low)
    said = " ".join(sentences(law))
    assert "the same seeds resampled together at every point, 1000 times" in said
    assert "seed k starts from the same initial weights at every point" in said
    assert "Spearman rank correlation of +1.00" in said and "from −0.50 to −0.50 (7 seeds" in said


def test_a_shipped_laws_interval_is_the_paired_bootstrap_over_its_seeds():
    """The batch table's interval, recomputed here from the CSV with numpy: one draw of seed indices per
    resample (core.reading.bootstrap's generator and seed), used at every point; a never-dropped run
    counts as later than any, so a resample whose median at B = 8 (left of the mean log B) is censored has the
    slope -inf: every resample is kept, the censored ones rank first, and with more than 2.5% of them the lower
    end is open."""
    law = LAWS["batch"]
    if not law.path.is_file():
        pytest.skip("checkpoints/laws/batch.csv is not shipped")
    t = read_table(law.path)
    wide = t.pivot(index="seed", columns="batch_size", values="drop_step").astype(float).fillna(np.inf)
    xs = np.log(wide.columns.to_numpy(dtype=float))
    idx = np.random.default_rng(0).integers(0, len(wide), (1000, len(wide)))
    medians = np.median(wide.to_numpy()[idx], axis=1)  # [1000, points]
    ok = np.isfinite(medians).all(axis=1)
    assert np.isinf(medians[~ok][:, 1:]).sum() == 0  # only B = 8 is ever censored
    slopes = np.full(len(medians), -np.inf)
    slopes[ok] = np.polyfit(xs, np.log(medians[ok]).T, 1)[0]
    fit = read_law(law.path, law).fit
    assert fit.resamples == 1000 and fit.censored == (~ok).sum() > 25
    assert fit.low == -np.inf and fit.open
    assert fit.high == pytest.approx(np.quantile(slopes, 0.975), abs=1e-9)


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
    assert "leaves median 0.50, from 0.30 to 0.95 of M(clean) − M(corrupted), clearly needed (its interval ending " \
           "below 0.9) on 2 of 3" in said[2]
    assert "interval over its sequences is 0.10 wide (median); the seeds spread over 0.65" in said[2]
    assert "most needed one into all of block 2 on 1 of 3 seeds, another head's on 1, no clear answer on 1" in said[3]
    assert "from 0.30 to 0.90 of the gap, within 0.05 of noising the head's whole output on every seed." in said[3]
    assert "restores the most of M on 2 of 3 seeds" in said[4] and "per seed: 4, 3, 2." in said[4]
    assert "block 2's single-head patches summed (each head patched on its own, then added: not one patch of " \
           "them all together) median 1.40, from 0.80 to 1.60" in said[4] and "heads together median" not in said[4]


SHIPPED = [p for p in [*(law.path for law in LAWS.values()), LAWS_DIR / "init.csv", LAWS_DIR / "clamps.csv",
                       LAWS_DIR / "targets.csv"]
           if p.is_file()]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_each_shipped_table_is_what_its_command_makes_with_five_seeds_a_point(path, monkeypatch):
    if path.stem in LAWS:
        result = read_law(path, LAWS[path.stem])
        assert len(result.points) >= 3 and all(p.n >= 5 for p in result.points)
    elif path.stem == "clamps":
        assert len(clamp_arms(path)) >= 3 and all(p.n >= 5 for p in clamp_arms(path).values())
    elif path.stem == "targets":
        from core.laws.stages import stage_frame, targets_table

        frame = stage_frame(targets_table(path))
        assert len(frame) == 18 and (frame["n"] >= 5).all()
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
    assert sorted(run_id(s, table["code"][0]) for s in caught["specs"]) == sorted(table["run_id"])


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


def _stages_table(path, onset_slope=0.0, completion_slope=-1.0, seeds=6, noise=0.05):
    """A constant-rate table (the targets.csv layout): T 64/96/160 at B = 32 and B 8/16/64 at T = 96, whose
    onset, drop and completion steps are planted power laws of T (onset_slope, -0.5, completion_slope) and of
    B (0, 0, -0.5), times lognormal noise a seed keeps at every point."""
    rng = np.random.default_rng(2)
    seed_noise = np.exp(noise * rng.standard_normal((seeds, 3)))
    rows = []
    for T, B in [(64, 32), (96, 32), (160, 32), (96, 8), (96, 16), (96, 64)]:
        for seed in range(seeds):
            spec = sweep_run(seq_len=T, batch_size=B, seed=seed, steps=2000, decay_steps=0, stop_below=0.5)
            onset, drop, done = (s * (T / 96) ** a * (B / 32) ** b * seed_noise[seed, i] for i, (s, a, b) in
                                 enumerate([(80, onset_slope, 0.0), (150, -0.5, 0.0), (300, completion_slope, -0.5)]))
            rows.append({c: None for c in COLUMNS} | row_settings(spec) | {
                "run_id": f"{T}-{B}-{seed}", "steps_run": round(done), "drop_step": round(drop), "dropped": True,
                "onset_step": round(onset), "completion_step": round(done)})
    write_table(path, rows, "python -m core.sweep --spec targets.json --decay-steps 0")
    return path


def test_later_copy_targets_per_sequence_are_what_the_task_masks():
    """later_targets against the task's own later-copy mask on a large sampled batch (an independent count)."""
    import torch

    from core.laws.stages import later_targets
    from core.model.task import TaskConfig, copy_masks, sample_batch

    for T in (64, 96, 160):
        task = TaskConfig(period_min=16, period_max=32, seq_len=T)
        _, periods = sample_batch(task, 20000, 64, generator=torch.Generator().manual_seed(0))
        counted = copy_masks(periods, T)["later"].sum(1).double().mean().item()
        assert later_targets(16, 32, T) == pytest.approx(counted, rel=0.01)
    assert later_targets(16, 32, 96) == 72.0


def test_the_stages_recover_planted_slopes_and_say_which_fall(tmp_path):
    """Planted: along T completion falls as T^-1, the onset is flat; the sentences say so, from the fits."""
    from core.laws.stages import stage_fits, stage_frame, stage_sentences, targets_table

    table = targets_table(_stages_table(tmp_path / "targets.csv"))
    assert set(table["targets_per_step"]) == {32 * 40.0, 32 * 72.0, 32 * 136.0, 8 * 72.0, 16 * 72.0, 64 * 72.0}
    fits = stage_fits(table)
    assert fits[("seq_len", "completion_step")].slope == pytest.approx(-1.0, abs=0.03)
    assert fits[("seq_len", "onset_step")].slope == pytest.approx(0.0, abs=0.03)
    assert fits[("batch_size", "completion_step")].slope == pytest.approx(-0.5, abs=0.03)
    frame = stage_frame(table)
    assert len(frame) == 18 and (frame["reached"] == 6).all()
    said = " ".join(stage_sentences(table))
    assert "the steps to 0.5 nats fall with T while the onset shows no clear trend" in said
    assert "every run reached all three stages within its cap, so none is censored" in said
    assert "never reached" not in said
    # the onset is flat in both series, so against targets per step both slopes are 0: the series agree
    assert "the head-score onset's slope is +0.00" in said
    # flat against targets per step too, pooled: the runs cannot tell "targets count" from "only steps count"
    assert ('the pooled slope\'s interval holds 0, so they cannot tell "what counts is how many targets a step holds" '
            'from "only the steps count" either') in said
    both = stage_sentences(targets_table(_stages_table(tmp_path / "b.csv", onset_slope=-1.0)))
    assert "the steps to 0.5 nats and the onset both fall with T" in " ".join(both)


def test_a_point_gets_its_own_cap_and_the_censored_runs_are_said_where_they_are(tmp_path):
    """The spec's joint key "seq_len, batch_size, steps" gives one point a longer cap (targets.json does, for
    B = 8); the sentences say each cap and name every run that never reached a stage, by point and seed."""
    from core.laws.stages import caps_text, stage_points, stage_sentences, targets_table
    from core.sweeps.grid import grid

    specs = grid({"seq_len, batch_size, steps": [(96, 32, 2000), (96, 8, 6000)], "seed": [0, 1]})
    assert [(s.train.batch_size, s.train.steps, s.train.seed) for s in specs] == [(32, 2000, 0), (32, 2000, 1),
                                                                 (8, 6000, 0), (8, 6000, 1)]
    assert len({run_id(s, "c") for s in specs}) == 4
    path = _stages_table(tmp_path / "targets.csv")
    t = read_table(path)
    b8 = t["batch_size"] == 8
    t.loc[b8, "steps"] = 6000
    never = (b8 & t["seed"].isin([1, 4])) | ((t["seq_len"] == 64) & (t["seed"] == 0))
    t.loc[never, "completion_step"] = None
    t.loc[b8 & (t["seed"] == 4), ["drop_step", "dropped"]] = [None, False]
    t.loc[never, "steps_run"] = t.loc[never, "steps"]
    write_table(path, t.astype(object).where(t.notna(), None).to_dict("records"), "python -m core.sweep")
    table = targets_table(path)
    assert caps_text(table) == "step 2000 (6000 at T = 96, B = 8)"
    (point,) = stage_points(table[b8], "completion_step", "batch_size")
    assert point.cap == 6000 and point.n_dropped == 4
    said = stage_sentences(table)[0]
    assert ("or at its cap, step 2000 (6000 at T = 96, B = 8): 0 never reached the head-score onset; 1 never reached "
            "the drop (ln V / 2) at T = 96, B = 8 (seed 4); 3 never reached the completion (0.5 nats) at T = 64, "
            "B = 32 (seed 0) and T = 96, B = 8 (seeds 1 and 4). A run that never reached a stage is censored") in said


def test_a_power_is_never_rounded_across_the_power_asked_for():
    from core.laws.stages import power_percent

    assert power_percent(0.795) == "79.5%" and power_percent(0.7999) == "79.99%"
    assert [power_percent(x) for x in (0.8, 0.804, 0.61, 0.4, 0.999, 1.0)] == ["80%", "80%", "61%", "40%", "99.9%",
                                                                                "100%"]


def test_a_decaying_table_is_not_read_as_a_constant_rate_one(tmp_path):
    from core.laws.stages import targets_table

    path = planted(tmp_path / "t.csv", -0.5)
    with pytest.raises(ValueError, match="decaying rate|lacks"):
        targets_table(path)
    with pytest.raises(ValueError, match="no table"):
        targets_table(tmp_path / "none.csv")


def test_the_power_of_a_slope_test_follows_the_seed_spread():
    """Without noise any number of seeds tells -0.5 from 0; with a spread, power grows with the seeds, and a
    slope of 0 is 'told apart' from 0 only at the test's own level (about 5%)."""
    from core.laws.stages import seeds_needed, slope_power
    from core.laws.stats import Point

    xs = (64.0, 96.0, 160.0)
    exact = tuple(Point(x, tuple(range(6)), tuple(300 * (x / 96) ** -0.5 for _ in range(6)), 2000) for x in xs)
    power = slope_power(exact)
    assert (power["power"] == 1).all() and seeds_needed(power) == 3
    rng = np.random.default_rng(0)
    noise = np.exp(0.35 * rng.standard_normal((12, 3)))
    noisy = tuple(Point(x, tuple(range(12)), tuple(float(200 * noise[s, i]) for s in range(12)), 2000)
                  for i, x in enumerate(xs))
    power = slope_power(noisy).set_index("n")["power"]
    assert power[32] > power[3] and power[32] > 0.5
    level = slope_power(noisy, slope=0.0).set_index("n")["power"]
    assert (level <= 0.1).all()
    assert slope_power(noisy[:1]) is None  # one point: no slope
    few = tuple(Point(p.x, p.seeds[:4], p.steps[:4], 2000) for p in noisy)
    assert slope_power(few) is None  # four seeds: too few to resample a spread from
    import pandas as pd

    wobbly = pd.DataFrame({"n": [3, 5, 7, 9], "power": [0.9, 0.7, 0.85, 0.9]})
    assert seeds_needed(wobbly) == 7 and seeds_needed(wobbly.assign(power=0.5)) is None


def test_a_bootstrap_that_meets_censored_medians_keeps_every_resample_and_opens_an_end(tmp_path):
    """3 of 7 runs at B = 64 never drop: the point keeps a median (4 dropped), but a resample that draws 4 or more
    of those 3 seeds has a censored median there, later than any step, so its slope (B = 64 is right of the mean
    log B) is +inf. Every resample is kept and counted; the share of such resamples, about 29%, is far above the
    2.5% tail, so the upper end is open, and the sentences say so and what the open end rests on."""
    law = read_law(planted(tmp_path / "t.csv", -0.5, never={64: 3}, steps=20000), Law(
        "x", "batch_size", "B", "B", (AOYAMA, MUSAT)))
    fit = law.fit
    steps = np.array([[math.inf if s is None else s for s in p.steps] for p in law.points]).T  # [seeds, points]
    idx = np.random.default_rng(0).integers(0, 7, (1000, 7))
    censored = int(np.isinf(np.median(steps[idx], axis=1)).any(axis=1).sum())
    assert 200 < censored < 400 and fit.censored == censored and fit.resamples == 1000
    assert fit.high == math.inf and math.isfinite(fit.low) and fit.open
    said = " ".join(sentences(law))
    assert f"to +inf, over 4 points of 7 seeds, the same seeds resampled together at every point, 1000 times; " \
           f"{censored} of them met a censored median" in said
    # the open end holds +2.00 only through the censored runs: the sentence places them at 1, 2 and 4 caps
    assert "These runs cannot rule it out, nor confirm it: +2.00 is inside the interval only through its open end" \
        in said
    assert "The open end rests on the 3 runs that never dropped (B = 64, seed 0; B = 64, seed 1; B = 64, seed 2)" \
        in said
    for m in (1, 2, 4):
        assert f"at step {m * 20000}" in said
    # dropping the censored resamples, as a fit that leaves them out would, gives a closed and narrower interval
    ok = np.isfinite(np.median(steps[idx], axis=1)).all(axis=1)
    dropped = np.polyfit(np.log([8, 16, 32, 64]), np.log(np.median(steps[idx][ok], axis=1)).T, 1)[0]
    assert np.quantile(dropped, 0.975) < 2.0


def test_points_missing_a_seed_are_still_resampled_together(tmp_path):
    """A seed late at one point is late at all (x3 between seeds) with an exact slope; one point lacks seed 6.
    The seeds are drawn together at every point (a drawn seed a point lacks left out there), so the interval stays
    tight around the slope, as with every seed everywhere."""
    rows = _seeds_late_everywhere(range(7), missing={16: 6})
    write_table(tmp_path / "t.csv", rows, "x")
    law = read_law(tmp_path / "t.csv", BATCH)
    assert not paired(law.points) and law.fit.paired
    assert law.fit.low <= -0.5 <= law.fit.high and law.fit.high - law.fit.low < 0.2
