"""Snippets of the Laws of the drop page (how a piece is written: ui/snippets/fill.py). They read the
shipped tables under checkpoints/laws/ (and the transition study) with core.laws, as the page does;
nothing trains."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _law(NAME):
    from core.laws import drop, stats

    law = drop.LAWS[NAME]
    result = drop.read_law(law.path, law)  # checkpoints/laws/NAME.csv: every seed's drop step at every point
    for p in result.points:
        print(f"{law.axis} = {p.x:g}: drop steps {p.steps} (None: not within {p.cap} steps), median {p.median}")
    fit = result.fit  # least squares through (log x, log median); its interval a paired bootstrap over seeds
    print(f"slope {fit.slope:+.3f}, 95% interval {fit.low:+.3f} to {fit.high:+.3f} ({fit.resamples} resamples kept)")
    print("seed rank correlation across points:", stats.seed_rank_correlation(result.points))
    print("each seed's own slope:", stats.seed_slopes(result.points))
    runs, lines = drop.chart_frames(result)  # the chart: one row per run; the fit's and the predictions' lines
    said = drop.sentences(result)
    print("\n".join(said))
    return {"fit": [fit.slope, fit.low, fit.high], "drop": runs["y"], "lines": lines["y"], "said": said}


def law_sweep(name: str) -> Snippet:
    return snippet(f"The {name} sweep's chart and sentences: its table read as one law, the log-log fit of the "
                   "median drop steps, the paired bootstrap over seeds, and the sentences computed from them.", None,
                   _law, NAME=name)


def _depth_and_start():
    from core.laws import drop, stats
    from core.training.transition import STUDY_FILE

    said = [stats.group_sentence(f"{blocks} block{'s' if blocks > 1 else ''} (the transition study)", point)
            for blocks, point in stats.groups(STUDY_FILE, "blocks").items()]
    names = {"shared": "Enlarged start (the default)", "plain": "Plain start"}
    said += [stats.group_sentence(f"{names.get(value, value)}, 2 blocks", point)
             for value, point in stats.groups(stats.LAWS_DIR / "init.csv", "init").items()]
    two = drop.two_block_sentence()  # every 2-block run of the page's tables, counted once
    print("\n".join(said + [two]))
    return {"said": said, "two_blocks": two}


def law_depth_and_start() -> Snippet:
    return snippet("Depth and the initial embedding: the transition study's runs by depth, the init sweep's by "
                   "start, and how many of the page's 2-block runs dropped within their caps.", None,
                   _depth_and_start)


def _clamps():
    from core.laws import clamps

    arms = clamps.clamp_arms()  # checkpoints/laws/clamps.csv by (hold, clamp)
    for (hold, clamp), p in arms.items():
        r = clamps.median_ratio(p, arms[("none", "none")])  # seeds resampled together in both arms
        print(f"hold {hold}, clamp {clamp}: drop steps {p.steps}; median x{r.ratio:.2f} ({r.low:.2f} to {r.high:.2f})")
    runs = clamps.clamp_frame()  # the chart's rows
    said = clamps.clamp_sentences()  # reads checkpoints/laws/readings.csv too: each seed's own previous-token head
    print("\n".join(said))
    return {"drop": runs["y"], "said": said}


def law_clamps() -> Snippet:
    return snippet("The clamps' chart and sentences: each arm's drop steps, its median against the unclamped "
                   "one's (a paired bootstrap over seeds), and what the arms can say about Singh et al.'s account.",
                   None, _clamps)


def _readings():
    import pandas as pd

    from core.laws import readings

    table = pd.read_csv(readings.READINGS_FILE, comment="#", dtype={"prev_head": str, "key_sender": str})
    print(table[["seed", "prev_head", "prev_token", "prev_noise", "prev_key", "block2_effect", "block2_sum"]])
    said = readings.readings_sentences()
    print("\n".join(said))
    return {"said": said}


def law_readings() -> Snippet:
    return snippet("The Causal page's readings taken again on every training seed (checkpoints/laws/readings.csv, "
                   "bench/seed_readings.py), and the sentences counted from them.", None, _readings)


def _stages():
    from core.laws import stages

    table = stages.targets_table()  # checkpoints/laws/targets.csv, with the later-copy targets per step added
    frame = stages.stage_frame(table)  # per point (T, B) and stage: median step, quartiles, runs that reached it
    print(frame[["seq_len", "batch_size", "targets_per_step", "stage", "median", "q25", "q75", "reached"]])
    fits = stages.stage_fits(table)  # (series, stage) -> the log-log fit of the median steps, paired bootstrap
    for (series, stage), fit in fits.items():
        print(series, stage, None if fit is None else (round(fit.slope, 3), round(fit.low, 3), round(fit.high, 3)))
    said = stages.stage_sentences(table)
    print("\n".join(said))
    return {"median": frame["median"], "said": said}


def law_stages() -> Snippet:
    return snippet("Onset, drop and completion on the same constant-rate runs: each stage's median step per point, "
                   "its slope along T and along B and against the later-copy targets per step, and the sentences.",
                   None, _stages)


def _power():
    from core.laws import stages

    table = stages.targets_table()
    frame = stages.power_frame(table)  # per series and stage: the seeds it takes to tell a slope of -0.5 from 0
    print(frame)
    runs = stages.series_table(table, "seq_len")
    curve = stages.slope_power(stages.stage_points(runs, "completion_step", "seq_len"))  # power against seeds a point
    print(curve)
    said = stages.power_sentence(frame)
    print(said)
    return {"needed": frame["needed"], "said": said}


def law_power() -> Snippet:
    return snippet("How many seeds it takes to tell a slope of −0.5 from 0: the measured seed spread resampled, "
                   "each experiment's slope fitted as the page fits it.", None, _power)


def _markov():
    from core.laws import markov

    table = markov.read_markov()  # checkpoints/laws/markov.csv: each seed's unigram and bigram onset per setting
    print(table.table[[table.axis, "seed", "unigram_step", "bigram_step", "steps_run"]])
    for p in markov.onset_points(table, "bigram_step"):  # None: no bigram stage within the cap (censored)
        print(f"{table.axis} = {p.x:g}: bigram onsets {p.steps}, median {p.median}")
    fits = markov.fits(table)  # the log-log fits of the median bigram onset and of the unigram stage's length
    for name, fit in fits.items():
        print(name, None if fit is None else (round(fit.slope, 3), round(fit.low, 3), round(fit.high, 3)))
    runs = markov.markov_frame(table)  # the chart: one row per run and stage
    said = markov.markov_sentences(table)
    print("\n".join(said))
    return {"onset": runs["y"], "said": said}


def _markov_prior():
    from core.laws import markov

    table = markov.read_prior()  # checkpoints/laws/markov_prior.csv: the same preset trained on other chains
    for arm in table.arms:  # None: no bigram stage within the cap (censored, ranked last)
        low, high = arm.interval()  # the median's bootstrap over the seeds, 95%
        print(f"{arm.name}: bigram onsets in sequences seen {arm.seqs.steps}, median {arm.seqs.median} "
              f"({low} to {high}); {arm.skipped} runs skipped the unigram stage")
    runs = markov.prior_frame(table)  # the chart: one row per run
    said = markov.prior_sentences(table)
    print("\n".join(said))
    return {"onset": runs["y"], "said": said}


def law_markov_prior() -> Snippet:
    return snippet("The Markov-chain runs on other chains: each arm's bigram onset in sequences seen that are not "
                   "unigram-optimal, the medians' bootstrap intervals over the seeds, and the sentences.", None,
                   _markov_prior)


def law_markov() -> Snippet:
    return snippet("The Markov-chain stage onsets: each seed's unigram and bigram onset against the setting, the "
                   "log-log fit of the median bigram onset with its paired bootstrap, and the sentences.", None,
                   _markov)
