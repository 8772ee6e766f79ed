"""The constant-rate table (checkpoints/laws/targets.csv): onset, drop and completion on the same runs, and
how many seeds a slope needs.

The table trains two series with the learning rate never decayed and a cap long enough that few runs are
censored, each run stopped once its later-copy loss is below 0.5 nats (core.sweeps.run's stop_below):
sequence length T at batch 32, and batch B at T = 96. Each run records three steps: the head-score onset
(block 1's best previous-token score at or above core.training.onset.RISING from then on), the drop
(ln V / 2) and completion (0.5 nats). Along T each sequence holds more later-copy targets; along B each step
holds more sequences: both raise the later-copy targets per step, so the two series set on that one axis
separate "how many targets the model has seen" from "how many steps it has taken".
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from core.laws.drop import LAWS, read_law
from core.laws.stats import (
    LAWS_DIR,
    Fit,
    Point,
    decimals,
    fit_points,
    interval_text,
    lsq_slope,
    num,
    paired,
    signed,
    trend,
)
from core.reading.bootstrap import BOOT_SEED, LEVEL, N_BOOT
from core.sweeps.run import read_table

TARGETS_FILE = LAWS_DIR / "targets.csv"
STAGES = {"onset_step": "head-score onset", "drop_step": "drop (ln V / 2)", "completion_step": "completion (0.5 nats)"}
SERIES = {"seq_len": ("batch_size", "sequence length T", "T"), "batch_size": ("seq_len", "batch size B", "B")}
POWER = 0.8  # the share of experiments that must tell the slopes apart
POWER_SEEDS = (3, 5, 7, 9, 12, 16, 24, 32)  # seeds a point tried by slope_power
MAX_SEEDS = POWER_SEEDS[-1]
MIN_SPREAD = 5  # seeds that reached a stage at every point: fewer say too little about the spread to resample


def later_targets(period_min: int, period_max: int, seq_len: int) -> float:
    """The expected number of later-copy targets in one sequence: targets t = 1..T-1 with t >= L (the period,
    uniform over period_min..period_max as core.model.task.sample_batch draws it), T - L of them."""
    return float(np.mean([seq_len - p for p in range(int(period_min), int(period_max) + 1)]))


def targets_table(path: str | Path = TARGETS_FILE) -> pd.DataFrame:
    """The constant-rate table with targets_per_step (batch_size * later_targets) added; ValueError when it is
    not one (a decayed rate, or no stage columns)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}.")
    t = read_table(path)
    missing = sorted({*STAGES, "decay_steps", "seq_len", "batch_size", "steps"} - set(t.columns))
    if missing or t.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'runs'}: run the command in bench/README.md.")
    if (t["decay_steps"] != 0).any():
        raise ValueError(f"{path.name} has runs with a decaying rate; this table is for a constant rate.")
    return t.assign(targets_per_step=[b * later_targets(lo, hi, n) for b, lo, hi, n in zip(
        t["batch_size"], t["period_min"], t["period_max"], t["seq_len"])])


def series_table(table: pd.DataFrame, axis: str) -> pd.DataFrame:
    """The runs of one series: `axis` varies, the other setting (SERIES) at the value the series shares with the
    other (the point both hold: T = 96, B = 32)."""
    other = SERIES[axis][0]
    shared = table.groupby(other)[axis].nunique().idxmax()  # the other setting's value the axis varies at
    return table[table[other] == shared]


def stage_points(table: pd.DataFrame, stage: str, x: str) -> tuple[Point, ...]:
    """One Point per value of `x` (a column: seq_len, batch_size or targets_per_step): every seed's step of
    `stage` (None: not reached within the run's cap, the `steps` it was given)."""
    points = []
    for value, g in table.groupby(x, sort=True):
        g = g.sort_values("seed")
        points.append(Point(float(value), tuple(int(s) for s in g["seed"]),
                            tuple(None if pd.isna(s) else float(s) for s in g[stage]), int(g["steps"].max())))
    return tuple(points)


def stage_frame(table: pd.DataFrame) -> pd.DataFrame:
    """One row per point (T, B) and stage: targets_per_step, median, q25, q75 (never-reached runs ranked last; inf
    when the median is above the cap), n, reached, and targets_seen (median step times targets per step)."""
    rows = []
    for (T, B), g in table.groupby(["seq_len", "batch_size"], sort=True):
        per = float(g["targets_per_step"].iloc[0])
        for stage in STAGES:
            (p,) = stage_points(g, stage, "seq_len")
            low, high = p.quartiles()
            rows.append({"seq_len": int(T), "batch_size": int(B), "targets_per_step": per, "stage": stage,
                         "stage_name": STAGES[stage], "median": p.median, "q25": low, "q75": high, "n": p.n,
                         "reached": p.n_dropped, "targets_seen": p.median * per})
    return pd.DataFrame(rows)


def stage_chart_frame(table: pd.DataFrame) -> pd.DataFrame:
    """stage_frame's rows once per series a point belongs to (T = 96, B = 32 is in both), with series (its
    name), for the chart: the median step of each stage against the later-copy targets per step."""
    frame = stage_frame(table)
    parts = []
    for axis, (other, _, _) in SERIES.items():
        held = int(series_table(table, axis)[other].iloc[0])
        sub = frame[frame[other] == held]
        parts.append(sub.assign(series=f"{SERIES[axis][2]} varied ({SERIES[other][2]} = {held})"))
    out = pd.concat(parts, ignore_index=True)
    return out.replace([np.inf], np.nan)


def stage_fits(table: pd.DataFrame) -> dict[tuple[str, str], Fit | None]:
    """{(series, stage): the log-log fit of the median step} with series "seq_len" (against T at B = 32),
    "batch_size" (against B at T = 96), "targets_seq_len" and "targets_batch_size" (the same runs against the
    later-copy targets per step) and "targets" (all points against the targets per step); paired bootstraps."""
    out = {}
    for stage in STAGES:
        for axis in SERIES:
            runs = series_table(table, axis)
            out[(axis, stage)] = fit_points(stage_points(runs, stage, axis))
            out[(f"targets_{axis}", stage)] = fit_points(stage_points(runs, stage, "targets_per_step"))
        out[("targets", stage)] = fit_points(stage_points(table, stage, "targets_per_step"))
    return out


def _fit_text(fit: Fit | None) -> str:
    if fit is None:
        return "no slope (fewer than two points reached it within the cap)"
    d = decimals([e for e in (fit.low, fit.high) if math.isfinite(e)], [0.0, -0.5, -1.0])
    censored = f"; {fit.censored} of {N_BOOT} resamples met a censored median" if fit.censored else ""
    return f"{signed(fit.slope)} ({LEVEL:.0%} interval {interval_text(fit, d)}{censored})"


def caps_text(table: pd.DataFrame) -> str:
    """The constant-rate table's caps in words: "step 2000 (5000 at T = 96, B = 8)"."""
    caps = table.groupby(["seq_len", "batch_size"])["steps"].max()
    common = int(caps.mode().iloc[0])
    other = [f"{int(c)} at T = {T}, B = {B}" for (T, B), c in caps.items() if c != common]
    return f"step {common}" + (f" ({'; '.join(other)})" if other else "")


def censored_text(table: pd.DataFrame, stage: str) -> str:
    """Where the runs that never reached `stage` are: "T = 96, B = 8 (seeds 2 and 5) and T = 64, B = 32 (seed 1)"."""
    out = []
    for (T, B), g in table[table[stage].isna()].groupby(["seq_len", "batch_size"], sort=True):
        seeds = [str(int(s)) for s in sorted(g["seed"])]
        listed = seeds[0] if len(seeds) == 1 else ", ".join(seeds[:-1]) + " and " + seeds[-1]
        out.append(f"T = {int(T)}, B = {int(B)} (seed{'s' if len(seeds) > 1 else ''} {listed})")
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]


def stage_sentences(table: pd.DataFrame | None = None) -> list[str]:
    """What the page says about the constant-rate table, computed from it: how many runs reached each stage,
    each stage's slope along T and along B, the contrast between completion and onset along T, and what the two
    series say about targets against steps."""
    table = targets_table() if table is None else table
    fits = stage_fits(table)
    every = int(table["every"].min())
    n = len(table)
    out = []
    missed = {s: int(table[s].isna().sum()) for s in STAGES}
    early = int((table["onset_step"] <= every).sum())
    points = table.groupby(["seq_len", "batch_size"]).ngroups
    if any(missed.values()):
        censored = ("; ".join(f"{missed[s]} never reached the {STAGES[s]}"
                              + (f" at {censored_text(table, s)}" if missed[s] else "") for s in STAGES)
                    + ". A run that never reached a stage is censored: it stopped at its cap, so that stage, if it "
                      "comes, comes later")
    else:
        censored = "every run reached all three stages within its cap, so none is censored"
    out.append(f"{n} runs ({table['seed'].nunique()} seeds at each of {points} points), the learning rate constant "
               f"throughout, each stopped once its later-copy loss fell below 0.5 nats or at its cap, "
               f"{caps_text(table)}: {censored}"
               + (f". On {early} runs block 1's previous-token score was at or above 0.1 from the first measurement "
                  f"(step {every}) on, so their onset is step {every} or earlier: a weak previous-token preference the "
                  "start already has, which the onset cannot tell from a forming head." if early else "."))
    for axis, (other, name, _) in SERIES.items():
        held = int(series_table(table, axis)[other].iloc[0])
        held_name = SERIES[other][2]
        parts = [f"the {STAGES[s]} {_fit_text(fits[(axis, s)])}: {trend(fits[(axis, s)]) if fits[(axis, s)] else ''}"
                 .rstrip(": ") for s in STAGES]
        out.append(f"Against {name} at {held_name} = {held}, the median steps' log-log slopes: " + "; ".join(parts)
                   + ".")
    on, comp = fits[("seq_len", "onset_step")], fits[("seq_len", "completion_step")]
    if on is not None and comp is not None:
        says = {("comes earlier", "shows no clear trend"): "the steps to 0.5 nats fall with T while the onset shows "
                                                           "no clear trend",
                ("comes earlier", "comes earlier"): "the steps to 0.5 nats and the onset both fall with T",
                ("shows no clear trend", "shows no clear trend"): "neither the steps to 0.5 nats nor the onset move "
                                                                  "clearly with T"}
        verdict = says.get((trend(comp), trend(on)), f"the steps to 0.5 nats {trend(comp).replace('comes', 'come')} "
                                                     f"and the onset {trend(on)} as T grows")
        gap = comp.slope - on.slope
        out.append(f"So along T {verdict} (completion's slope {signed(comp.slope)}, the onset's {signed(on.slope)}, "
                   f"{signed(gap)} apart). A longer sequence holds more later-copy targets (about "
                   f"{num(round(later_targets(16, 32, 64)))} at T = 64, {num(round(later_targets(16, 32, 160)))} at "
                   "T = 160 with periods 16-32), so each step's gradient carries more examples of the copy once "
                   "the circuit can use them.")
    for s in STAGES:
        a, b = fits[("targets_seq_len", s)], fits[("targets_batch_size", s)]
        if a is None or b is None:
            continue
        overlap = a.low <= b.high and b.low <= a.high
        pooled = fits[("targets", s)]
        flat = pooled is not None and pooled.low <= 0 <= pooled.high
        if not overlap:
            read = ("the two series disagree (their intervals do not overlap), so longer sequences and more "
                    "sequences are not interchangeable here")
        elif flat:
            read = ("their intervals overlap, so these runs cannot tell longer sequences from more sequences; and the "
                    "pooled slope's interval holds 0, so they cannot tell \"what counts is how many targets a step "
                    "holds\" from \"only the steps count\" either")
        else:
            read = ("their intervals overlap, so these runs cannot tell longer sequences from more sequences, and the "
                    "pooled slope's interval leaves 0 out: as far as they show, what counts is how many targets a "
                    "step holds")
        out.append(f"Against the later-copy targets per step, the {STAGES[s]}'s slope is {_fit_text(a)} along T "
                   f"and {_fit_text(b)} along B: " + read
                   + (f"; all {len(pooled.xs)} points together: {_fit_text(pooled)}." if pooled else "."))
    return out


def slope_power(points: tuple[Point, ...], slope: float = -0.5) -> pd.DataFrame | None:
    """How many seeds a point it takes to tell a slope of `slope` from 0, from the measured seed spread: each
    seed's log step at each point minus the point's log median (the seeds that reached it at every point, kept
    together as the paired bootstrap keeps them) is the noise; an experiment with n seeds draws n of those seeds
    with replacement, N_BOOT times, and fits the slope of the medians. Under slope 0 that gives the fitted slopes'
    null spread, its central LEVEL interval [low, high]; under `slope` every fitted slope is `slope` more (the
    medians move by slope * log x). Rows n (each of POWER_SEEDS), low, high (the null interval), power (the share
    of experiments under `slope` whose fit falls outside the null interval). None with fewer than MIN_SPREAD such
    seeds or 2 points."""
    if len(points) < 2 or not paired(points):
        return None
    logy = np.array([[math.log(s) if s is not None else math.nan for s in p.steps] for p in points]).T  # [S, P]
    logy = logy[np.isfinite(logy).all(axis=1)]
    if len(logy) < MIN_SPREAD:
        return None
    noise = logy - np.log(np.median(np.exp(logy), axis=0))
    logx = np.log([p.x for p in points])
    rng = np.random.default_rng(BOOT_SEED)
    a = (1 - LEVEL) / 2
    rows = []
    for n in POWER_SEEDS:
        idx = rng.integers(0, len(noise), (N_BOOT, n))
        meds = np.log(np.median(np.exp(noise)[idx], axis=1))  # [N_BOOT, P]: each point's median step
        fitted, _ = lsq_slope(logx, meds)
        low, high = np.quantile(fitted, [a, 1 - a])
        moved = fitted + slope
        rows.append({"n": n, "low": float(low), "high": float(high),
                     "power": float(((moved < low) | (moved > high)).mean())})
    return pd.DataFrame(rows)


def seeds_needed(power: pd.DataFrame | None) -> int | None:
    """The fewest seeds a point in a slope_power table from which the power stays at or above POWER for every
    larger number tried (None if the largest falls short): resampled medians are discrete, so the power is not
    quite monotone in the seeds."""
    if power is None:
        return None
    below = power.loc[power["power"] < POWER, "n"]
    later = power[power["n"] > below.max()] if len(below) else power  # at or above POWER from there on
    return int(later["n"].min()) if len(later) else None


def power_frame(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """slope_power of the drop step (and completion) on each constant-rate series, and of the drop on the shipped
    decayed batch and seqlen tables: rows series, stage, seeds_measured (seeds that reached it at every point), noise_sd
    (the spread of a seed's log step about its point's median), power_5, power_12 (with 5 and 12 seeds a point),
    needed (the fewest seeds for POWER)."""
    table = targets_table() if table is None else table
    cases = []
    for axis, (_, name, _) in SERIES.items():
        runs = series_table(table, axis)
        for stage in ("drop_step", "completion_step"):
            cases.append((f"{name}, constant rate", STAGES[stage], stage_points(runs, stage, axis)))
    for law_name in ("batch", "seqlen"):
        law = LAWS[law_name]
        if law.path.is_file():
            cases.append((f"{law.axis_name}, shipped table (decaying rate)", STAGES["drop_step"],
                          read_law(law.path, law).points))
    rows = []
    for series, stage, points in cases:
        power = slope_power(points)
        if power is None:
            continue
        logy = np.array([[math.log(s) if s is not None else math.nan for s in p.steps] for p in points]).T
        logy = logy[np.isfinite(logy).all(axis=1)]
        noise = logy - np.log(np.median(np.exp(logy), axis=0))
        at = power.set_index("n")["power"]
        rows.append({"series": series, "stage": stage, "seeds_measured": len(logy),
                     "noise_sd": float(noise.std(ddof=1)), "power_5": float(at.get(5, math.nan)),
                     "power_12": float(at.get(12, math.nan)), "needed": seeds_needed(power)})
    return pd.DataFrame(rows)


def power_percent(power: float) -> str:
    """A power in percent, whole unless rounding would carry it across POWER or to 100%: then with the decimals
    that keep it on its side (0.795 is "79.5%", not "80%", beside a statement that 80% takes more seeds)."""
    digits = next((d for d in range(5) if all((round(power, d + 2) >= level) == (power >= level)
                                              for level in (POWER, 1.0))), 4)
    return f"{power:.{digits}%}"


def power_sentence(frame: pd.DataFrame) -> str:
    """The power statement, from power_frame."""
    if frame.empty:
        return (f"No series has {MIN_SPREAD} seeds that reached a stage at every point, too few to resample the "
                "spread from.")
    parts = []
    for r in frame.itertuples():
        need = (f"{int(r.needed)} seeds a point" if r.needed is not None and not pd.isna(r.needed) else
                f"more than {MAX_SEEDS} seeds a point")
        parts.append(f"{r.stage} against {r.series}: {need} (with 5 seeds {power_percent(r.power_5)} of experiments "
                     f"would, with 12 {power_percent(r.power_12)})")
    return (f"How many seeds it takes to tell a slope of −0.5 from 0, {POWER:.0%} of the time at the {LEVEL:.0%} "
            "level, resampling the measured seed spread (each seed's steps about its point's median, kept together "
            "across points): " + "; ".join(parts) + ".")
