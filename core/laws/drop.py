"""The laws of the drop: how the drop step of a sweep (core.sweeps.run's table) moves with the one setting
the sweep varied, set beside the published predictions.

A table's runs are grouped into points by the settings that vary (seeds aside); each point keeps every
seed's drop step, and a run that never dropped within its `steps_run` is censored (core.laws.stats says
how censored runs, the fit and its paired bootstrap are counted). The context, seq_len and batch sweeps
leave the weights' shapes alone, so seed k starts from the same initial weights at every point; vocab_size
changes the embedding's shape, so there they differ.

    law = read_law("checkpoints/laws/batch.csv", LAWS["batch"])    # ValueError says what is wrong
    law.fit.slope, law.fit.low, law.fit.high                         # the log-log slope and its interval
    sentences(law)                                                   # what the page says about it
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.laws.clamps import arm_name
from core.laws.stats import (
    LAWS_DIR,
    MIN_SEEDS,
    Fit,
    Point,
    decimals,
    fit_points,
    interval_text,
    num,
    paired,
    placed_fit,
    seed_rank_correlation,
    seed_slopes,
    signed,
    table_command,
    trend,
)
from core.reading.bootstrap import LEVEL, N_BOOT
from core.sweeps.grid import SETTINGS
from core.sweeps.run import read_table


@dataclass(frozen=True)
class Prediction:
    """A published claim about the drop step against one setting, as a log-log slope (`slope` None:
    only its sign is claimed, positive: the drop comes later as the setting grows)."""
    source: str  # "Musat et al. (2025)"
    claim: str  # the claim in words, as the paper puts it
    slope: float | None


MUSAT = Prediction("Musat et al. (2025)", "time to emergence grows as Θ(N²) in the context length N", 2.0)
AOYAMA = Prediction("Aoyama, Wilcox & Schneider (2025)", "the formation point in tokens seen grows as √(B·C), "
                    "so steps fall as (B·C)^−½", -0.5)
SINGH = Prediction("Singh et al. (2024)", "the transition comes later as the number of labels grows", None)


@dataclass(frozen=True)
class Law:
    """One sweep of the laws page: its table (checkpoints/laws/<name>.csv), the setting on its x axis,
    the settings allowed to vary with it (scaled together), and the predictions it is set against."""
    name: str
    axis: str  # the table column on the x axis
    axis_name: str  # what x is, short ("batch size B")
    axis_label: str  # what x is, with what is held fixed
    predictions: tuple[Prediction, ...]
    together: tuple[str, ...] = ()  # other settings that vary with the axis, one value per axis value
    caveat: str = ""  # said after the verdicts: how far the sweep's setting is from the papers'

    @property
    def path(self) -> Path:
        return LAWS_DIR / f"{self.name}.csv"


LAWS = {law.name: law for law in [
    Law("context", "seq_len", "context length N",
        "context length N (sequence length, the period range scaled with it: N/6 to N/3)", (MUSAT, AOYAMA),
        ("period_min", "period_max"),
        "Neither paper measured this setting, so the sweep cannot tell them apart: Musat et al.'s Θ(N²) bounds "
        "an asymptotic regime, for a modified two-layer architecture on their own task, and Aoyama et al.'s √(B·C) "
        "counts tokens at fixed data statistics, while here the patterns lengthen with N, so the task itself "
        "changes along the axis. The slope is TinyCharLM's own, for this scaling."),
    Law("seqlen", "seq_len", "context length C", "context length C at fixed batch B = 32 and periods 16-32",
        (MUSAT, AOYAMA)),
    Law("batch", "batch_size", "batch size B", "batch size B at fixed context C = 96", (AOYAMA,)),
    Law("vocab", "vocab_size", "vocabulary size V", "vocabulary size V (the number of labels)", (SINGH,)),
]}



@dataclass(frozen=True)
class LawResult:
    law: Law
    points: tuple[Point, ...]
    fit: Fit | None  # None: fewer than two points have a median
    command: str  # the command that reproduces the table (its header)


def points_of(table: pd.DataFrame, law: Law) -> tuple[Point, ...]:
    """The table's points along law.axis, checked: ValueError says what is wrong with the table."""
    need = {law.axis, "seed", "drop_step", "steps_run"}
    missing = sorted(need - set(table.columns))
    if missing:
        raise ValueError(f"the table lacks the column(s) {', '.join(missing)}: is it a sweep table "
                         "(python -m core.sweep)?")
    if table.empty:
        raise ValueError("the table has no runs.")
    varied = [c for c in SETTINGS if c in table.columns and c != "seed" and table[c].nunique(dropna=False) > 1]
    extra = sorted(set(varied) - {law.axis, *law.together})
    if extra:
        raise ValueError(f"the table varies {', '.join(extra)} besides {law.axis}: a law needs one setting "
                         "varied (and the seeds); split the table.")
    for other in law.together:
        if other in table.columns and (table.groupby(law.axis)[other].nunique() > 1).any():
            raise ValueError(f"{other} takes more than one value at some {law.axis}: it must vary together with it.")
    if table[law.axis].isna().any() or (pd.to_numeric(table[law.axis], errors="coerce") <= 0).any():
        raise ValueError(f"{law.axis} must be a positive number in every run (the fit is on log scales).")
    dupes = table.duplicated([law.axis, "seed"])
    if dupes.any():
        row = table[dupes].iloc[0]
        raise ValueError(f"seed {row['seed']} appears twice at {law.axis} = {row[law.axis]}.")
    points = []
    for x, group in table.groupby(law.axis, sort=True):
        group = group.sort_values("seed")
        if len(group) < MIN_SEEDS:
            raise ValueError(f"{law.axis} = {x} has {len(group)} seed(s); every point needs at least {MIN_SEEDS}.")
        steps = tuple(None if pd.isna(s) else float(s) for s in group["drop_step"])
        points.append(Point(float(x), tuple(int(s) for s in group["seed"]), steps, int(group["steps_run"].max())))
    if len(points) < 2:
        raise ValueError(f"the table has one value of {law.axis}; a slope needs at least two.")
    return tuple(points)


def read_law(path: str | Path, law: Law) -> LawResult:
    """A sweep table read as one law: its points, the fit, the reproducing command."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}: run the command in bench/README.md (\"Laws of the drop\").")
    try:
        table = read_table(path)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path.name} is not a readable CSV table: {e}") from None
    points = points_of(table, law)
    return LawResult(law, points, fit_points(points), table_command(path))


def _pairing(law: Law) -> str:
    """What a seed shares across a law's points (vocab_size changes the embedding's shape, so the
    initial weights differ there; every other axis leaves the model's shapes alone)."""
    if law.axis == "vocab_size":
        return ("seed k is the same seed at every point, though the embedding's shape, and so the initial "
                "weights, change with V")
    return "seed k starts from the same initial weights at every point"


def verdict(fit: Fit, prediction: Prediction) -> str:
    """'agrees', 'above' or 'below' (the interval against the predicted slope); for a sign-only
    prediction 'agrees' (interval above 0), 'below' (under 0) or 'unclear' (it holds 0)."""
    if prediction.slope is None:
        return "agrees" if fit.low > 0 else "below" if fit.high < 0 else "unclear"
    if fit.low <= prediction.slope <= fit.high:
        return "agrees"
    return "above" if fit.low > prediction.slope else "below"


PLACEMENTS = (1, 2, 4)  # a censored run placed at these multiples of its cap, to show what an open end rests on


def crossing(points: tuple[Point, ...], mark: float, cap: int) -> float | None:
    """The step (to 10 steps) at which placing the censored runs moves the interval's open end across `mark`:
    below it the interval stays on one side of `mark`. None when even the cap, or 1000 caps, leaves it where it is."""
    def beyond(step: float) -> bool:
        f = placed_fit(points, step)
        return f.low <= mark <= f.high

    lo, hi = float(cap), 1000.0 * cap
    if beyond(lo) or not beyond(hi):
        return None
    while hi - lo > 10:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if beyond(mid) else (mid, hi)
    return float(round(hi / 10) * 10)


def _inside_placed(result: LawResult, mark: float) -> bool:
    """Whether `mark` is inside the interval with every censored run placed at its cap (the closed interval an
    open one shrinks to if they had dropped right after the cap)."""
    cap = max(p.cap for p in result.points)
    f = placed_fit(result.points, cap)
    return f.low <= mark <= f.high


def depends_text(result: LawResult, pred: Prediction) -> str:
    """What an open interval's verdict on `pred` rests on: the censored runs placed at 1, 2 and 4 times their cap,
    the interval at each, and the step before which they would have to come for the interval to leave `pred` out."""
    fit, law = result.fit, result.law
    censored = [(p, seed) for p in result.points for seed, s in zip(p.seeds, p.steps) if s is None]
    if fit is None or not fit.open or not censored or pred.slope is None:
        return ""
    if not ((math.isinf(fit.high) and pred.slope > fit.low) or (math.isinf(fit.low) and pred.slope < fit.high)):
        return ""  # the mark lies beyond the closed end: the open one does not touch the verdict
    cap = max(p.cap for p, _ in censored)
    where = "; ".join(f"{law.axis_name.split()[-1]} = {num(p.x)}, seed {seed}" for p, seed in censored)
    d = decimals([e for m in PLACEMENTS for e in (placed_fit(result.points, m * cap).low,
                                                   placed_fit(result.points, m * cap).high)], [pred.slope])
    at = ", ".join(f"{interval_text(placed_fit(result.points, m * cap), d)} at step {m * cap}"
                   f"{' (the cap)' if m == 1 else ''}" for m in PLACEMENTS)
    runs = "the run" if len(censored) == 1 else f"the {len(censored)} runs"
    text = (f" The open end rests on {runs} that never dropped ({where}): {fit.censored} of the {N_BOOT} resamples "
            f"drew {'it' if len(censored) == 1 else 'them'} often enough to make a median censored. Placed at a "
            f"step, {runs} would give the interval {at}")
    step = crossing(result.points, pred.slope, cap)
    if _inside_placed(result, pred.slope):
        return text + f"; {signed(pred.slope)} is inside at every placement."
    if step is None:
        return text + f"; {signed(pred.slope)} stays outside at every placement up to 1000 times the cap."
    return text + (f"; so the whole interval leaves {signed(pred.slope)} out only if {runs} "
                   f"{'drops' if len(censored) == 1 else 'drop'} before about step {num(step)}, which these runs "
                   "cannot tell.")


def sentences(result: LawResult) -> list[str]:
    """What the page says about one law, computed from its table: the points, the fit, and each
    prediction's verdict."""
    law, fit = result.law, result.fit
    axis = law.axis_name
    out = []
    never = [p for p in result.points if p.n_dropped < p.n]
    for p in never:
        out.append(f"At {law.axis_name} = {num(p.x)}, {p.n - p.n_dropped} of {p.n} runs never dropped within "
                   f"{p.cap} steps" + (" (so its median is above the cap and it is left out of the fit)."
                                       if not math.isfinite(p.median) else "."))
    if fit is None:
        out.append("Fewer than two points have a median drop step within the runs' steps: no slope can be fitted, "
                   "so nothing can be said against the predictions.")
        return out
    seeds = sorted({p.n for p in result.points})
    d = decimals((fit.low, fit.high), [0.0, *(p.slope for p in law.predictions if p.slope is not None)])
    how = ("the same seeds resampled together at every point" if paired(result.points)
           else "each point's seeds resampled on their own")
    censored = (f"; {fit.censored} of them met a censored median, whose slope ranks beyond every finite one, so an "
                f"end is open" if fit.open else f"; {fit.censored} of them met a censored median, too few to open an "
                "end" if fit.censored else "")
    out.append(f"Against {law.axis_label}, the median drop step's log-log slope is {signed(fit.slope)} "
               f"({LEVEL:.0%} interval {interval_text(fit, d)}, over {len(fit.xs)} points of "
               f"{'/'.join(map(str, seeds))} seeds, {how}, {N_BOOT} times{censored}): the drop {trend(fit)} as "
               f"{axis} grows.")
    rho = seed_rank_correlation(result.points)
    if rho is not None:
        per_seed = seed_slopes(result.points)
        own = (f" Fitted seed by seed, the slope runs from {signed(min(per_seed.values()))} to "
               f"{signed(max(per_seed.values()))} ({len(per_seed)} seeds that dropped at every point)."
               if len(per_seed) >= 2 else "")
        out.append(f"A seed's runs at different points are paired: {_pairing(law)}, and the seeds' drop steps keep "
                   f"their order from point to point with a Spearman rank correlation of {signed(rho)} (averaged "
                   f"over every pair of points); the interval resamples whole seeds, so the pairing is kept.{own}")
    for pred in law.predictions:
        v = verdict(fit, pred)
        if pred.slope is None:
            text = {"agrees": "TinyCharLM agrees: the whole interval is above 0.",
                    "below": "TinyCharLM does not agree: the whole interval is below 0, the drop comes earlier.",
                    "unclear": "These runs cannot tell: the interval holds 0."}[v]
            out.append(f"{pred.source}: {pred.claim}. {text}")
            continue
        if v == "agrees" and pred.slope != 0 and fit.low <= 0 <= fit.high:
            v = "weakly"
        if v in ("agrees", "weakly") and fit.open and not _inside_placed(result, pred.slope):
            v = "open"
        text = {"open": f"These runs cannot rule it out, nor confirm it: {signed(pred.slope)} is inside the interval "
                        "only through its open end.",
                "agrees": f"TinyCharLM agrees: the predicted slope {signed(pred.slope)} is inside the interval.",
                "weakly": f"TinyCharLM agrees only weakly: the predicted slope {signed(pred.slope)} is inside the "
                          "interval, but so is 0 (no trend at all).",
                "above": f"TinyCharLM does not agree: the whole interval is above {signed(pred.slope)}.",
                "below": f"TinyCharLM does not agree: the whole interval is below {signed(pred.slope)}."}[v]
        out.append(f"{pred.source} predict a slope of {signed(pred.slope)} ({pred.claim}). {text}"
                   + depends_text(result, pred))
    sloped = [p for p in law.predictions if p.slope is not None]
    if len(sloped) > 1:
        agree = [p.source.split(" ")[0].rstrip(",") for p in sloped if verdict(fit, p) == "agrees"]
        through = [p.source.split(" ")[0].rstrip(",") for p in sloped
                   if verdict(fit, p) == "agrees" and fit.open and not _inside_placed(result, p.slope)]
        if not agree:
            out.append("Neither predicted slope fits TinyCharLM here.")
        elif len(agree) == len(sloped):
            out.append("Both predicted slopes are inside the interval"
                       + (f" ({' and '.join(through)}'s only through its open end)" if through else "")
                       + ": these runs tell neither from the other"
                       + (", nor from no trend." if fit.low <= 0 <= fit.high else "."))
        elif through:
            out.append(f"Only {' and '.join(agree)}'s slope is inside the interval, and only through its open end: "
                       "these runs rule the other out without confirming it.")
        elif fit.low <= 0 <= fit.high:
            out.append(f"Only {' and '.join(agree)}'s slope is inside the interval, but no trend is too: these runs "
                       "rule the other out without confirming it.")
        else:
            out.append(f"TinyCharLM follows {' and '.join(agree)} here.")
    if law.caveat:
        out.append(law.caveat)
    return out



def chart_frames(result: LawResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, lines) for a law's chart. runs: one row per run (x, seed, drop_step, dropped, y: the
    drop step, or the cap for a run that never dropped). lines: x, y, line for the fit through the
    medians and each predicted slope drawn through the fit's value at the middle of the fitted x range
    (geometric mean), so the slopes can be compared by eye."""
    runs = pd.DataFrame([{"x": p.x, "seed": seed, "drop_step": step, "dropped": step is not None,
                          "y": p.cap if step is None else step, "median": p.median if math.isfinite(p.median) else None,
                          "q25": p.quartiles()[0], "q75": min(p.quartiles()[1], p.cap)}
                         for p in result.points for seed, step in zip(p.seeds, p.steps)])
    rows = []
    fit = result.fit
    if fit is not None:
        xs = [min(fit.xs), max(fit.xs)]
        rows += [{"x": x, "y": fit.predict(x), "line": f"fit: slope {signed(fit.slope)}"} for x in xs]
        mid = math.exp(np.mean(np.log(fit.xs)))
        for pred in result.law.predictions:
            if pred.slope is not None:
                rows += [{"x": x, "y": fit.predict(mid) * (x / mid) ** pred.slope,
                          "line": f"{pred.source.split(' ')[0].rstrip(',')}: slope {signed(pred.slope)}"} for x in xs]
    return runs, pd.DataFrame(rows, columns=["x", "y", "line"])


def vocab_effects() -> dict[int, dict[str, float]]:
    """What else V moves in the vocab sweep, from its table's settings (LAWS["vocab"].path): V -> {"threshold":
    ln V / 2, the drop's line in nats; "repeats": the expected share of a pattern's positions whose token occurs
    in that pattern more than once (tokens drawn uniformly from V, core.model.task.sample_batch; the period
    uniform over period_min..period_max)}."""
    t = read_table(LAWS["vocab"].path)
    periods = range(int(t["period_min"].iloc[0]), int(t["period_max"].iloc[0]) + 1)
    return {int(v): {"threshold": math.log(v) / 2,
                     "repeats": float(np.mean([1 - (1 - 1 / v) ** (p - 1) for p in periods]))}
            for v in sorted(t["vocab_size"].unique())}


def sweep_tables() -> list[tuple[Path, pd.DataFrame]]:
    """(path, table) of every shipped table that core.sweeps.run wrote (checkpoints/laws/*.csv), those
    with runs that have a drop step and a cap: not readings.csv (a reading per seed) nor markov.csv (stage
    onsets, no drop)."""
    out = []
    for path in sorted(LAWS_DIR.glob("*.csv")):
        t = read_table(path)
        if not t.empty and {"run_id", "drop_step", "steps"} <= set(t.columns):
            out.append((Path(path), t))
    return out


def sweeps_caption() -> str:
    """What every shipped law table trained, read from the tables: the preset, steps, seeds a point, the
    learning-rate schedule those steps had (TrainConfig's defaults, as the sweeps ran them) and the resamples."""
    from core.training.config import TrainConfig

    tables = [t for _, t in sweep_tables()]
    constant = [t for t in tables if (t["decay_steps"] == 0).all()]  # those say their own schedule
    tables = [t for t in tables if not (t["decay_steps"] == 0).all()]
    if not tables:
        return ""
    runs = pd.concat(tables)
    steps = sorted({int(s) for s in runs["steps"]})
    settings = [c for c in SETTINGS if c in runs.columns and c != "seed"]
    per_point = runs.groupby(settings, dropna=False)["seed"].nunique()
    presets = sorted(set(runs["preset"]))
    cfg = TrainConfig(steps=steps[0])
    floor = cfg.lr_at(cfg.steps - 1) / cfg.lr
    held = max(cfg.steps - cfg.decay_steps, cfg.warmup_steps)
    seeds = f"{per_point.min()}" if per_point.min() == per_point.max() else f"{per_point.min()}-{per_point.max()}"
    schedule = (f"; the learning rate is held for the first {held} steps and then falls linearly to "
                f"{floor:.0%} of it, so a drop after step {held} happens at a lower rate than an early one"
                if cfg.schedule == "linear_decay" and cfg.decay_steps and len(steps) == 1 else "")
    which = "Every sweep" + (" but the constant-rate one" if constant else "")
    return (f"{which} trains {' and '.join(presets)} for {' or '.join(map(str, steps))} steps ({seeds} seeds a "
            f"point, one torch thread a run){schedule}. The fit's interval resamples the seeds {N_BOOT} times, a "
            "seed's runs at every point together (a seed sets the same initial weights wherever the model's shapes "
            "stay the same: every sweep but the vocabulary's).")


def _run_name(table_name: str, row) -> str:
    """One run of a shipped table in words, by what its table varies: "B = 8, seed 2"."""
    if table_name in LAWS:
        law = LAWS[table_name]
        return f"{law.axis_name.split()[-1]} = {num(float(row[law.axis]))}, seed {int(row['seed'])}"
    if table_name == "clamps":
        return f"{arm_name(row['hold'], row['clamp'])}, seed {int(row['seed'])}"
    if table_name == "init":
        return f"{'plain' if row['init'] == 'plain' else 'enlarged'} start, seed {int(row['seed'])}"
    if table_name == "targets":
        return f"T = {int(row['seq_len'])}, B = {int(row['batch_size'])} at a constant rate, seed {int(row['seed'])}"
    return f"{table_name}, seed {int(row['seed'])}"


def two_block_sentence() -> str:
    """How many of the 2-block runs the page shows dropped within their caps, counted from the tables (the
    transition study and every law table; a run shipped in two tables, same run_id, counted once), and
    which did not: those are censored at their cap (they may drop later), not runs that cannot drop."""
    from core.training.transition import STUDY_FILE

    total, dropped, never, caps = 0, 0, [], set()
    if STUDY_FILE.is_file():
        t = pd.read_csv(STUDY_FILE, comment="#")
        t = t[t["blocks"] == 2]
        total, dropped = len(t), int(t["dropped"].astype(str).str.lower().eq("true").sum())
        never += [f"transition study seed {int(r.seed)}" for r in t.itertuples() if str(r.dropped).lower() != "true"]
        caps |= {int(c) for c in t["steps_run"]}
    seen: dict[str, tuple[str, bool]] = {}
    for path, t in sweep_tables():
        for _, row in t[t["n_layers"] == 2].iterrows():
            if row["run_id"] not in seen:
                seen[row["run_id"]] = (_run_name(Path(path).stem, row), not pd.isna(row["drop_step"]))
                caps.add(int(row["steps"]))  # the cap (a run stopped at stop_below ran fewer steps_run)
    total += len(seen)
    dropped += sum(d for _, d in seen.values())
    plain = [n for n, d in seen.values() if not d and n.startswith("plain start")]
    others = [n for n, d in seen.values() if not d and not n.startswith("plain start")]
    if not total:
        return ""
    cap = " or ".join(map(str, sorted(caps)))
    if dropped == total:
        return f"With two blocks, all {total} runs on this page dropped within their {cap} steps."
    named = others + ([f"every plain start ({len(plain)} runs)"] if plain else []) + never
    return (f"With two blocks, {dropped} of the {total} distinct runs on this page dropped within their {cap} steps; "
            f"the others ({'; '.join(named)}) had not dropped when training stopped, which says only that their drop, "
            "if it comes, is later than the cap.")
