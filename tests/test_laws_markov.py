"""The Markov-chain table of the Laws page (core.laws.markov, checkpoints/laws/markov.csv): every sentence pinned to
the shipped table's numbers, computed here from the CSV with pandas and numpy; planted tables for the fit, the
censored and the skipped runs; bad tables refused; the header's command is the table's; the page shows it."""
import math
import re
import shlex
import sys

import numpy as np
import pandas as pd
import pytest

from core.laws.markov import (
    MARKOV_FILE,
    PRIOR_FILE,
    compare,
    fits,
    markov_frame,
    markov_sentences,
    onset_points,
    prior_frame,
    prior_sentences,
    ratio_interval,
    read_markov,
    read_prior,
)

from helpers import ROOT, open_app

COLUMNS = ["n_states", "concentration", "seq_len", "n_layers", "seed", "steps", "steps_run", "unigram_step",
           "bigram_step", "kl_uniform", "kl_unigram", "kl_bigram", "cpu_s", "cpu"]
shipped = pytest.mark.skipif(not MARKOV_FILE.is_file(), reason="checkpoints/laws/markov.csv is not installed")


def signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def table() -> pd.DataFrame:
    return pd.read_csv(MARKOV_FILE, comment="#")


def median(steps: pd.Series) -> float:
    """The median with a censored run (NaN) counted as later than any: inf when half the runs or more are."""
    v = np.sort(steps.fillna(math.inf).to_numpy(float))
    k = len(v)
    return float(v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2)


def write(path, rows, command="python bench/markov_onsets.py --setting n_states --values 2,3 --seeds 0-1"):
    with open(path, "w") as f:
        f.write(f"# test table\n# command: {command}\n")
        pd.DataFrame(rows, columns=COLUMNS).to_csv(f, index=False)
    return path


def planted(path, slope=1.5, ks=(2, 3, 4, 6), seeds=8, noise=0.05, cap=100000, skip=None):
    """A table whose bigram onset is 50 k^slope times lognormal noise and whose unigram onset is a fifth of it;
    `skip` {k: seeds} of runs that never were nearest to the unigram strategy."""
    rng = np.random.default_rng(3)
    rows = []
    for k in ks:
        for s in range(seeds):
            bigram = round(50 * k ** slope * math.exp(noise * rng.standard_normal()))
            unigram = None if s in (skip or {}).get(k, ()) else round(bigram / 5)
            rows.append([k, 1.0, 100, 2, s, cap, bigram + 10, unigram, bigram, 0.1, 0.05, 0.01, 1.0, "test"])
    return write(path, rows)


def test_the_fit_recovers_a_planted_slope_and_the_unigram_stage_length(tmp_path):
    mt = read_markov(planted(tmp_path / "m.csv", slope=1.5))
    assert mt.axis == "n_states"
    f = fits(mt)
    assert f["bigram_step"].low <= 1.5 <= f["bigram_step"].high and abs(f["bigram_step"].slope - 1.5) < 0.1
    assert f["length"].low <= 1.5 <= f["length"].high  # 4/5 of the bigram onset: the same slope
    said = markov_sentences(mt)
    assert "Every run reached the bigram stage within the cap, so none is censored" in said[0]
    assert f"slope is {signed(f['bigram_step'].slope)}" in said[2] and "comes later as k grows" in said[2]


def test_a_skipped_unigram_stage_is_said_and_not_counted_late(tmp_path):
    mt = read_markov(planted(tmp_path / "m.csv", skip={6: (1, 5)}))
    said = markov_sentences(mt)
    assert "2 were never the nearest to the unigram strategy before their bigram stage" in said[0]
    assert "(at k = 6: seeds 1 and 5)" in said[0]
    (six,) = [p for p in onset_points(mt, "unigram_step") if p.x == 6]
    assert six.n == 6 and six.n_dropped == 6  # left out, not censored
    (big,) = [p for p in onset_points(mt, "bigram_step") if p.x == 6]
    assert big.n == 8


def test_a_point_censored_at_its_median_is_left_out_of_the_fit_and_said(tmp_path):
    path = planted(tmp_path / "m.csv", cap=1000)
    t = pd.read_csv(path, comment="#")
    t.loc[(t["n_states"] == 6) & (t["seed"] < 4), ["bigram_step"]] = np.nan  # 4 of 8: the median is censored
    write(path, t.to_numpy().tolist())
    mt = read_markov(path)
    assert fits(mt)["bigram_step"].xs == (2.0, 3.0, 4.0)
    said = markov_sentences(mt)
    assert "4 never reached the bigram stage within the cap (k = 6: seeds 0, 1, 2 and 3)" in said[0]
    assert "k = 6, above the cap of 1000 steps (4 of 8 runs never reached it)" in said[1]
    assert "The point at k = 6 has no median" in said[2]


@pytest.mark.parametrize("change, message", [
    (lambda t: t.drop(columns=["bigram_step"]), "lacks bigram_step"),
    (lambda t: t.assign(concentration=[0.3, 1.0] * (len(t) // 2)), "varies n_states, concentration"),
    (lambda t: t[t["n_states"] == 2], "varies nothing"),
    (lambda t: t[~((t["n_states"] == 3) & (t["seed"] > 0))], "n_states = 3 has 1 seed(s)"),
    (lambda t: pd.concat([t, t.iloc[:1]]), "seed 0 appears twice at n_states = 2"),
])
def test_bad_tables_are_refused_with_what_is_wrong(tmp_path, change, message):
    t = pd.read_csv(planted(tmp_path / "m.csv", ks=(2, 3), seeds=4), comment="#")
    bad = change(t)
    path = tmp_path / "bad.csv"
    path.write_text("# command: x\n" + bad.to_csv(index=False))
    with pytest.raises(ValueError, match=re.escape(message)):
        read_markov(path)
    with pytest.raises(ValueError, match="no table at"):
        read_markov(tmp_path / "missing.csv")


@shipped
def test_the_shipped_table_is_what_its_header_command_makes():
    """The header's command names the table's setting, values, seeds and cap (bench/markov_onsets.py's flags)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import markov_onsets

    mt = read_markov()
    argv = shlex.split(mt.command)
    assert argv[:2] == ["python", "bench/markov_onsets.py"]
    t = table()
    opts = dict(zip(argv[2::2], argv[3::2]))
    assert opts["--out"] == "checkpoints/laws/markov.csv" and opts["--setting"] == mt.axis
    assert sorted(t[mt.axis].unique()) == sorted(float(v) for v in opts["--values"].split(","))
    assert set(t["seed"]) == set(markov_onsets.seeds_of(opts["--seeds"]))
    assert (t["steps"] == int(opts["--steps"])).all()
    assert len(t) == t[mt.axis].nunique() * t["seed"].nunique()


@pytest.mark.slow
@shipped
def test_a_shipped_run_is_trained_again_to_the_same_onsets():
    """The cheapest run of the table, trained again by the script's own function: the same onsets and stop."""
    sys.path.insert(0, str(ROOT / "bench"))
    import markov_onsets

    mt = read_markov()
    row = mt.table.sort_values("steps_run").iloc[0]
    again = markov_onsets.run(mt.axis, float(row[mt.axis]), int(row["seed"]), int(row["steps"]))
    assert (again["unigram_step"], again["bigram_step"], again["steps_run"]) == (
        row["unigram_step"], row["bigram_step"], row["steps_run"])


@shipped
def test_every_shipped_sentence_is_the_tables_numbers():
    t = table()
    axis = "n_states" if t["n_states"].nunique() > 1 else "concentration"
    k = "k" if axis == "n_states" else "α"
    said = markov_sentences()
    values = sorted(t[axis].unique())
    censored = t[t["bigram_step"].isna()]
    skip = t[t["unigram_step"].isna() & t["bigram_step"].notna()]
    first = said[0]
    assert first.startswith(f"{len(t)} runs of the 2-block Markov preset ({t.groupby(axis)['seed'].nunique().max()} "
                            f"seeds at each of {len(values)} values")
    assert f"cap of {int(t['steps'].max())} steps" in first
    if len(censored):
        assert f"{len(censored)} never reached the bigram stage within the cap (" in first
        for x, g in censored.groupby(axis):
            seeds = sorted(int(s) for s in g["seed"])
            listed = str(seeds[0]) if len(seeds) == 1 else ", ".join(map(str, seeds[:-1])) + f" and {seeds[-1]}"
            assert f"{k} = {x:g}: seed{'s' if len(seeds) > 1 else ''} {listed}" in first
    assert (f"{len(skip)} were never the nearest to the unigram strategy before their bigram stage" in first) == \
        bool(len(skip))
    # the rate the capped runs had: held, then falling to 10% over the last decay_steps (TrainConfig's schedule)
    held = int(t["steps"].max()) - 300
    late = int((t["bigram_step"] >= held).sum())
    assert (f"held for {held} steps and then falls linearly to 10% of it over steps {held}-{int(t['steps'].max())}"
            in first) and f"({late} bigram onset{'' if late == 1 else 's'} came at step {held} or later" in first
    for x, g in t.groupby(axis):
        m = median(g["bigram_step"])
        if math.isfinite(m):
            low, high = np.quantile(g["bigram_step"].fillna(math.inf), [0.25, 0.75], method="nearest")
            high_text = f"{high:g}" if math.isfinite(high) else f"above {int(g['steps'].max())}"
            assert f"{k} = {x:g}, step {m:g} (quartiles {low:g} to {high_text})" in said[1], x
        else:
            n_never = int(g["bigram_step"].isna().sum())
            assert f"{k} = {x:g}, above the cap of {int(g['steps'].max())} steps ({n_never} of {len(g)} runs" in said[1]
        u = g[g["unigram_step"].notna() | g["bigram_step"].isna()]["unigram_step"]
        assert f"{k} = {x:g}, step {median(u):g}" in said[1].split("Median unigram onset")[1], x
    # the slope: least squares on the finite log medians, written independently with numpy
    med = {x: median(g["bigram_step"]) for x, g in t.groupby(axis)}
    fitted = {x: m for x, m in med.items() if math.isfinite(m)}
    slope = np.polyfit(np.log(list(fitted)), np.log(list(fitted.values())), 1)[0]
    fit = fits(read_markov())["bigram_step"]  # the interval: the bootstrap is core.laws's own
    assert fit.slope == pytest.approx(slope, abs=1e-9) and fit.low < slope < fit.high
    # every resample kept: those that meet a censored median (k = 4 is the largest fitted k, right of the mean
    # log k) have the slope +inf, so with more than 25 of them the upper end is open
    wide = t.pivot(index="seed", columns=axis, values="bigram_step")[list(fitted)].astype(float).fillna(math.inf)
    idx = np.random.default_rng(0).integers(0, len(wide), (1000, len(wide)))
    censored = int(np.isinf(np.median(wide.to_numpy()[idx], axis=1)).any(axis=1).sum())
    assert fit.censored == censored and fit.resamples == 1000
    assert (fit.high == math.inf) == (censored > 25)
    high = "+inf" if fit.high == math.inf else signed(fit.high)
    assert (f"the median bigram onset's log-log slope is {signed(slope)} (95% interval {signed(fit.low)} to "
            f"{high}, over {len(fitted)} points") in said[2]
    if censored:
        assert f"in {censored} of them a point's median was censored" in said[2]
    verdict = "comes later" if fit.low > 0 else "comes earlier" if fit.high < 0 else "shows no clear trend"
    assert f"the bigram stage {verdict} as {k} grows" in said[2]
    # Edelman et al.: the order, the share of the steps before the bigram onset spent in the unigram stage
    reached = t[t["bigram_step"].notna()]
    first_count = int((reached["unigram_step"] < reached["bigram_step"]).sum())
    assert f"on {first_count} of the {len(reached)} runs that reached the bigram stage, the unigram stage came first" \
        in said[3]
    both = reached[reached["unigram_step"].notna()]
    share = float(np.median((both["bigram_step"] - both["unigram_step"]) / both["bigram_step"]))
    assert f"it lasted a median {share:.0%} of the steps before the bigram onset" in said[3]
    zero = int((reached["unigram_step"] == 0).sum())
    assert (f"({zero} of them from step 0" in said[3]) == bool(zero)
    assert "What this table cannot tell is whether the bigram stage would come sooner without the unigram one" \
        in said[4]
    assert ("The prior table below takes that up" in said[4]) == PRIOR_FILE.is_file()
    assert "The paper's setting beside the lab's" in said[5]


@shipped
def test_the_chart_frame_holds_every_run_and_draws_a_censored_one_at_the_cap():
    t = table()
    frame = markov_frame()
    skip = int((t["unigram_step"].isna() & t["bigram_step"].notna()).sum())
    assert len(frame) == 2 * len(t) - skip
    never = frame[~frame["reached"]]
    assert (never["y"] == int(t["steps"].max())).all()
    assert int((~frame[frame["stage"] == "bigram stage"]["reached"]).sum()) == int(t["bigram_step"].isna().sum())


@pytest.mark.app
@shipped
def test_the_laws_page_shows_the_markov_section_from_its_table():
    at = open_app("app_pages/laws.py")
    at.toggle(key="lw_advanced").set_value(True).run()  # the sentences are the researcher view's
    text = "\n".join(m.value for m in at.markdown)
    assert "Markov chains: when the unigram and bigram stages begin" in [h.value for h in at.subheader]
    for sentence in markov_sentences():
        assert sentence in text
    assert any("bench/markov_onsets.py --setting" in c.value for c in at.code)


# The prior table (checkpoints/laws/markov_prior.csv): the same preset on doubly stochastic chains, and on those
# with unigram-optimal chains mixed in.

PRIOR_COLUMNS = ["n_states", "concentration", "seq_len", "n_layers", "prior", "unigram_share", "seed", "steps",
                 "steps_run", "unigram_step", "bigram_step", "bigram_seqs", "kl_uniform", "kl_unigram", "kl_bigram",
                 "cpu_s", "cpu"]
prior_shipped = pytest.mark.skipif(not PRIOR_FILE.is_file(),
                                   reason="checkpoints/laws/markov_prior.csv is not installed")
ARMS = (("dirichlet", 0.0), ("doubly_stochastic", 0.0), ("doubly_stochastic", 0.25))


def write_prior(path, bigram: dict, unigram: dict, cap=1000):
    """A prior table: bigram {arm: [onset step per seed, None: censored]}, unigram {arm: [step or None]}."""
    rows = []
    for arm, steps in bigram.items():
        kept = 32 - round(arm[1] * 32)
        for seed, b in enumerate(steps):
            rows.append([3, 1.0, 100, 2, arm[0], arm[1], seed, cap, cap if b is None else b + 10, unigram[arm][seed], b,
                         None if b is None else b * kept, 0.1, 0.1, 0.1, 1.0, "test"])
    with open(path, "w") as f:
        f.write("# test table\n# command: python bench/markov_onsets.py --setting prior\n")
        pd.DataFrame(rows, columns=PRIOR_COLUMNS).to_csv(f, index=False)
    return path


def planted_prior(path, shift=(0, 100, 250), spread=10, censored_last=True):
    """Ten seeds an arm, bigram onsets 100 + shift + spread x seed steps; the doubly stochastic runs never nearest
    to the unigram strategy but two; the mixture's last seed censored."""
    bigram = {arm: [100 + d + spread * s for s in range(10)] for arm, d in zip(ARMS, shift)}
    if censored_last:
        bigram[ARMS[2]][-1] = None
    unigram = {ARMS[0]: [10] * 10, ARMS[1]: [None] * 8 + [20, 20], ARMS[2]: [10] * 10}
    return write_prior(path, bigram, unigram)


def test_a_planted_prior_table_gives_its_medians_counts_and_verdicts(tmp_path):
    pt = read_prior(planted_prior(tmp_path / "p.csv"))
    full, ds, mix = (pt.arm(*a) for a in ARMS)
    # medians in sequences seen that are not unigram-optimal: 32 a batch, 24 with a quarter unigram-optimal
    assert full.seqs.median == 145 * 32 and ds.seqs.median == 245 * 32 and mix.seqs.median == 395 * 24
    assert full.interval()[0] < full.seqs.median < full.interval()[1]
    assert (ds.skipped, ds.unigram_first, full.unigram_first, mix.unigram_first) == (8, 2, 10, 9)
    said = prior_sentences(pt)
    assert said[0].startswith("30 runs of the 2-block Markov preset at k = 3 states, 10 seeds on each of 3 training "
                              "distributions")
    assert "1 of 10 on doubly stochastic chains with 25% of each batch unigram-optimal" in said[0]
    assert "2 of 10 runs on doubly stochastic chains (8 reached the bigram stage without it)" \
        in said[1]
    assert "here 8 of 10 runs were never the nearest to the unigram strategy before their bigram stage" in said[1]
    low, high = full.interval()
    assert f"the full Dirichlet prior, 4,640 (95% interval {low:,.0f} to {high:,.0f})" in said[2]
    assert "the median bigram onset was 7,840 sequences on doubly stochastic chains against 4,640 on the full " \
           "prior (1.69 times as many; 95% interval of the ratio " in said[3]
    assert "the seeds resampled together): the interval lies wholly above 1, so on doubly stochastic chains it came " \
           "later" in said[3]
    assert "the median bigram onset was 9,480 sequences with 25% of each batch unigram-optimal against 7,840 on " \
           "doubly stochastic chains alone (1.21 times as many; 95% interval of the ratio " in said[4]
    assert ratio_interval(ds, mix)[0] > 1 and "the interval lies wholly above 1" in said[4]
    assert "Here too the unigram-optimal chains delayed the bigram stage" in said[5]
    assert "k = 3 states as in the authors' public code for the mixture experiment" in said[5]
    assert "Sinkhorn-balanced" in said[5]
    frame = prior_frame(pt)
    assert len(frame) == 30 and (frame[~frame["reached"]]["y"] == 1000 * 24).all()


def test_the_ratio_of_two_medians_is_resampled_with_the_seeds_paired(tmp_path):
    """An arm whose every seed takes exactly twice another's: resampling the seeds together, every resample's
    ratio of medians is 2 (the interval is the point 2); with no seed in common the two arms' draws are
    independent and the interval is wider."""
    base = [100 + 10 * s for s in range(10)]
    arms = {ARMS[0]: base, ARMS[1]: [2 * b for b in base], ARMS[2]: base}
    pt = read_prior(write_prior(tmp_path / "p.csv", arms, {a: [10] * 10 for a in ARMS}))
    full, ds = pt.arm(*ARMS[0]), pt.arm(*ARMS[1])
    assert ratio_interval(full, ds) == (2.0, 2.0) and compare(full, ds) == "later"
    shifted = pd.read_csv(tmp_path / "p.csv", comment="#")
    shifted.loc[shifted["prior"] == "doubly_stochastic", "seed"] += 100  # no seed in common: drawn apart
    path = tmp_path / "q.csv"
    path.write_text("# command: x\n" + shifted.to_csv(index=False))
    low, high = ratio_interval(read_prior(path).arm(*ARMS[0]), read_prior(path).arm(*ARMS[1]))
    assert low < 2 < high


def test_a_ratio_whose_interval_holds_1_is_said_to_decide_nothing(tmp_path):
    """The mixture 40 steps later than doubly stochastic chains, but its seeds in the reverse order: resampled
    together, the ratio of the medians swings across 1, and the page says no conclusion."""
    bigram = {ARMS[0]: [100 + 20 * s for s in range(10)], ARMS[1]: [100 + 20 * s for s in range(10)],
              ARMS[2]: [140 + 20 * (9 - s) for s in range(10)]}
    pt = read_prior(write_prior(tmp_path / "p.csv", bigram, {a: [10] * 10 for a in ARMS}))
    low, high = ratio_interval(pt.arm(*ARMS[1]), pt.arm(*ARMS[2]))
    assert low < 1 < high
    said = prior_sentences(pt)
    assert "the interval holds 1, so by it alone these seeds allow no conclusion" in said[4]
    # the paired test, from the same seeds in sequences seen (the mixture's 24 of 32 a batch): 24 (140 + 20 (9 - s))
    # - 32 (100 + 20 s) = 4480 - 1120 s, later on seeds 0-3, a tie at seed 4 left out; p from every sign pattern
    p, later, n = exact_signed_rank(pt.arm(*ARMS[1]).seqs.steps, pt.arm(*ARMS[2]).seqs.steps)
    assert (later, n) == (4, 9) and p > 0.05
    assert f"on 4 of 9 seeds that differ; a paired Wilcoxon signed-rank test gives p = {p:.3f}" in said[4]
    assert "So the paired test" not in said[4]
    # 40 steps later, but in doubly stochastic sequences (24 a batch against 32) 5,520 against 6,080: sooner
    assert "Here the mixture's median came sooner than on doubly stochastic chains alone, but the ratio's interval " \
           "holds 1, so this table neither supports nor refutes it" in said[5]
    assert "Every run reached the bigram stage within the cap." in said[0]


def test_a_mixture_that_comes_sooner_is_said_to_go_against_the_claim(tmp_path):
    pt = read_prior(planted_prior(tmp_path / "p.csv", shift=(0, 300, 0), censored_last=False))
    said = prior_sentences(pt)
    assert "so with 25% of each batch unigram-optimal it came sooner" in said[4]
    assert "against the claim, in this lab's setting" in said[5]


@pytest.mark.parametrize("change, message", [
    (lambda t: t.drop(columns=["bigram_seqs"]), "lacks bigram_seqs"),
    (lambda t: t.assign(n_states=[3, 4] * (len(t) // 2)), "varies n_states"),
    (lambda t: t.assign(prior="uniform"), "unknown prior: uniform"),
    (lambda t: t[t["prior"] == "dirichlet"], "has one arm"),
    (lambda t: t[~((t["prior"] == "dirichlet") & (t["seed"] > 0))], "dirichlet with unigram share 0 has 1 seed(s)"),
    (lambda t: pd.concat([t, t.iloc[:1]]), "seed 0 appears twice on dirichlet"),
])
def test_bad_prior_tables_are_refused_with_what_is_wrong(tmp_path, change, message):
    t = pd.read_csv(planted_prior(tmp_path / "p.csv"), comment="#")
    path = tmp_path / "bad.csv"
    path.write_text("# command: x\n" + change(t).to_csv(index=False))
    with pytest.raises(ValueError, match=re.escape(message)):
        read_prior(path)
    with pytest.raises(ValueError, match="no table at"):
        read_prior(tmp_path / "missing.csv")


def prior_table() -> pd.DataFrame:
    return pd.read_csv(PRIOR_FILE, comment="#")


@prior_shipped
def test_the_shipped_prior_table_is_what_its_header_command_makes():
    sys.path.insert(0, str(ROOT / "bench"))
    import markov_onsets

    pt = read_prior()
    argv = shlex.split(pt.command)
    opts = dict(zip(argv[2::2], argv[3::2]))
    assert argv[:2] == ["python", "bench/markov_onsets.py"] and opts["--setting"] == "prior"
    assert opts["--out"] == "checkpoints/laws/markov_prior.csv"
    t = prior_table()
    arms = {markov_onsets.prior_of(v) for v in opts["--values"].split(",")}
    assert set(zip(t["prior"], t["unigram_share"])) == arms
    assert set(t["seed"]) == set(markov_onsets.seeds_of(opts["--seeds"])) and (t["steps"] == int(opts["--steps"])).all()
    assert len(t) == len(arms) * t["seed"].nunique()
    # the onset in sequences seen that are not unigram-optimal: step x batch x (1 - share), exact
    reached = t[t["bigram_step"].notna()]
    kept = 32 - (reached["unigram_share"] * 32).round()
    assert (reached["bigram_seqs"] == reached["bigram_step"] * kept).all()


def exact_signed_rank(x, y):
    """The exact two-sided Wilcoxon signed-rank p of y against x (no censored runs), written here by listing
    every sign pattern with itertools: (p, seeds where y is later, seeds that differ)."""
    import itertools

    d = [b - a for a, b in zip(x, y) if b != a]
    order = sorted(range(len(d)), key=lambda i: abs(d[i]))
    ranks = [0.0] * len(d)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for m in range(i, j + 1):
            ranks[order[m]] = (i + j) / 2 + 1
        i = j + 1
    observed = sum(r for r, v in zip(ranks, d) if v > 0)
    mean = sum(ranks) / 2
    sums = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product((0, 1), repeat=len(d))]
    p = sum(abs(w - mean) >= abs(observed - mean) - 1e-9 for w in sums) / len(sums)
    return p, sum(v > 0 for v in d), len(d)


@prior_shipped
def test_every_shipped_prior_sentence_is_the_tables_numbers():
    t = prior_table()
    pt = read_prior()
    said = prior_sentences()
    assert said[0].startswith(f"{len(t)} runs of the 2-block Markov preset at k = {int(t['n_states'].iloc[0])} "
                              f"states, {t['seed'].nunique()} seeds on each of {len(pt.arms)} training distributions")
    name = {("dirichlet", 0.0): "the full Dirichlet prior", ("doubly_stochastic", 0.0): "doubly stochastic chains",
            ("doubly_stochastic", 0.25): "doubly stochastic chains with 25% of each batch unigram-optimal"}
    med = {}
    for (prior, share), g in t.groupby(["prior", "unigram_share"]):
        arm = name[(prior, share)]
        never = int(g["bigram_step"].isna().sum())
        if t["bigram_step"].isna().any():
            assert f"{never} of {len(g)} on {arm}" in said[0]
        skip = int((g["unigram_step"].isna() & g["bigram_step"].notna()).sum())
        first = int((g["unigram_step"] < g["bigram_step"]).sum())
        assert f"{first} of {len(g)} runs on {arm}" in said[1]
        assert (f"{arm} ({skip} reached the bigram stage without it)" in said[1]) == bool(skip)
        med[(prior, share)] = m = median(g["bigram_seqs"])
        low, high = pt.arm(prior, share).interval()  # the bootstrap is core.laws's own; it holds the median
        assert low <= m <= high
        shown = f"{m:,.0f}" if math.isfinite(m) else "above the cap"
        assert f"{arm}, {shown} (95% interval" in said[2]
    ds_skip = int((t[t["prior"] == "doubly_stochastic"].query("unigram_share == 0")["unigram_step"].isna()).sum())
    assert f"here {ds_skip} of " in said[1] and "were never the nearest to the unigram strategy" in said[1]
    ds, full, mix = med[("doubly_stochastic", 0.0)], med[("dirichlet", 0.0)], med[("doubly_stochastic", 0.25)]
    assert f"the median bigram onset was {ds:,.0f} sequences on doubly stochastic chains against {full:,.0f}" in said[3]
    assert f"was {mix:,.0f} sequences with 25% of each batch unigram-optimal against {ds:,.0f}" in said[4]
    low, high = ratio_interval(pt.arm("doubly_stochastic"), pt.arm("doubly_stochastic", 0.25))
    apart = low > 1 or high < 1
    assert f"95% interval of the ratio {low:.2f} to {high:.2f}, the seeds resampled together" in said[4]
    assert ("the interval holds 1, so by it alone these seeds allow no conclusion" in said[4]) == (not apart)
    # the paired test and the direction, each comparison: computed here from the table by sign flips
    for sentence, (a, b) in ((said[3], (("dirichlet", 0.0), ("doubly_stochastic", 0.0))),
                             (said[4], (("doubly_stochastic", 0.0), ("doubly_stochastic", 0.25)))):
        x = t[(t["prior"] == a[0]) & (t["unigram_share"] == a[1])].sort_values("seed")["bigram_seqs"].to_numpy()
        y = t[(t["prior"] == b[0]) & (t["unigram_share"] == b[1])].sort_values("seed")["bigram_seqs"].to_numpy()
        p, later, n = exact_signed_rank(x, y)
        assert (f"on {later} of {n} seeds that differ; a paired Wilcoxon signed-rank test gives p = {p:.3f}"
                in sentence)
    direction = "later" if ds > full else "sooner"
    assert f"The direction, {direction} without a unigram solution on offer" in said[3]
    # where the ratio's interval holds 1 and the paired test does not, the sentence says which says what
    low, high = ratio_interval(pt.arm("dirichlet"), pt.arm("doubly_stochastic"))
    p = exact_signed_rank(*(t[(t["prior"] == a) & (t["unigram_share"] == 0)].sort_values("seed")["bigram_seqs"]
                            .to_numpy() for a in ("dirichlet", "doubly_stochastic")))[0]
    assert ("So the paired test, which uses each seed's pairing seed by seed, finds it later on doubly stochastic "
            "chains" in said[3]) == (low <= 1 <= high and p < 0.05 and ds > full)
    assert ("but the ratio's interval holds 1, so this table neither supports nor refutes it" in said[5]) == (not apart)
    if not apart:
        way = "sooner" if mix < ds else "later" if mix > ds else "at the same count"
        assert f"Here the mixture's median came {way} than on doubly stochastic chains alone" in said[5]


@prior_shipped
@shipped
def test_the_dirichlet_arm_is_the_markov_tables_runs_at_its_states():
    """The same preset, seeds and deterministic training: the full prior's runs have the onsets the Markov table
    has at the same number of states (where both reached the bigram stage within their caps)."""
    t, m = prior_table(), table()
    arm = t[(t["prior"] == "dirichlet") & (t["unigram_share"] == 0)]
    k = int(arm["n_states"].iloc[0])
    same = m[(m["n_states"] == k) & (m["concentration"] == arm["concentration"].iloc[0])]
    if same.empty or m["n_states"].nunique() == 1:
        pytest.skip("the Markov table has no runs at the prior table's states")
    both = arm.merge(same, on="seed", suffixes=("", "_m")).dropna(subset=["bigram_step", "bigram_step_m"])
    assert len(both) >= 5
    for col in ("unigram_step", "bigram_step", "steps_run"):
        assert both[col].tolist() == both[f"{col}_m"].tolist(), col


@pytest.mark.slow
@prior_shipped
def test_a_shipped_prior_run_is_trained_again_to_the_same_onsets():
    """The cheapest mixture run, trained again by the script's own function: the same onsets and stop."""
    sys.path.insert(0, str(ROOT / "bench"))
    import markov_onsets

    t = prior_table()
    row = t[t["unigram_share"] > 0].sort_values("steps_run").iloc[0]
    again = markov_onsets.run("prior", f"{row['prior']}+{row['unigram_share']}", int(row["seed"]), int(row["steps"]))
    assert (again["unigram_step"], again["bigram_step"], again["steps_run"], again["bigram_seqs"]) == (
        None if pd.isna(row["unigram_step"]) else row["unigram_step"], row["bigram_step"], row["steps_run"],
        row["bigram_seqs"])


@pytest.mark.app
@prior_shipped
def test_the_laws_page_shows_the_prior_part_from_its_table():
    at = open_app("app_pages/laws.py")
    at.toggle(key="lw_advanced").set_value(True).run()  # the sentences are the researcher view's
    text = "\n".join(m.value for m in at.markdown)
    assert "Stumbling block or stepping stone?" in text
    for sentence in prior_sentences():
        assert sentence in text
    assert any("bench/markov_onsets.py --setting prior" in c.value for c in at.code)
