"""The Laws of the drop page (app_pages/laws.py) through AppTest: one render, every sentence pinned to the
shipped tables' numbers, computed here from the CSV files with pandas and numpy (not core.laws)."""
import math
import re

import numpy as np
import pandas as pd
import pytest

from core.laws.clamps import CLAMPS_FILE, clamp_arms, median_ratio
from core.laws.drop import LAWS, read_law
from core.laws.readings import READINGS_FILE
from core.laws.stats import LAWS_DIR, placed_fit

from helpers import ROOT, open_app

pytestmark = pytest.mark.app

PREDICTED = {"context": {"Musat": 2.0, "Aoyama": -0.5}, "seqlen": {"Musat": 2.0, "Aoyama": -0.5},
             "batch": {"Aoyama": -0.5}, "vocab": {"Singh": 0.0}}


def signed(x: float) -> str:
    return f"{x:+.2f}".replace("-", "−")


def medians(path, axis: str) -> dict:
    """x -> median drop step, a never-dropped run counted as later than any (inf)."""
    table = pd.read_csv(path, comment="#")
    return {x: float(np.median(g["drop_step"].fillna(math.inf))) if g["drop_step"].isna().sum() * 2 < len(g)
            else math.inf for x, g in table.groupby(axis)}


@pytest.fixture(scope="module")
def page():
    """The page as a researcher reads it: the researcher view on, the question skipped."""
    at = open_app("app_pages/laws.py")
    at.toggle(key="lw_advanced").set_value(True).run()
    next(b for b in at.button if b.key and b.key.endswith("_skipbtn")).click().run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    return at, text


def test_the_student_view_asks_before_the_batch_sweep_and_keeps_the_statistics_back(monkeypatch):
    """Predict, then see: the batch sweep's chart and takeaway wait for the answer; a right answer is graded
    right; the statistics, commands and extra studies wait for the researcher view."""
    from core.quiz import laws as quiz_laws

    monkeypatch.setenv("ATTENTION_LAB_PREDICT", "on")  # tests/conftest.py turns it off for the other page tests
    at = open_app("app_pages/laws.py")
    assert not at.toggle(key="lw_advanced").value
    assert not [c for c in at.code if c.language == "bash"]  # no shell command in the student view
    charts = len(at.get("vega_lite_chart"))
    text = "\n".join(m.value for m in at.markdown)
    assert "The drop comes earlier as the batch size B grows" not in text and "Spearman" not in text
    assert "**Takeaway:** The drop comes later as the context length N grows" in text  # an unquizzed section
    q = quiz_laws.drop_direction(read_law(LAWS["batch"].path, LAWS["batch"]))
    radio = next(r for r in at.radio if r.key and r.key.startswith("quiz_q_law_direction"))
    radio.set_value(q.answer).run()
    assert at.success and at.success[0].value.startswith("Right.")
    assert len(at.get("vega_lite_chart")) == charts + 1
    m = medians(LAWS["batch"].path, "batch_size")
    assert (f"**Takeaway:** The drop comes earlier as the batch size B grows: the median drop step goes from step "
            f"{m[min(m)]:.0f} at B = {min(m)} to step {m[max(m)]:.0f} at B = {max(m)}.") in "\n".join(
                x.value for x in at.markdown)


def test_each_shipped_law_is_drawn_with_its_command_and_sentences_from_its_table(page):
    at, _ = page
    shipped = [law for law in LAWS.values() if law.path.is_file()]
    assert shipped, "no laws table is shipped"
    assert len(at.get("vega_lite_chart")) == len(shipped) + CLAMPS_FILE.is_file() + (
        LAWS_DIR / "targets.csv").is_file() + (LAWS_DIR / "markov.csv").is_file() + (  # the clamps', stages', Markov's
        (LAWS_DIR / "markov.csv").is_file() and (LAWS_DIR / "markov_prior.csv").is_file())  # and Markov's priors
    codes = [c.value for c in at.code]
    for law in shipped:
        header = [line for line in law.path.read_text().splitlines() if line.startswith("# command:")]
        assert header[0].split(":", 1)[1].strip() in codes
        text = next(m.value for m in at.markdown if f"Against {law.axis_label}," in m.value)  # its sentences
        m = {x: y for x, y in medians(law.path, law.axis).items() if math.isfinite(y)}
        slope = np.polyfit(np.log(list(m)), np.log(list(m.values())), 1)[0]
        fit = read_law(law.path, law).fit  # its interval: the bootstrap is core.laws's own
        assert f"log-log slope is {signed(slope)} (95% interval {signed(fit.low)} to {signed(fit.high)}" in text, text
        result = read_law(law.path, law)
        at_cap = placed_fit(result.points, max(p.cap for p in result.points))  # censored runs placed at the cap
        for source, predicted in PREDICTED[law.name].items():
            inside = fit.low <= predicted <= fit.high if source != "Singh" else fit.low > 0
            line = next(s for s in text.split("\n") if s.startswith(f"- {source}"))
            if inside and fit.open and source != "Singh" and not at_cap.low <= predicted <= at_cap.high:
                assert "cannot rule it out, nor confirm it" in line and "open end" in line, line
            else:
                assert ("TinyCharLM agrees" in line) == inside, line
        table = pd.read_csv(law.path, comment="#")
        for x, g in table.groupby(law.axis):
            never = int(g["drop_step"].isna().sum())
            if never:
                assert f"At {law.axis_name} = {x}, {never} of {len(g)} runs never dropped" in text
        # the seeds are paired across points: their ranks' Spearman correlation, averaged over pairs of points
        wide = table.pivot(index="seed", columns=law.axis, values="drop_step").astype(float).fillna(np.inf)
        rho = np.mean([wide[a].rank().corr(wide[b].rank()) for i, a in enumerate(wide.columns)  # Spearman's rho
                       for b in wide.columns[i + 1:]])
        assert "the same seeds resampled together at every point, 1000 times" in text
        assert f"Spearman rank correlation of {signed(rho)} (averaged over every pair of points)" in text
        full = wide[np.isfinite(wide).all(axis=1)]
        own = [np.polyfit(np.log(wide.columns.to_numpy(float)), np.log(row.to_numpy()), 1)[0] for _, row in
               full.iterrows()]
        assert f"the slope runs from {signed(min(own))} to {signed(max(own))} ({len(own)} seeds" in text


def test_the_context_sweep_is_not_said_to_tell_the_two_papers_apart(page):
    _, text = page
    assert "can tell them apart" not in text and "Neither prediction fits" not in text
    assert "Neither paper measured this setting, so the sweep cannot tell them apart" in text
    assert "the sweep measures TinyCharLM's own slope for this scaling rather than telling the two apart" in text


def test_the_vocab_note_says_what_else_v_moves(page):
    """ln V / 2 at the table's smallest and largest V, and the share of a pattern's positions whose token
    occurs in it more than once, estimated here by sampling patterns as core.model.task does."""
    _, text = page
    t = pd.read_csv(LAWS["vocab"].path, comment="#")
    vs, (pmin, pmax) = sorted(t["vocab_size"].unique()), (t["period_min"].iloc[0], t["period_max"].iloc[0])
    rng = np.random.default_rng(0)
    share = {}
    for v in (vs[0], vs[-1]):
        draws = []
        for _ in range(4000):
            x = rng.integers(0, v, rng.integers(pmin, pmax + 1))
            _, counts = np.unique(x, return_counts=True)
            draws.append(counts[counts > 1].sum() / len(x))
        share[v] = np.mean(draws)
    m = re.search(r"ln V / 2 is ([\d.]+) nats at V = (\d+), ([\d.]+) at V = (\d+)\) and how often a token repeats "
                  r"inside a pattern \(a share ([\d.]+) of a pattern's positions hold a token that occurs there more "
                  r"than once at V = \d+, ([\d.]+) at V = \d+", text)
    assert m, "the vocab note's numbers"
    assert (int(m[2]), int(m[4])) == (vs[0], vs[-1])
    assert float(m[1]) == pytest.approx(math.log(vs[0]) / 2, abs=0.005)
    assert float(m[3]) == pytest.approx(math.log(vs[-1]) / 2, abs=0.005)
    assert float(m[5]) == pytest.approx(share[vs[0]], abs=0.02)
    assert float(m[6]) == pytest.approx(share[vs[-1]], abs=0.02)
    assert "Reddy (2023)" in text


def test_the_own_sweep_says_it_reads_fewer_log_sequences_than_the_tables(page):
    from core.training.config import LOG_SEQS, TrainConfig

    _, text = page
    assert "train exactly as" not in text
    assert (f"on the first {LOG_SEQS} sequences of the fixed evaluation batch where the tables read all "
            f"{TrainConfig().eval_size}") in text


def test_depth_and_the_start_are_read_from_their_tables(page):
    _, text = page
    init = LAWS_DIR / "init.csv"
    if init.is_file():
        table = pd.read_csv(init, comment="#")
        for value, name in [("shared", "Enlarged start"), ("plain", "Plain start")]:
            steps = table[table["init"] == value]["drop_step"]
            if steps.notna().sum() * 2 > len(steps):
                assert f"{name}" in text and f"median drop step {np.median(steps.fillna(math.inf)):.0f}" in text
            elif steps.notna().sum() == 0:
                assert f"{name}, 2 blocks: none of {len(steps)} runs dropped within 600 steps (censored" in text
    assert "1 block (the transition study): none of 10 runs dropped within 800 steps (censored: training stopped " \
           "there, so each drop, if it comes, is later than step 800)." in text
    assert "every seed drops" not in text


def test_the_two_block_runs_that_did_not_drop_are_counted_from_the_tables(page):
    """Every 2-block run of the transition study and of the law tables (a run in two tables counted once), and
    the ones that never dropped, named by what their table varies."""
    _, text = page
    study = pd.read_csv(ROOT / "checkpoints" / "transition_study.csv", comment="#")
    study = study[study["blocks"] == 2]
    runs = pd.concat([pd.read_csv(p, comment="#").assign(table=p.stem) for p in sorted(LAWS_DIR.glob("*.csv"))
                      if p.stem not in ("readings", "markov", "markov_prior")]).drop_duplicates("run_id")  # drop sweeps
    runs = runs[runs["n_layers"] == 2]
    total = len(study) + len(runs)
    dropped = int(study["dropped"].sum()) + int(runs["drop_step"].notna().sum())
    caps = sorted({int(c) for c in study["steps_run"]} | {int(c) for c in runs["steps"]})
    assert f"With two blocks, {dropped} of the {total} distinct runs on this page dropped within their " \
           f"{' or '.join(map(str, caps))} steps" in text
    never = runs[runs["drop_step"].isna()]
    for _, r in never[never["table"] != "init"].iterrows():
        name = {"batch": f"B = {r.batch_size}", "seqlen": f"C = {r.seq_len}", "context": f"N = {r.seq_len}",
                "vocab": f"V = {r.vocab_size}", "clamps": f"held previous-token head {r.hold}",
                "targets": f"T = {r.seq_len}, B = {r.batch_size} at a constant rate"}[r.table]
        assert f"{name}, seed {r.seed}" in text, name
    plain = never[(never["table"] == "init") & (never["init"] == "plain")]
    if len(plain):
        assert f"every plain start ({len(plain)} runs)" in text


def test_the_caption_states_what_the_tables_trained(page):
    """Steps, seeds a point and the schedule's held steps, from the CSV files and TrainConfig's defaults."""
    from core.training.config import TrainConfig

    at, _ = page
    tables = pd.concat([t for t in (pd.read_csv(p, comment="#") for p in sorted(LAWS_DIR.glob("*.csv")))
                        if {"steps", "drop_step"} <= set(t.columns)  # the drop sweeps (not readings, markov)
                        and not ("decay_steps" in t.columns and (t["decay_steps"] == 0).all())])
    (steps,) = set(tables["steps"])
    settings = ["n_layers", "period_min", "period_max", "seq_len", "vocab_size", "batch_size", "lr", "warmup_steps",
                "init", "hold", "knockout", "steps", "every"]
    (seeds,) = set(tables.groupby(settings)["seed"].nunique())
    held = steps - TrainConfig().decay_steps
    constant = (LAWS_DIR / "targets.csv").is_file()
    start = "Every sweep but the constant-rate one trains" if constant else "Every sweep trains"
    caption = next(c.value for c in at.caption if c.value.startswith(start))
    assert (f"for {steps} steps ({seeds} seeds a point" in caption
            and f"held for the first {held} steps and then falls linearly to 10% of it" in caption), caption
    assert "resamples the seeds 1000 times, a seed's runs at every point together" in caption


def test_the_clamps_are_read_from_their_table(page):
    if not CLAMPS_FILE.is_file():
        pytest.skip("checkpoints/laws/clamps.csv is not shipped")
    _, text = page
    table = pd.read_csv(CLAMPS_FILE, comment="#")
    med = {k: float(np.median(g["drop_step"].fillna(math.inf))) for k, g in table.groupby(["hold", "clamp"])}
    base = med[("none", "none")]
    assert f"No clamp: median drop step {base:.0f}" in text
    arms = clamp_arms(CLAMPS_FILE)  # the intervals: the bootstrap is core.laws's own
    earlier = {}
    for key, m in med.items():
        if key != ("none", "none") and math.isfinite(m):
            assert f"the median drop step is {m / base:.2f} times the unclamped one" in text
            earlier[key] = median_ratio(arms[key], arms[("none", "none")]).high < 1
    line = next(s for s in text.split("\n") if s.startswith("- Singh et al. (2024) find"))
    assert "These arms test it only weakly" in line and "layer-1 clamp" not in text.replace("*layer-1 clamp*", "")
    held = table[(table["hold"] != "none") & (table["clamp"] == "none")]
    if len(held) and READINGS_FILE.is_file():  # the held head against each seed's own previous-token head
        own = pd.read_csv(READINGS_FILE, comment="#", dtype={"prev_head": str}).set_index("seed")["prev_head"]
        (head,) = set(held["hold"])
        seeds = [s for s in held["seed"] if s in own.index]
        same = sum(own[s] == head for s in seeds)
        assert f"{head} is the previous-token head the unclamped run of the same seed grows on {same} of those " \
               f"{len(seeds)} seeds" in line
    clamped = table[(table["hold"] == "none") & (table["clamp"] != "none")]
    if len(clamped) and earlier.get(("none", clamped["clamp"].iloc[0])):
        v, base_v = clamped["prev_token_block1"], table.query("hold == 'none' and clamp == 'none'")["prev_token_block1"]
        assert (f"block 1's sharpest previous-token score ends at {v.min():.2f}-{v.max():.2f} with it "
                f"({base_v.min():.2f}-{base_v.max():.2f} unclamped), and {int(clamped['abrupt'].sum())} of its "
                f"{int(clamped['drop_step'].notna().sum())} drops are abrupt") in line


def test_the_readings_over_seeds_are_counted_from_their_table(page):
    if not READINGS_FILE.is_file():
        pytest.skip("checkpoints/laws/readings.csv is not shipped")
    _, text = page
    t = pd.read_csv(READINGS_FILE, comment="#")
    n = len(t)
    assert f"clear previous-token score (at least 0.5) on {int(t['prev_clear'].sum())} of {n} seeds" in text
    v = t["prev_noise"]
    assert f"leaves median {v.median():.2f}, from {v.min():.2f} to {v.max():.2f} of M(clean) − M(corrupted)" in text
    assert f"clearly needed (its interval ending below 0.9) on {int(t['prev_needed'].sum())} of {n} seeds" in text
    assert f"into all of block 2 on {int(t['key_is_prev'].sum())} of {n} seeds" in text
    assert f"within {(t['prev_key'] - t['prev_noise']).abs().max():.2f} of noising the head's whole output" in text
    b2 = t["block2_sum"]
    assert (f"block 2's single-head patches summed (each head patched on its own, then added: not one patch of them "
            f"all together) median {b2.median():.2f}, from {b2.min():.2f} to {b2.max():.2f}") in text
    assert f"restores the most of M on {int((t['best_block'] == 'block 2').sum())} of {n} seeds" in text


def test_a_small_sweep_of_ones_own_trains_through_the_pool_and_shows_its_drop_steps():
    """The page's own sweep, as small as its cap allows (2 batch sizes x 2 seeds, 20 steps): it trains in the
    server's pool under this session's sweep owner, and once done shows each run's drop step (none drops in 20
    steps: each is later than the cap), the chart and the computed sentences."""
    import time

    from core.series import page_sweep

    at = open_app("app_pages/laws.py")
    charts = len(at.get("vega_lite_chart"))
    at.radio(key="lw_sw_setting").set_value("batch_size").run()
    at.multiselect(key="lw_sw_values_batch_size").set_value([8, 16, 32, 64]).run()  # over the cap: refused
    assert any("Pick 2 or 3 values of batch size B" in e.value for e in at.error), [e.value for e in at.error]
    assert at.button(key="lw_sw_start").disabled
    at.multiselect(key="lw_sw_values_batch_size").set_value([8, 16])
    at.radio(key="lw_sw_seeds").set_value(2)
    at.number_input(key="lw_sw_steps").set_value(20).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.button(key="lw_sw_start").click().run()
    sweep = at.session_state["lw_sweep"]
    given = [(s.train.batch_size, s.train.seed, s.train.steps) for s in sweep.specs]
    assert sweep.owner.endswith("|sweep") and given == [(8, 0, 20), (16, 0, 20), (8, 1, 20), (16, 1, 20)]
    deadline = time.monotonic() + 120
    while sweep.active and time.monotonic() < deadline:
        time.sleep(0.5)
        at.run()
    assert not sweep.active, "the sweep did not finish in 120 s"
    at.run()
    assert not at.exception, at.exception
    assert [r["status"] for r in sweep.results] == ["finished"] * 4
    assert all(r["drop_step"] is None and r["steps_run"] == 20 and [s for s, _ in r["curve"]] == [0, 10, 20]
               for r in sweep.results)  # logged every 10 steps
    text = "\n".join(m.value for m in at.markdown)
    assert "At batch size B = 8, 2 of 2 runs never dropped within 20 steps" in text
    assert "Fewer than two points have a median drop step" in text
    # the shipped table's runs of these seeds drop after step 20 too: all four agree because none dropped
    assert page_sweep.same_as_table(sweep.results, "batch_size") == (4, [], 4)
    assert "4 of your 4 finished runs agree" in text
    assert f"{page_sweep.LOG_SEQS}): 4 did not drop within 20 steps, nor did the table's." in text
    assert "dropped at the same logged step" not in text
    assert len(at.get("vega_lite_chart")) == charts + 1
    assert not at.button(key="lw_sw_start").disabled and at.button(key="lw_sw_stop").disabled


TARGETS = LAWS_DIR / "targets.csv"


def _slope(xs, ys) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def test_the_constant_rate_stages_are_said_from_their_table(page):
    """The onset, drop and completion sentences: run counts, each stage's slope along T and along B (the least
    squares slope of the log medians, computed here with numpy), and the T contrast, from targets.csv."""
    if not TARGETS.is_file():
        pytest.skip("checkpoints/laws/targets.csv is not shipped")
    at, text = page
    t = pd.read_csv(TARGETS, comment="#")
    assert (t["decay_steps"] == 0).all()
    stages = {"onset_step": "head-score onset", "drop_step": "drop (ln V / 2)",
              "completion_step": "completion (0.5 nats)"}
    said = next(m.value for m in at.markdown if "the learning rate constant throughout" in m.value)
    assert f"{len(t)} runs ({t['seed'].nunique()} seeds at each of 6 points)" in said
    caps = t.groupby(["seq_len", "batch_size"])["steps"].max()
    longer = "; ".join(f"{c} at T = {T}, B = {B}" for (T, B), c in caps.items() if c != caps.mode()[0])
    assert f"or at its cap, step {caps.mode()[0]}" + (f" ({longer})" if longer else "") + ": " in said
    for col, name in stages.items():
        never = t[t[col].isna()]
        if t[list(stages)].isna().any(axis=None):
            assert f"{len(never)} never reached the {name}" in said
        for (T, B), g in never.groupby(["seq_len", "batch_size"]):  # each censored run named by point and seed
            assert f"T = {T}, B = {B} (seed{'s' if len(g) > 1 else ''} {g['seed'].iloc[0]}" in said
    if not t[list(stages)].isna().any(axis=None):
        assert "every run reached all three stages within its cap, so none is censored" in said
    assert f"On {int((t['onset_step'] <= 10).sum())} runs block 1's previous-token score" in said
    series = {"T": (t[t["batch_size"] == 32], "seq_len", "Against sequence length T at B = 32"),
              "B": (t[t["seq_len"] == 96], "batch_size", "Against batch size B at T = 96")}
    slopes = {}
    for key, (runs, axis, opening) in series.items():
        line = next(x for x in said.split("\n") if x.startswith(f"- {opening}"))
        for col, name in stages.items():
            med = runs[col].fillna(math.inf).groupby(runs[axis]).median()  # a run that never reached it: last
            if not np.isfinite(med).all():
                continue  # a median above the cap: that point is left out of the fit (test_laws covers it)
            slopes[key, col] = _slope(med.index, med.to_numpy())
            assert f"the {name} {signed(slopes[key, col])} (95% interval" in line, (name, line)
    assert f"completion's slope {signed(slopes['T', 'completion_step'])}, the onset's " \
           f"{signed(slopes['T', 'onset_step'])}" in said
    # the table beside the chart: each point's median step, as pandas computes it
    frame = next(d.value for d in at.dataframe if "targets a step" in d.value.columns)
    for (T, B), g in t.groupby(["seq_len", "batch_size"]):
        row = frame[(frame["T"] == T) & (frame["B"] == B) & (frame["stage"] == "completion (0.5 nats)")]
        median = float(g["completion_step"].fillna(math.inf).median())
        assert float(row["median step"].iloc[0]) == median or (math.isinf(median) and row["median step"].isna().all())
        assert float(row["targets a step"].iloc[0]) == B * np.mean([T - p for p in range(16, 33)])


def test_the_power_statement_is_drawn_from_the_measured_spread(page):
    """The seeds a slope needs: every row of the power table is said, with its seeds for 80% power, and the
    spread column is the standard deviation of each seed's log step about its point's log median."""
    if not TARGETS.is_file():
        pytest.skip("checkpoints/laws/targets.csv is not shipped")
    at, text = page
    power = next(d.value for d in at.dataframe if "seeds for 80%" in d.value.columns)
    said = next(m.value for m in at.markdown if m.value.startswith("How many seeds it takes to tell a slope of −0.5"))
    for r in power.itertuples():
        need = f"{int(r[7])} seeds a point" if not pd.isna(r[7]) else "more than 32 seeds a point"
        assert f"{r.stage} against {r.series}: {need}" in said
    t = pd.read_csv(TARGETS, comment="#")
    runs = t[t["batch_size"] == 32].pivot(index="seed", columns="seq_len", values="completion_step").dropna()
    noise = np.log(runs) - np.log(runs.median())
    row = power[(power["series"] == "sequence length T, constant rate") & (power["stage"] == "completion (0.5 nats)")]
    assert float(row.iloc[0, 3]) == pytest.approx(float(np.std(noise.to_numpy(), ddof=1)), rel=1e-6)
