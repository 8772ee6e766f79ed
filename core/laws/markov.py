"""The Markov-chain table (checkpoints/laws/markov.csv, bench/markov_onsets.py): the stage onsets of the 2-block
Markov preset over seeds against one setting of the task (the number of states k, or the Dirichlet
concentration), read with the statistics the laws of the drop use.

Each run records the step of its unigram stage and of its bigram stage (core.training.markov.stages: the first
log from which that strategy is the nearest at two logs in a row). A run with no bigram stage within its cap is
censored there (core.laws.stats: ranked last, it raises its point's median). A run that reached the bigram stage
without ever being nearest to the unigram strategy skipped the unigram stage: it is counted and said, and left
out of the unigram stage's numbers (its stage has no start to measure from), not counted as late.

The unigram stage's length is the bigram onset less the unigram onset (censored with the bigram onset), the
steps a run spends at the unigram strategy or between the two; Edelman et al. (2024) find evidence that the
unigram solution delays the bigram one, and the sentences test what the table can of that.

    table = read_markov()                  # ValueError says what is wrong with the table
    fit_points(onset_points(table, "bigram_step"))
    markov_sentences(table)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.laws.stats import (
    LAWS_DIR,
    MIN_SEEDS,
    Fit,
    Point,
    decimals,
    fit_points,
    num,
    paired,
    signed,
    table_command,
    trend,
)
from core.reading.bootstrap import N_BOOT

MARKOV_FILE = LAWS_DIR / "markov.csv"
STAGES = {"unigram_step": "unigram stage", "bigram_step": "bigram stage"}
AXES = {"n_states": ("number of states k", "k"), "concentration": ("Dirichlet concentration α", "α")}
HELD = ("n_states", "concentration", "seq_len", "n_layers")  # the task's and model's settings a table records
EDELMAN = "Edelman et al. (2024)"


@dataclass(frozen=True)
class MarkovTable:
    table: pd.DataFrame
    axis: str  # the setting varied: n_states or concentration
    command: str  # the command that made the table (its header)

    @property
    def axis_name(self) -> str:
        return AXES[self.axis][0]

    @property
    def symbol(self) -> str:
        return AXES[self.axis][1]

    @property
    def cap(self) -> int:
        return int(self.table["steps"].max())


def read_markov(path: str | Path = MARKOV_FILE) -> MarkovTable:
    """The Markov table, checked: one of n_states and concentration varies (with the seeds), at least two values
    with MIN_SEEDS seeds each and no seed twice; ValueError says what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}: run the command in bench/README.md (bench/markov_onsets.py).")
    try:
        t = pd.read_csv(path, comment="#")
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path.name} is not a readable CSV table: {e}") from None
    missing = sorted({*HELD, "seed", "steps", "steps_run", *STAGES} - set(t.columns))
    if missing or t.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'runs'}: is it bench/markov_onsets.py's table?")
    varied = [c for c in HELD if t[c].nunique() > 1]
    if len(varied) != 1 or varied[0] not in AXES:
        raise ValueError(f"{path.name} varies {', '.join(varied) or 'nothing'}: the table needs exactly one of "
                         f"{' and '.join(AXES)} varied (and the seeds).")
    axis = varied[0]
    if t.duplicated([axis, "seed"]).any():
        row = t[t.duplicated([axis, "seed"])].iloc[0]
        raise ValueError(f"seed {row['seed']} appears twice at {axis} = {row[axis]}.")
    counts = t.groupby(axis)["seed"].nunique()
    if (counts < MIN_SEEDS).any():
        raise ValueError(f"{axis} = {counts.idxmin()} has {counts.min()} seed(s); every point needs at least "
                         f"{MIN_SEEDS}.")
    if len(counts) < 2:
        raise ValueError(f"the table has one value of {axis}; a slope needs at least two.")
    return MarkovTable(t.sort_values([axis, "seed"]).reset_index(drop=True), axis, table_command(path))


def skipped(mt: MarkovTable) -> pd.DataFrame:
    """The runs that reached the bigram stage without ever being nearest to the unigram strategy."""
    t = mt.table
    return t[t["unigram_step"].isna() & t["bigram_step"].notna()]


def _point(x: float, g: pd.DataFrame, values: pd.Series, cap: int) -> Point:
    return Point(float(x), tuple(int(s) for s in g["seed"]), tuple(None if pd.isna(v) else float(v) for v in values),
                 cap)


def onset_points(mt: MarkovTable, stage: str) -> tuple[Point, ...]:
    """One Point per value of the setting: every seed's onset of `stage` (None: not reached within the cap). The
    unigram stage leaves out the runs that skipped it."""
    t = mt.table if stage == "bigram_step" else mt.table.drop(skipped(mt).index)
    return tuple(_point(x, g, g[stage], int(g["steps"].max())) for x, g in t.groupby(mt.axis, sort=True))


def length_points(mt: MarkovTable) -> tuple[Point, ...]:
    """One Point per value of the setting: every seed's unigram stage length, bigram onset less unigram onset (None:
    no bigram stage within the cap, so the length is longer than the cap less the unigram onset; the runs that
    never reached the unigram stage are left out)."""
    t = mt.table[mt.table["unigram_step"].notna()]
    return tuple(_point(x, g, g["bigram_step"] - g["unigram_step"], int(g["steps"].max()))
                 for x, g in t.groupby(mt.axis, sort=True))


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _where(mt: MarkovTable, runs: pd.DataFrame) -> str:
    """"k = 4: seeds 4, 7 and 8; k = 5: seed 0"."""
    out = []
    for x, g in runs.groupby(mt.axis, sort=True):
        seeds = [str(int(s)) for s in sorted(g["seed"])]
        out.append(f"{mt.symbol} = {num(x)}: seed{'s' if len(seeds) > 1 else ''} {_listed(seeds)}")
    return "; ".join(out)


def _step(p: Point) -> str:
    """A point's median step with its quartiles: "step 140 (quartiles 120 to 160)", or above the cap."""
    if not math.isfinite(p.median):
        return f"above the cap of {p.cap} steps ({p.n - p.n_dropped} of {p.n} runs never reached it)"
    low, high = p.quartiles()
    return f"step {num(p.median)} (quartiles {num(low)} to {num(high) if math.isfinite(high) else f'above {p.cap}'})"


def _fit_text(fit: Fit, points: tuple[Point, ...]) -> str:
    d = decimals((fit.low, fit.high), [0.0])
    seeds = "/".join(map(str, sorted({p.n for p in points if p.x in fit.xs})))
    how = ("the same seeds resampled together at every point" if paired(points)
           else "each point's seeds resampled on their own")
    return (f"{signed(fit.slope)} (95% interval {signed(fit.low, d)} to {signed(fit.high, d)}, over {len(fit.xs)} "
            f"points of {seeds} seeds, {how}, {N_BOOT} times)")


def fits(mt: MarkovTable) -> dict[str, Fit | None]:
    """The log-log fits of the medians: "bigram_step" (the bigram onset) and "length" (the unigram stage's length);
    None where fewer than two points have a median. The unigram onset is not fitted: it is step 0 on runs whose
    untrained model is already nearest to the unigram strategy, and a log scale has no 0."""
    return {"bigram_step": fit_points(onset_points(mt, "bigram_step")), "length": fit_points(length_points(mt))}


def markov_sentences(mt: MarkovTable | None = None) -> list[str]:
    """What the page says about the Markov table, computed from it: the runs and the censored ones, each point's
    median onsets, the bigram onset's slope, and Edelman et al.'s claim as far as the table tests it."""
    from core.training.markov import MARKOV_MODEL, PAPER

    mt = read_markov() if mt is None else mt
    t, k = mt.table, mt.symbol
    values = sorted(t[mt.axis].unique())
    seeds = t.groupby(mt.axis)["seed"].nunique()
    per_point = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
    censored = t[t["bigram_step"].isna()]
    skip = skipped(mt)
    out = []
    text = (f"{len(t)} runs of the 2-block Markov preset ({per_point} seeds at each of {len(values)} values of the "
            f"{mt.axis_name}: {', '.join(num(v) for v in values)}), each trained on one torch thread until its bigram "
            f"stage was confirmed (the bigram strategy the nearest at two logs in a row, a log every 10 steps) or its "
            f"cap of {mt.cap} steps. ")
    if len(censored):
        text += (f"{len(censored)} never reached the bigram stage within the cap ({_where(mt, censored)}). A run that "
                 f"never reached it is censored: its bigram stage, if it comes, comes after step {mt.cap}, so it ranks "
                 "last and raises its point's median")
    else:
        text += "Every run reached the bigram stage within the cap, so none is censored"
    if len(skip):
        text += (f"; {len(skip)} went from the uniform strategy straight to the bigram one, never the nearest to the "
                 f"unigram strategy (at {_where(mt, skip)}), and are left out of the unigram stage's numbers")
    out.append(text + ".")
    bigram, unigram, length = onset_points(mt, "bigram_step"), onset_points(mt, "unigram_step"), length_points(mt)
    out.append("Median bigram onset: " + "; ".join(f"{k} = {num(p.x)}, {_step(p)}" for p in bigram) + ". "
               "Median unigram onset: " + "; ".join(f"{k} = {num(p.x)}, {_step(p)}" for p in unigram) + ".")
    fit = fits(mt)
    big = fit["bigram_step"]
    left_out = [p for p in bigram if not math.isfinite(p.median)]
    where = _listed([f"{k} = {num(p.x)}" for p in left_out]) if left_out else ""
    dropped = ""
    if left_out and big is not None:
        dropped = (f" The {'points' if len(left_out) > 1 else 'point'} at {where} "
                   f"{'have' if len(left_out) > 1 else 'has'} no median (half the runs or more never reached the "
                   f"bigram stage) and {'stay' if len(left_out) > 1 else 'stays'} out of the fit")
        below = [p for p in left_out if big.predict(p.x) < p.cap]
        dropped += (f"; the fitted line there is step {_listed([num(round(big.predict(p.x))) for p in below])}, "
                    "below the cap its median is above, so the fit understates how fast the onset grows there."
                    if len(below) == len(left_out) else ".")
    if big is None:
        out.append("Fewer than two points have a median bigram onset within the cap: no slope can be fitted.")
    else:
        out.append(f"Against the {mt.axis_name}, the median bigram onset's log-log slope is {_fit_text(big, bigram)}: "
                   f"the bigram stage {trend(big)} as {k} grows.{dropped}")
    both = t[t["unigram_step"].notna() & t["bigram_step"].notna()]
    share = ((both["bigram_step"] - both["unigram_step"]) / both["bigram_step"]).median() if len(both) else math.nan
    reached = t[t["bigram_step"].notna()]
    first = int((reached["unigram_step"] < reached["bigram_step"]).sum())
    claim = (f"{EDELMAN} find evidence that the simpler unigram solution delays the bigram one. What this table can "
             f"test is the order and the time: on {first} of the {len(reached)} runs that reached the bigram stage, "
             "the unigram stage came first")
    at_start = int((reached["unigram_step"] == 0).sum())
    if at_start:
        claim += (f" ({at_start} of them from step 0: the untrained model was already nearest to the unigram "
                  "strategy)")
    if len(both):
        claim += (f", and it lasted a median {share:.0%} of the steps before the bigram onset (from the unigram onset "
                  "to the bigram one)")
    lf = fit["length"]
    if lf is not None:
        claim += (f". The unigram stage's length has the log-log slope {_fit_text(lf, length)} against {k}: it "
                  f"{trend(lf).replace('comes later', 'grows').replace('comes earlier', 'shrinks')} as {k} grows"
                  + (f", beside the bigram onset's {signed(big.slope)}" if big is not None else ""))
        if big is not None and lf.low <= big.high and big.low <= lf.high and trend(lf) == trend(big) == "comes later":
            claim += (". So the bigram stage comes later where the unigram stage lasts longer, their intervals "
                      "overlapping: what the claim predicts, though any account in which both take longer with more "
                      "states predicts it too")
    out.append(claim + ".")
    out.append("What it cannot tell is whether the bigram stage would come sooner without the unigram one: every run "
               "here has the unigram solution on offer, so no run measures the bigram onset without it. That takes "
               "runs on chains whose in-context counts of single tokens say nothing of the next one (for example "
               "doubly stochastic transition matrices, whose stationary distribution is uniform), which this table "
               "does not hold. And a run's time at the unigram strategy is part of its time before the bigram stage, "
               "so the two move together by construction, not necessarily by cause.")
    shown = _listed([num(v) for v in values])
    out.append(f"The paper's setting beside the lab's: states, {PAPER['states'][0]}, here {shown}"
               if mt.axis == "n_states" else f"The paper's setting beside the lab's: prior, {PAPER['prior'][0]}, "
               f"here Dirichlet({shown})")
    out[-1] += (f"; model, {PAPER['model'][0]}, here {MARKOV_MODEL.n_layers} attention-only blocks of "
                f"{MARKOV_MODEL.n_heads} heads, width {MARKOV_MODEL.d_model}, no dropout; optimizer, "
                f"{PAPER['optimizer'][0]}, here the lab's (core.training.markov). So the onset steps are the lab's, "
                "not the paper's; the order of the stages and their trend with the setting are what carry over.")
    return out


def markov_frame(mt: MarkovTable | None = None) -> pd.DataFrame:
    """One row per run and stage for the chart: x (the setting), x_shown (x moved a little by stage and seed, so
    equal steps do not hide one another), seed, stage (its name), step (None: not reached; a run that skipped the
    unigram stage has no unigram row), reached, y (the step, or the cap for a run that never reached it), and its
    point's median (None when censored), q25 and q75 (capped at the cap)."""
    mt = read_markov() if mt is None else mt
    rows = []
    for j, (stage, name) in enumerate(STAGES.items()):
        for p in onset_points(mt, stage):
            low, high = p.quartiles()
            for seed, step in zip(p.seeds, p.steps):
                rows.append({"x": p.x, "x_shown": p.x * (1 + (j - 0.5) * 0.06 + (seed - 4.5) * 0.004), "seed": seed,
                             "stage": name, "step": step, "reached": step is not None,
                             "y": p.cap if step is None else step,
                             "median": p.median if math.isfinite(p.median) else None,
                             "q25": low, "q75": min(high, p.cap)})
    return pd.DataFrame(rows)


def fit_line(mt: MarkovTable | None = None, n: int = 24) -> pd.DataFrame:
    """The bigram onset's fit through its medians, x and y at n points over the fitted range (a curve on the
    chart's linear axes); empty when there is no fit."""
    mt = read_markov() if mt is None else mt
    fit = fits(mt)["bigram_step"]
    if fit is None:
        return pd.DataFrame(columns=["x", "y", "line"])
    xs = np.exp(np.linspace(math.log(min(fit.xs)), math.log(max(fit.xs)), n))
    return pd.DataFrame({"x": xs, "y": [fit.predict(x) for x in xs],
                         "line": f"fit through the medians: step ∝ {mt.symbol}^{signed(fit.slope)}"})
