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

The prior table (checkpoints/laws/markov_prior.csv, bench/markov_onsets.py --setting prior) holds the same
preset trained on other chains (core.model.markov's priors): read_prior, prior_sentences and prior_frame
compare each arm's median bigram onset, in sequences seen that are not unigram-optimal, with its bootstrap
95% interval over the seeds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from core.laws.stats import (
    LAWS_DIR,
    MIN_SEEDS,
    Fit,
    Point,
    boot_medians,
    decimals,
    fit_points,
    interval_text,
    num,
    paired,
    signed,
    signed_rank,
    table_command,
    trend,
    with_inf,
)
from core.reading.bootstrap import BOOT_SEED, LEVEL, N_BOOT, resample_indices

MARKOV_FILE = LAWS_DIR / "markov.csv"
PRIOR_FILE = LAWS_DIR / "markov_prior.csv"  # the same preset on other chains (bench/markov_onsets.py --setting prior)
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
    d = decimals([e for e in (fit.low, fit.high) if math.isfinite(e)], [0.0])
    seeds = "/".join(map(str, sorted({p.n for p in points if p.x in fit.xs})))
    how = ("the same seeds resampled together at every point" if paired(points) else
           "the seeds resampled together at every point, a seed a point lacks left out there" if fit.paired
           else "each point's seeds resampled on their own")
    censored = (f"; in {fit.censored} of them a point's median was censored, a slope beyond every finite one, so the "
                "interval is open" if fit.open else f"; in {fit.censored} of them a point's median was censored"
                if fit.censored else "")
    return (f"{signed(fit.slope)} ({LEVEL:.0%} interval {interval_text(fit, d)}, over {len(fit.xs)} "
            f"points of {seeds} seeds, {how}, {N_BOOT} times{censored})")


def fits(mt: MarkovTable) -> dict[str, Fit | None]:
    """The log-log fits of the medians: "bigram_step" (the bigram onset) and "length" (the unigram stage's length);
    None where fewer than two points have a median. The unigram onset is not fitted: it is step 0 on runs whose
    untrained model is already nearest to the unigram strategy, and a log scale has no 0."""
    return {"bigram_step": fit_points(onset_points(mt, "bigram_step")), "length": fit_points(length_points(mt))}


def _rate_text(mt: MarkovTable) -> str:
    """The learning-rate schedule the table's capped runs had (MARKOV_TRAIN's, at the table's cap) and how many
    bigram onsets came while it fell."""
    from core.training.markov import MARKOV_TRAIN

    cfg = replace(MARKOV_TRAIN, steps=mt.cap)
    held = max(cfg.steps - cfg.decay_steps, cfg.warmup_steps)
    if cfg.schedule != "linear_decay" or not cfg.decay_steps or held >= cfg.steps:
        return ""
    late = int((mt.table["bigram_step"] >= held).sum())
    return (f"The learning rate ({cfg.lr:g}) is held for {held} steps and then falls linearly to "
            f"{cfg.lr_at(cfg.steps - 1) / cfg.lr:.0%} of it over steps {held}-{cfg.steps}, so a run still short of "
            f"its bigram stage at step {held} trains on at a falling rate ({late} bigram onset"
            f"{'' if late == 1 else 's'} came at step {held} or later; a censored run spent its last "
            f"{cfg.steps - held} steps so). ")


def markov_sentences(mt: MarkovTable | None = None) -> list[str]:
    """What the page says about the Markov table, computed from it: the runs and the censored ones, each point's
    median onsets, the bigram onset's slope, and Edelman et al.'s claim as far as the table tests it (pointing to
    the prior table below when PRIOR_FILE is installed, as the page then shows it)."""
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
            f"cap of {mt.cap} steps. " + _rate_text(mt))
    if len(censored):
        text += (f"{len(censored)} never reached the bigram stage within the cap ({_where(mt, censored)}). A run that "
                 f"never reached it is censored: its bigram stage, if it comes, comes after step {mt.cap}, so it ranks "
                 "last and raises its point's median")
    else:
        text += "Every run reached the bigram stage within the cap, so none is censored"
    if len(skip):
        text += (f"; {len(skip)} were never the nearest to the unigram strategy before their bigram stage (at "
                 f"{_where(mt, skip)}), and are left out of the unigram stage's numbers")
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
    cannot = ("What this table cannot tell is whether the bigram stage would come sooner without the unigram one: "
              "every run here has the unigram solution on offer, so no run in it measures the bigram onset without "
              "it. ")
    if PRIOR_FILE.is_file():
        cannot += ("The prior table below takes that up: runs on doubly stochastic chains, whose stationary "
                   "distribution is uniform so that in-context counts of single tokens say nothing of the next one, "
                   "and on those with unigram-optimal chains mixed in. ")
    else:
        cannot += ("That takes runs on chains whose in-context counts of single tokens say nothing of the next one "
                   "(for example doubly stochastic transition matrices, whose stationary distribution is uniform), "
                   "which this table does not hold. ")
    out.append(cannot + "And a run's time at the unigram strategy is part of its time before the bigram stage, so "
               "the two move together by construction, not necessarily by cause.")
    shown = _listed([num(v) for v in values])
    out.append(f"The paper's setting beside the lab's: states, {PAPER['states'][0]}, here {shown}"
               if mt.axis == "n_states" else f"The paper's setting beside the lab's: prior, {PAPER['prior'][0]}, "
               f"here Dirichlet({shown})")
    out[-1] += (f"; model, {PAPER['model'][0]}, here {MARKOV_MODEL.n_layers} attention-only blocks of "
                f"{MARKOV_MODEL.n_heads} heads, width {MARKOV_MODEL.d_model}, no dropout; optimizer, "
                f"{PAPER['optimizer'][0]}, here the lab's (core.training.markov). So the onset steps are the lab's, "
                "not the paper's, and whether the order of the stages or their trend with the setting would carry "
                "over to the paper's model and optimizer, no run here measures.")
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


def fit_line(mt: MarkovTable | None = None) -> pd.DataFrame:
    """The bigram onset's fit through its medians, x and y at 24 points over the fitted range (a curve on the
    chart's linear axes); empty when there is no fit."""
    mt = read_markov() if mt is None else mt
    fit = fits(mt)["bigram_step"]
    if fit is None:
        return pd.DataFrame(columns=["x", "y", "line"])
    xs = np.exp(np.linspace(math.log(min(fit.xs)), math.log(max(fit.xs)), 24))
    return pd.DataFrame({"x": xs, "y": [fit.predict(x) for x in xs],
                         "line": f"fit through the medians: step ∝ {mt.symbol}^{signed(fit.slope)}"})


# The prior table (checkpoints/laws/markov_prior.csv, bench/markov_onsets.py --setting prior): the same preset
# trained on other chains, every run evaluated on the Dirichlet prior's batch (core.training.trainer.eval_batch).
# Edelman et al. (2024) test whether the unigram solution is a stumbling block: training on doubly stochastic
# chains (no unigram solution on offer), then with a share of unigram-optimal chains mixed in, counting only
# the doubly stochastic sequences seen.

PRIOR_NAMES = {"dirichlet": "the full Dirichlet prior", "doubly_stochastic": "doubly stochastic chains"}


@dataclass(frozen=True)
class PriorArm:
    """One training distribution's runs: its bigram onsets in steps and in sequences seen that are not
    unigram-optimal (None: censored), how many runs were nearest to the unigram strategy before the bigram one."""
    prior: str
    unigram_share: float
    runs: pd.DataFrame
    steps: Point  # bigram onset steps (cap: the runs' largest steps_run)
    seqs: Point  # bigram onset in sequences seen that are not unigram-optimal (cap in the same unit)

    @property
    def name(self) -> str:
        base = PRIOR_NAMES[self.prior]
        if not self.unigram_share:
            return base
        return f"{base} with {self.unigram_share:.0%} of each batch unigram-optimal"

    @property
    def skipped(self) -> int:
        """Runs that reached the bigram stage without ever being nearest to the unigram strategy."""
        r = self.runs
        return int((r["unigram_step"].isna() & r["bigram_step"].notna()).sum())

    @property
    def unigram_first(self) -> int:
        r = self.runs
        return int((r["unigram_step"] < r["bigram_step"]).sum())

    def interval(self) -> tuple[float, float]:
        """The median's bootstrap interval (sequences seen) over the seeds: N_BOOT resamples of the seeds with
        replacement, a censored run ranked last (inf: an end above the cap)."""
        boot = boot_medians(with_inf(self.seqs.steps), resample_indices(self.seqs.n, BOOT_SEED))
        a = (1 - LEVEL) / 2
        low, high = np.quantile(boot, [a, 1 - a], method="nearest")
        return float(low), float(high)


@dataclass(frozen=True)
class PriorTable:
    table: pd.DataFrame
    arms: tuple[PriorArm, ...]  # the full prior first, then doubly stochastic, then mixtures by share
    command: str

    def arm(self, prior: str, unigram_share: float = 0.0) -> PriorArm | None:
        return next((a for a in self.arms if a.prior == prior and a.unigram_share == unigram_share), None)


def read_prior(path: str | Path = PRIOR_FILE) -> PriorTable:
    """The prior table, checked: one run per arm and seed, at least MIN_SEEDS seeds an arm, at least two arms, the
    task otherwise fixed; ValueError says what is wrong."""
    from core.model.markov import kept_sequences
    from core.training.markov import MARKOV_TRAIN

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}: run the command in bench/README.md (bench/markov_onsets.py "
                         "--setting prior).")
    try:
        t = pd.read_csv(path, comment="#")
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path.name} is not a readable CSV table: {e}") from None
    need = {*HELD, "prior", "unigram_share", "seed", "steps", "steps_run", "bigram_seqs", *STAGES}
    missing = sorted(need - set(t.columns))
    if missing or t.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'runs'}: is it bench/markov_onsets.py "
                         "--setting prior's table?")
    varied = [c for c in HELD if t[c].nunique() > 1]
    if varied:
        raise ValueError(f"{path.name} varies {', '.join(varied)}: the prior table holds the task otherwise fixed.")
    unknown = sorted(set(t["prior"]) - set(PRIOR_NAMES))
    if unknown:
        raise ValueError(f"{path.name} has an unknown prior: {', '.join(map(str, unknown))}.")
    keys = ["prior", "unigram_share"]
    if t.duplicated([*keys, "seed"]).any():
        row = t[t.duplicated([*keys, "seed"])].iloc[0]
        raise ValueError(f"seed {row['seed']} appears twice on {row['prior']} with unigram share "
                         f"{row['unigram_share']}.")
    arms = []
    order = {p: i for i, p in enumerate(PRIOR_NAMES)}
    for (prior, share), g in sorted(t.groupby(keys), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        g = g.sort_values("seed")
        if g["seed"].nunique() < MIN_SEEDS:
            raise ValueError(f"{prior} with unigram share {share:g} has {g['seed'].nunique()} seed(s); every arm "
                             f"needs at least {MIN_SEEDS}.")
        cap, kept = int(g["steps"].max()), kept_sequences(float(share), MARKOV_TRAIN.batch_size)
        arms.append(PriorArm(prior, float(share), g.reset_index(drop=True),
                             _point(0.0, g, g["bigram_step"], cap), _point(0.0, g, g["bigram_seqs"], cap * kept)))
    if len(arms) < 2:
        raise ValueError(f"{path.name} has one arm; a comparison needs at least two.")
    return PriorTable(t, tuple(arms), table_command(path))


def _seqs(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "above the cap"


def _median_text(arm: PriorArm) -> str:
    """"9,600 sequences (95% interval 7,040 to 12,800)", or above the cap."""
    low, high = arm.interval()
    cap = f"the cap of {arm.seqs.cap:,} sequences"
    med = _seqs(arm.seqs.median) if math.isfinite(arm.seqs.median) else f"above {cap}"
    return f"{med} ({LEVEL:.0%} interval {_seqs(low)} to {_seqs(high) if math.isfinite(high) else f'above {cap}'})"


def _ratios(a: PriorArm, b: PriorArm) -> np.ndarray:
    """b's median over a's in each of N_BOOT resamples (ratio_interval's draw); NaN where both are censored."""
    ia = resample_indices(a.seqs.n, BOOT_SEED)
    ib = ia if a.seqs.seeds == b.seqs.seeds else resample_indices(b.seqs.n, BOOT_SEED + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return boot_medians(with_inf(b.seqs.steps), ib) / boot_medians(with_inf(a.seqs.steps), ia)


def ratio_interval(a: PriorArm, b: PriorArm) -> tuple[float, float]:
    """The bootstrap interval of b's median bigram onset over a's (sequences seen): N_BOOT resamples of the seeds,
    drawn together for both arms when they hold the same seeds (seed s's runs start from the same weights), else
    each arm's on its own; a censored run ranked last (inf), a resample where both medians are censored left out.
    Two arms differ when this interval lies wholly above or below 1: two medians' own intervals can overlap
    while their ratio's does not."""
    ratio = _ratios(a, b)
    ratio = ratio[~np.isnan(ratio)]
    q = (1 - LEVEL) / 2
    low, high = np.quantile(ratio, [q, 1 - q], method="nearest") if len(ratio) else (math.nan, math.nan)
    return float(low), float(high)


def share_above_one(a: PriorArm, b: PriorArm) -> float:
    """The share of ratio_interval's resamples in which b's median is above a's."""
    ratio = _ratios(a, b)
    ratio = ratio[~np.isnan(ratio)]
    return float((ratio > 1).mean()) if len(ratio) else math.nan


def paired_test(a: PriorArm, b: PriorArm) -> tuple[float, int, int] | None:
    """core.laws.stats.signed_rank of b's bigram onsets (sequences seen) against a's, seed by seed; None when the
    arms do not hold the same seeds (nothing to pair)."""
    if a.seqs.seeds != b.seqs.seeds:
        return None
    return signed_rank(a.seqs.steps, b.seqs.steps)


def _way(interval: tuple[float, float]) -> str:
    low, high = interval
    return "later" if low > 1 else "sooner" if high < 1 else "unclear"


def compare(a: PriorArm, b: PriorArm) -> str:
    """How b's median bigram onset (sequences seen) stands to a's: "later" or "sooner" (the ratio's interval,
    ratio_interval, wholly above or below 1), or "unclear" (it holds 1: no conclusion)."""
    return _way(ratio_interval(a, b))


def _versus(a: PriorArm, b: PriorArm, a_name: str, b_name: str, interval: tuple[float, float]) -> str:
    """"the median bigram onset was 9,600 sequences on B against 7,040 on A (1.36 times as many; 95% interval of
    the ratio 1.10 to 1.70, ...): ..., and what a paired test and the direction say"; interval:
    ratio_interval(a, b)."""
    way, (low, high) = _way(interval), interval
    how = "the seeds resampled together" if a.seqs.seeds == b.seqs.seeds else "each arm's seeds resampled on its own"
    ratio = b.seqs.median / a.seqs.median if math.isfinite(a.seqs.median) and math.isfinite(b.seqs.median) else None
    times = f"{ratio:.2f} times as many; " if ratio is not None else ""

    def bound(x: float) -> str:
        return f"{x:.2f}" if math.isfinite(x) else "above any finite value"

    text = (f"the median bigram onset was {_seqs(b.seqs.median)} sequences {b_name} against {_seqs(a.seqs.median)} "
            f"{a_name} ({times}{LEVEL:.0%} interval of the ratio {bound(low)} to {bound(high)}, {how}): ")
    if way == "unclear":
        text += "the interval holds 1, so by it alone these seeds allow no conclusion"
    else:
        text += f"the interval lies wholly {'above' if way == 'later' else 'below'} 1, so {b_name} it came {way}"
    test = paired_test(a, b)
    if test is not None:
        p, later, n = test
        text += (f". Seed by seed (each seed's two runs start from the same weights), it came later {b_name} on "
                 f"{later} of {n} seeds that differ; a paired Wilcoxon signed-rank test gives p = {p:.3f} (exact, "
                 f"two-sided), {'below' if p < 0.05 else 'above'} 0.05; and {share_above_one(a, b):.1%} of the "
                 "bootstrap's ratios are above 1")
        if way == "unclear" and p < 0.05:
            text += (f". So the paired test, which uses each seed's pairing seed by seed, finds it later {b_name}, "
                     "where the interval of the ratio of medians is too wide to tell")
    return text


MIXTURE_STATES = 3  # the authors' public mixture experiment (plots.ipynb: vocab_size=3, graphing_pipeline.mixtures)


def _direction(full: PriorArm, ds: PriorArm) -> str:
    """Which way the doubly stochastic arm's median moved against the full prior's, beside the authors' result."""
    if ds.seqs.median > full.seqs.median:
        return (f"The direction, later without a unigram solution on offer, is the opposite of {EDELMAN}'s stated "
                "result, that taking away the unigrams' usefulness speeds up learning the bigram solution.")
    if ds.seqs.median < full.seqs.median:
        return f"The direction, sooner without a unigram solution on offer, is {EDELMAN}'s stated result."
    return "The two medians are equal."


def prior_sentences(pt: PriorTable | None = None) -> list[str]:
    """What the page says about the prior table, computed from it: the runs and the censored ones, how many runs
    skipped the unigram stage, each arm's median bigram onset with its interval, the two comparisons Edelman et
    al. (2024) make and what follows for their claim."""
    pt = read_prior() if pt is None else pt
    t = pt.table
    k = int(t["n_states"].iloc[0])
    seeds = t.groupby(["prior", "unigram_share"])["seed"].nunique()
    per_arm = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
    caps = sorted({a.steps.cap for a in pt.arms})
    censored = [(a, a.steps.n - a.steps.n_dropped) for a in pt.arms]
    out = [f"{len(t)} runs of the 2-block Markov preset at k = {k} states, {per_arm} seeds on each of {len(pt.arms)} "
           f"training distributions: {_listed([a.name for a in pt.arms])}. Every run is measured on the full "
           "Dirichlet prior's evaluation batch, where the strategies are the Bayes-optimal ones, and trained until "
           f"its bigram stage was confirmed or its cap of {_listed([f'{c:,}' for c in caps])} steps. "
           + ("Every run reached the bigram stage within the cap." if not any(n for _, n in censored) else
              "Never reached the bigram stage within the cap (censored, ranked last): "
              + "; ".join(f"{n} of {a.steps.n} on {a.name}" for a, n in censored) + ".")]
    out.append("Nearest to the unigram strategy before the bigram one: "
               + "; ".join(f"{a.unigram_first} of {a.steps.n} runs on {a.name}"
                           + (f" ({a.skipped} reached the bigram stage without it)"
                              if a.skipped else "") for a in pt.arms) + ".")
    ds = pt.arm("doubly_stochastic")
    if ds is not None:
        out[-1] += (f" {EDELMAN} see a single transition on doubly stochastic chains, from uniform straight to "
                    f"bigram: here {ds.skipped} of {ds.steps.n} runs were never the nearest to the unigram strategy "
                    "before their bigram stage (the table records the onsets only, not every log's nearest strategy).")
    out.append("Median bigram onset in training sequences seen that are not unigram-optimal (step x batch x share "
               f"not unigram-optimal, Edelman et al.'s axis), with its {LEVEL:.0%} bootstrap interval over the seeds: "
               + "; ".join(f"{a.name}, {_median_text(a)}" for a in pt.arms) + ".")
    full = pt.arm("dirichlet")
    mixes = [a for a in pt.arms if a.prior == "doubly_stochastic" and a.unigram_share]
    if full is not None and ds is not None:
        out.append("Without a unigram solution on offer (doubly stochastic chains, where counting single tokens "
                   "predicts no better than uniform), "
                   + _versus(full, ds, "on the full prior", "on doubly stochastic chains", ratio_interval(full, ds))
                   + ". " + _direction(full, ds) + " The two differ in "
                   "more than the unigram solution (the Sinkhorn balancing changes every row too), so "
                   "this compares training distributions; the next comparison adds only unigram-optimal chains.")
    against_ds = [(mix, ratio_interval(ds, mix)) for mix in mixes] if ds is not None else []
    for mix, interval in against_ds:
        out.append("Counting only the doubly stochastic sequences seen, "
                   + _versus(ds, mix, "on doubly stochastic chains alone",
                             f"with {mix.unigram_share:.0%} of each batch unigram-optimal", interval) + ".")
    claim = (f"{EDELMAN} read a delay from the mixture as evidence that the unigram solution is a stumbling block "
             "for the bigram one, not a stepping stone. ")
    if ds is not None and mixes:
        ways = {_way(interval) for _, interval in against_ds}
        if ways == {"later"}:
            claim += ("Here too the unigram-optimal chains delayed the bigram stage (the ratio's interval wholly above "
                      "1): what the claim predicts.")
        elif ways == {"unclear"}:
            medians = {"sooner" if m.seqs.median < ds.seqs.median else "later" if m.seqs.median > ds.seqs.median
                       else "at the same count" for m in mixes}
            where = medians.pop() if len(medians) == 1 else "both sooner and later"
            claim += (f"Here the mixture's median came {where} than on doubly stochastic chains alone, but the "
                      "ratio's interval holds 1, so this table neither supports nor refutes it: more seeds, or a "
                      "larger unigram share, would be needed to tell.")
        elif ways == {"sooner"}:
            claim += ("Here the unigram-optimal chains brought the bigram stage sooner (the ratio's interval wholly "
                      "below 1): against the claim, in this lab's setting.")
        else:
            claim += "Here the mixtures disagree with one another, so the table does not decide it."
    else:
        claim += "This table has no mixture of unigram-optimal chains to test it with."
    out.append(claim + f" The lab departs from the authors: doubly stochastic tables are Sinkhorn-balanced Dirichlet "
               f"draws, not uniform over doubly stochastic matrices; k = {k} states"
               f"{' as in' if k == MIXTURE_STATES else ', where'} the authors' public code for the mixture experiment"
               f"{'' if k == MIXTURE_STATES else f' uses {MIXTURE_STATES}'}; and the lab's "
               "model and optimizer (core.training.markov), so the sizes of the effects are the lab's.")
    return out


def prior_frame(pt: PriorTable | None = None) -> pd.DataFrame:
    """One row per run for the chart: arm (its name), seed, seqs (bigram onset in sequences seen that are not
    unigram-optimal; None: censored), reached, y (seqs, or the cap for a censored run), and its arm's median
    (None when censored) and 95% interval (low, high: capped at the cap)."""
    pt = read_prior() if pt is None else pt
    rows = []
    for a in pt.arms:
        low, high = a.interval()
        for seed, v in zip(a.seqs.seeds, a.seqs.steps):
            rows.append({"arm": a.name, "seed": seed, "seqs": v, "reached": v is not None,
                         "y": a.seqs.cap if v is None else v,
                         "median": a.seqs.median if math.isfinite(a.seqs.median) else None,
                         "low": min(low, a.seqs.cap), "high": min(high, a.seqs.cap)})
    return pd.DataFrame(rows)
