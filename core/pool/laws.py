"""The laws of the drop (issue 31): how the drop step of a sweep (core.pool.sweep's table) moves with
the one setting the sweep varied, set beside the published predictions.

A table's runs are grouped into points by the settings that vary (seeds aside); each point keeps every
seed's drop step, and a run that never dropped within its `steps_run` counts as "later than the cap"
(censored): it raises the point's median and quartiles, and a point whose median is censored (half
its seeds or more never dropped) has no median and stays out of the fit, said in the sentences.
The fit is the least-squares line through (log x, log median drop step) over the points that have a
median; its interval is a paired bootstrap over the seeds, with core.reading.bootstrap's resample count,
seed and level. Paired, because a seed's runs at two points are not unrelated: the seed sets the
initial weights (identical at every point of the context, seq_len and batch sweeps, whose settings
leave the weights' shapes alone; vocab_size changes the embedding's shape, so there they differ) and
the data stream, and a seed that drops late at one point tends to drop late at the others
(seed_rank_correlation). So each resample draws seed indices once and uses them at every point; a
table whose points do not share their seeds falls back to resampling each point's seeds on its own.

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

from core.model.drop import HIGH, LOW
from core.pool.sweep import read_table
from core.pool.sweep_grid import SETTINGS
from core.reading.bootstrap import BOOT_SEED, LEVEL, N_BOOT, resample_indices

LAWS_DIR = Path(__file__).resolve().parents[2] / "checkpoints" / "laws"
MIN_SEEDS = 2  # per point: fewer gives no spread and nothing to resample


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
class Point:
    """One setting of a sweep: every seed's drop step (None: never dropped within `cap` steps)."""
    x: float
    seeds: tuple[int, ...]
    steps: tuple[float | None, ...]
    cap: int  # the runs' steps_run: a censored run dropped later than this, if ever

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def n_dropped(self) -> int:
        return sum(s is not None for s in self.steps)

    def quartiles(self) -> tuple[float, float]:
        """The 25% and 75% drop steps (nearest run), never-dropped runs ranked last (inf where one lands)."""
        low, high = np.quantile(_censored(self.steps), [0.25, 0.75], method="nearest")
        return float(low), float(high)

    @property
    def median(self) -> float:
        """The median drop step; inf when half the runs or more never dropped (the median is above the cap)."""
        return _median(_censored(self.steps))


@dataclass(frozen=True)
class Fit:
    """log(median drop step) = intercept + slope * log(x) over `xs`, and slope's bootstrap interval."""
    slope: float
    intercept: float
    low: float
    high: float
    xs: tuple[float, ...]  # the points fitted (those with a median)
    resamples: int  # bootstrap resamples whose every fitted point kept a median

    def predict(self, x: float) -> float:
        return math.exp(self.intercept) * x ** self.slope


@dataclass(frozen=True)
class LawResult:
    law: Law
    points: tuple[Point, ...]
    fit: Fit | None  # None: fewer than two points have a median
    command: str  # the command that reproduces the table (its header)


def _censored(steps) -> np.ndarray:
    return np.array([math.inf if s is None else float(s) for s in steps])


def _median(values: np.ndarray) -> float:
    """Median of one row with inf for censored runs: inf only if the middle value(s) are censored."""
    v = np.sort(values)
    k = len(v)
    mid = v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2
    return float(mid)


def table_command(path: str | Path) -> str:
    """The `# command:` line of a table's header ("" if it has none)."""
    for line in Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# command:"):
            return line.partition(":")[2].strip()
    return ""


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


def _slope(logx: np.ndarray, logy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope and intercept of logy [..., P] on logx [P], batched over leading axes."""
    dx = logx - logx.mean()
    slope = ((logy - logy.mean(-1, keepdims=True)) * dx).sum(-1) / (dx ** 2).sum()
    return slope, logy.mean(-1) - slope * logx.mean()


def paired(points: tuple[Point, ...]) -> bool:
    """Whether every point holds the same seeds (so seed k's runs can be resampled together)."""
    return len({p.seeds for p in points}) == 1


def _boot_medians(steps: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The median (inf for censored runs, _median's rule) of steps[idx] per row of idx [N_BOOT, n]."""
    values = np.sort(steps[idx], axis=1)
    k = values.shape[1]
    return values[:, k // 2] if k % 2 else (values[:, k // 2 - 1] + values[:, k // 2]) / 2


def fit_points(points: tuple[Point, ...], level: float = LEVEL, seed: int = BOOT_SEED) -> Fit | None:
    """The log-log fit of the medians (None if fewer than two points have one) and its interval: each
    of N_BOOT resamples draws the seeds with replacement (resample_indices) and refits. The draw is
    paired: one draw of seed indices for every point, when all points hold the same seeds (see the
    module's docstring); otherwise one draw per point. Resamples in which a fitted point's median is
    censored are left out."""
    used = [p for p in points if math.isfinite(p.median)]
    if len(used) < 2:
        return None
    logx = np.log([p.x for p in used])
    slope, intercept = _slope(logx, np.log([p.median for p in used]))
    boot = np.empty((N_BOOT, len(used)))
    shared = resample_indices(used[0].n, seed) if paired(points) else None
    for i, p in enumerate(used):
        idx = shared if shared is not None else resample_indices(p.n, seed + i)
        boot[:, i] = _boot_medians(_censored(p.steps), idx)
    ok = np.isfinite(boot).all(axis=1)
    slopes, _ = _slope(logx, np.log(boot[ok]))
    a = (1 - level) / 2
    low, high = (np.quantile(slopes, [a, 1 - a]) if ok.any() else (math.nan, math.nan))
    return Fit(float(slope), float(intercept), float(low), float(high), tuple(p.x for p in used), int(ok.sum()))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties (two censored runs, two equal drop steps) given their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for v in np.unique(values):
        tied = values == v
        ranks[tied] = ranks[tied].mean()
    return ranks


def seed_slopes(points: tuple[Point, ...]) -> dict[int, float]:
    """seed -> the least-squares log-log slope of that seed's own drop steps, for the seeds that dropped at
    every point ({} when the points do not hold the same seeds)."""
    if not paired(points) or len(points) < 2:
        return {}
    logx = np.log([p.x for p in points])
    out = {}
    for i, seed in enumerate(points[0].seeds):
        steps = [p.steps[i] for p in points]
        if all(s is not None for s in steps):
            out[seed] = float(_slope(logx, np.log(steps))[0])
    return out


def seed_rank_correlation(points: tuple[Point, ...]) -> float | None:
    """How consistently the seeds keep their order from point to point: the Spearman rank correlation
    of the seeds' drop steps (a never-dropped run ranked last, ties at their mean rank) between two
    points, averaged over every pair of points. +1: the same seed is the earliest, the second, ... at
    every point; 0: a seed's rank at one point says nothing of its rank at another. None when the points
    do not hold the same seeds, or a point's runs all tie."""
    if not paired(points) or len(points) < 2:
        return None
    ranks = [_ranks(_censored(p.steps)) for p in points]
    rs = []
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            a, b = ranks[i] - ranks[i].mean(), ranks[j] - ranks[j].mean()
            if not (a.any() and b.any()):
                return None
            rs.append(float((a * b).sum() / math.sqrt((a ** 2).sum() * (b ** 2).sum())))
    return float(np.mean(rs))


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


def _num(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:g}"


def _signed(x: float, digits: int = 2) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def _digits(values, marks) -> int:
    """Decimals enough that no value reads as equal to a mark it is not (an interval end of -0.502 beside
    a predicted -0.50 is printed -0.502, so "the whole interval is above -0.50" does not read wrong)."""
    for digits in (2, 3, 4):
        if not any(round(v, digits) == round(m, digits) and v != m for v in values for m in marks):
            return digits
    return 4


def _pairing(law: Law) -> str:
    """What a seed shares across a law's points (vocab_size changes the embedding's shape, so the
    initial weights differ there; every other axis leaves the model's shapes alone)."""
    if law.axis == "vocab_size":
        return ("seed k is the same seed at every point, though the embedding's shape, and so the initial "
                "weights, change with V")
    return "seed k starts from the same initial weights at every point"


def trend(fit: Fit) -> str:
    """Which way the drop step moves with x, as far as the interval tells."""
    if fit.low > 0:
        return "comes later"
    if fit.high < 0:
        return "comes earlier"
    return "shows no clear trend"


def verdict(fit: Fit, prediction: Prediction) -> str:
    """'agrees', 'above' or 'below' (the interval against the predicted slope); for a sign-only
    prediction 'agrees' (interval above 0), 'below' (under 0) or 'unclear' (it holds 0)."""
    if prediction.slope is None:
        return "agrees" if fit.low > 0 else "below" if fit.high < 0 else "unclear"
    if fit.low <= prediction.slope <= fit.high:
        return "agrees"
    return "above" if fit.low > prediction.slope else "below"


def sentences(result: LawResult) -> list[str]:
    """What the page says about one law, computed from its table: the points, the fit, and each
    prediction's verdict."""
    law, fit = result.law, result.fit
    axis = law.axis_name
    out = []
    never = [p for p in result.points if p.n_dropped < p.n]
    for p in never:
        out.append(f"At {law.axis_name} = {_num(p.x)}, {p.n - p.n_dropped} of {p.n} runs never dropped within "
                   f"{p.cap} steps" + (" (so its median is above the cap and it is left out of the fit)."
                                       if not math.isfinite(p.median) else "."))
    if fit is None:
        out.append("Fewer than two points have a median drop step within the runs' steps: no slope can be fitted, "
                   "so nothing can be said against the predictions.")
        return out
    seeds = sorted({p.n for p in result.points})
    d = _digits((fit.low, fit.high), [0.0, *(p.slope for p in law.predictions if p.slope is not None)])
    how = ("the same seeds resampled together at every point" if paired(result.points)
           else "each point's seeds resampled on their own")
    out.append(f"Against {law.axis_label}, the median drop step's log-log slope is {_signed(fit.slope)} "
               f"(95% interval {_signed(fit.low, d)} to {_signed(fit.high, d)}, over {len(fit.xs)} points of "
               f"{'/'.join(map(str, seeds))} seeds, {how}, {N_BOOT} times): the drop {trend(fit)} as "
               f"{axis} grows.")
    rho = seed_rank_correlation(result.points)
    if rho is not None:
        per_seed = seed_slopes(result.points)
        own = (f" Fitted seed by seed, the slope runs from {_signed(min(per_seed.values()))} to "
               f"{_signed(max(per_seed.values()))} ({len(per_seed)} seeds that dropped at every point)."
               if len(per_seed) >= 2 else "")
        out.append(f"A seed's runs at different points are paired: {_pairing(law)}, and the seeds' drop steps keep "
                   f"their order from point to point with a Spearman rank correlation of {_signed(rho)} (averaged "
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
        text = {"agrees": f"TinyCharLM agrees: the predicted slope {_signed(pred.slope)} is inside the interval.",
                "weakly": f"TinyCharLM agrees only weakly: the predicted slope {_signed(pred.slope)} is inside the "
                          "interval, but so is 0 (no trend at all).",
                "above": f"TinyCharLM does not agree: the whole interval is above {_signed(pred.slope)}.",
                "below": f"TinyCharLM does not agree: the whole interval is below {_signed(pred.slope)}."}[v]
        out.append(f"{pred.source} predict a slope of {_signed(pred.slope)} ({pred.claim}). {text}")
    sloped = [p for p in law.predictions if p.slope is not None]
    if len(sloped) > 1:
        agree = [p.source.split(" ")[0].rstrip(",") for p in sloped if verdict(fit, p) == "agrees"]
        if not agree:
            out.append("Neither predicted slope fits TinyCharLM here.")
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
        rows += [{"x": x, "y": fit.predict(x), "line": f"fit: slope {_signed(fit.slope)}"} for x in xs]
        mid = math.exp(np.mean(np.log(fit.xs)))
        for pred in result.law.predictions:
            if pred.slope is not None:
                rows += [{"x": x, "y": fit.predict(mid) * (x / mid) ** pred.slope,
                          "line": f"{pred.source.split(' ')[0].rstrip(',')}: slope {_signed(pred.slope)}"} for x in xs]
    return runs, pd.DataFrame(rows, columns=["x", "y", "line"])


def groups(path: str | Path, column: str | list[str]) -> dict:
    """A table's runs grouped by one (categorical) setting, or several (a list: keys are tuples): {value:
    Point} (Point.x is NaN). Used for the initial embedding (checkpoints/laws/init.csv, column init), depth
    (the transition study, column blocks) and the clamps (clamps.csv, hold and clamp), where there is nothing
    to fit a slope to."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}.")
    table = read_table(path)
    columns = [column] if isinstance(column, str) else list(column)
    missing = sorted({*columns, "seed", "drop_step", "steps_run"} - set(table.columns))
    if missing or table.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'runs'}.")
    return {value: Point(math.nan, tuple(int(s) for s in g["seed"]),
                         tuple(None if pd.isna(s) else float(s) for s in g["drop_step"]), int(g["steps_run"].max()))
            for value, g in table.sort_values("seed").groupby(column if isinstance(column, str) else columns,
                                                              sort=True)}


def vocab_effects(path: str | Path | None = None) -> dict[int, dict[str, float]]:
    """What else V moves in the vocab sweep, from its table's settings: V -> {"threshold": ln V / 2, the drop's
    line in nats; "repeats": the expected share of a pattern's positions whose token occurs in that pattern
    more than once (tokens drawn uniformly from V, core.model.task.sample_batch; the period uniform over
    period_min..period_max)}."""
    t = read_table(path or LAWS["vocab"].path)
    periods = range(int(t["period_min"].iloc[0]), int(t["period_max"].iloc[0]) + 1)
    return {int(v): {"threshold": math.log(v) / 2,
                     "repeats": float(np.mean([1 - (1 - 1 / v) ** (p - 1) for p in periods]))}
            for v in sorted(t["vocab_size"].unique())}


def group_sentence(name: str, point: Point) -> str:
    """'<name>: median drop step M (quartiles a-b), k of n runs dropped within cap steps.'"""
    if point.n_dropped == 0:
        return (f"{name}: none of {point.n} runs dropped within {point.cap} steps (censored: training stopped "
                f"there, so each drop, if it comes, is later than step {point.cap}).")
    low, high = point.quartiles()
    spread = f"{_num(low)} to {_num(high) if math.isfinite(high) else f'above {point.cap}'}"
    median = _num(point.median) if math.isfinite(point.median) else f"above {point.cap}"
    return (f"{name}: median drop step {median} (quartiles {spread}); {point.n_dropped} of {point.n} runs dropped "
            f"within {point.cap} steps.")


def sweeps_caption(paths=None) -> str:
    """What every shipped law table trained, read from the tables: the preset, steps, seeds a point, the
    learning-rate schedule those steps had (TrainConfig's defaults, as the sweeps ran them) and the resamples."""
    from core.training.config import TrainConfig

    tables = [read_table(p) for p in (paths or sorted(LAWS_DIR.glob("*.csv")))]
    tables = [t for t in tables if not t.empty and "steps" in t.columns]  # sweep tables (not readings.csv)
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
        return f"{law.axis_name.split()[-1]} = {_num(float(row[law.axis]))}, seed {int(row['seed'])}"
    if table_name == "clamps":
        return f"{arm_name(row['hold'], row['clamp'])}, seed {int(row['seed'])}"
    if table_name == "init":
        return f"{'plain' if row['init'] == 'plain' else 'enlarged'} start, seed {int(row['seed'])}"
    if table_name == "targets":
        return f"T = {int(row['seq_len'])}, B = {int(row['batch_size'])} at a constant rate, seed {int(row['seed'])}"
    return f"{table_name}, seed {int(row['seed'])}"


def two_block_sentence(paths=None, study: str | Path | None = None) -> str:
    """How many of the 2-block runs the page shows dropped within their caps, counted from the tables (the
    transition study and every law table; a run shipped in two tables, same run_id, counted once), and
    which did not: those are censored at their cap (they may drop later), not runs that cannot drop."""
    from core.training.transition import STUDY_FILE

    study = Path(study or STUDY_FILE)
    total, dropped, never, caps = 0, 0, [], set()
    if study.is_file():
        t = pd.read_csv(study, comment="#")
        t = t[t["blocks"] == 2]
        total, dropped = len(t), int(t["dropped"].astype(str).str.lower().eq("true").sum())
        never += [f"transition study seed {int(r.seed)}" for r in t.itertuples() if str(r.dropped).lower() != "true"]
        caps |= {int(c) for c in t["steps_run"]}
    seen: dict[str, tuple[str, bool]] = {}
    for path in sorted(paths or LAWS_DIR.glob("*.csv")):
        t = read_table(path)
        if t.empty or "n_layers" not in t.columns:
            continue
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


# The clamps (issue 31): Singh et al. (2024) clamp parts of the induction circuit while it trains. The lab
# runs two one-head clamps (core.training.interventions): the hold (a block-1 head's pattern held on the
# previous token, the counterpart of their code's opto_prev_token_heads) and clamp_induction_head (a block-2
# head's pattern on the ideal induction pattern, their opto_induction_heads). Neither is their "layer 1
# clamp" (perfect_prev_token_input), which replaces block 1 as a whole.

CLAMPS_FILE = LAWS_DIR / "clamps.csv"
CLAMP_COLUMNS = ["hold", "clamp"]


def arm_name(hold: str, clamp: str) -> str:
    """What one arm of the clamps sweep clamps, in words."""
    parts = ([f"held previous-token head {hold}"] if hold != "none" else []) + (
        [f"induction clamp on {clamp}"] if clamp != "none" else [])
    return " and ".join(parts) or "no clamp"


@dataclass(frozen=True)
class Ratio:
    """An arm's median drop step over the unclamped arm's, with a bootstrap interval over the seeds:
    paired (one draw of seed indices for both arms) when the arms hold the same seeds, which start from the
    same initial weights in both; otherwise each arm's seeds drawn on their own. Resamples where either
    median is censored are left out; `resamples` counts the rest. inf: the arm's median is above its cap."""
    ratio: float
    low: float
    high: float
    resamples: int


def median_ratio(arm: Point, base: Point, level: float = LEVEL, seed: int = BOOT_SEED) -> Ratio:
    """arm.median / base.median and its interval (see Ratio)."""
    shared = resample_indices(base.n, seed) if paired((base, arm)) else None
    boot = [_boot_medians(_censored(p.steps), shared if shared is not None else resample_indices(p.n, seed + i))
            for i, p in enumerate((base, arm))]
    ok = np.isfinite(boot[0]) & np.isfinite(boot[1])
    ratios = boot[1][ok] / boot[0][ok]
    a = (1 - level) / 2
    low, high = np.quantile(ratios, [a, 1 - a]) if ok.any() else (math.nan, math.nan)
    return Ratio(arm.median / base.median, float(low), float(high), int(ok.sum()))


def clamp_arms(path: str | Path = CLAMPS_FILE) -> dict[tuple[str, str], Point]:
    """The clamps table's arms {(hold, clamp): Point}, unclamped first, then the held head, the induction clamp,
    both; ValueError when it varies another setting or has no unclamped arm to compare with."""
    table = read_table(path)
    varied = [c for c in SETTINGS if c in table.columns and c not in ("seed", *CLAMP_COLUMNS)
              and table[c].nunique(dropna=False) > 1]
    if varied:
        raise ValueError(f"{Path(path).name} varies {', '.join(varied)} besides the clamps: split the table.")
    arms = groups(path, CLAMP_COLUMNS)
    if ("none", "none") not in arms or len(arms) < 2:
        raise ValueError(f"{Path(path).name} needs an unclamped arm (hold and clamp none) and a clamped one.")
    order = sorted(arms, key=lambda k: ((k[0] != "none") + (k[1] != "none"), k[1] != "none", k))  # none, 1, 2, both
    return {k: arms[k] for k in order}


def _own_prev_heads(readings: str | Path | None) -> dict[int, str]:
    """seed -> the label of its own previous-token head (readings.csv's prev_head), {} without the table."""
    path = Path(readings) if readings is not None else None
    if path is None or not path.is_file():
        return {}
    t = pd.read_csv(path, comment="#", dtype={"prev_head": str}, keep_default_na=False)
    return {int(s): str(h) for s, h in zip(t["seed"], t["prev_head"])} if {"seed", "prev_head"} <= set(t.columns) \
        else {}


def _range(values) -> str:
    v = [float(x) for x in values]
    return f"{min(v):.2f}" if min(v) == max(v) else f"{min(v):.2f}-{max(v):.2f}"


def clamp_sentences(path: str | Path = CLAMPS_FILE, readings: str | Path | None = None) -> list[str]:
    """What the page says about the clamps, from the table: each arm's drop steps, how abrupt its drops
    are, each clamped arm against the unclamped one, then what these arms can and cannot say about Singh
    et al.'s account. readings: the seed readings table (default READINGS_FILE), which names each seed's own
    previous-token head, set beside the held one."""
    arms = clamp_arms(path)
    table = read_table(path)
    base = arms[("none", "none")]
    own = _own_prev_heads(READINGS_FILE if readings is None else readings)
    out = []

    def runs_of(hold, clamp):
        return table[(table["hold"] == hold) & (table["clamp"] == clamp)]

    def abrupt_of(runs) -> int:
        return int(runs["abrupt"].astype(str).str.lower().eq("true").sum())

    for (hold, clamp), point in arms.items():
        runs = runs_of(hold, clamp)
        text = group_sentence(arm_name(hold, clamp).capitalize(), point)
        if point.n_dropped:
            start = _num(runs["drop_start"].astype(float).median())
            text += (f" {abrupt_of(runs)} of its {point.n_dropped} drops are abrupt (the fall from {HIGH:g} to "
                     f"{LOW:g} nats takes at most half as long as the plateau before it); the loss last stands at "
                     f"{HIGH:g} nats or more at step {start} (median).")
        out.append(text)
    verdicts = {}
    for key, point in arms.items():
        if key == ("none", "none"):
            continue
        r = median_ratio(point, base)
        verdicts[key] = (("earlier" if r.high < 1 else "later" if r.low > 1 else "unclear")
                         if math.isfinite(r.ratio) else "later")
        if not math.isfinite(r.ratio):
            out.append(f"With the {arm_name(*key)}, half the runs or more never dropped: the drop comes later than "
                       "without a clamp.")
            continue
        how = "the same seeds resampled together in both arms" if paired((base, point)) else \
            "each arm's seeds resampled on their own"
        out.append(f"With the {arm_name(*key)}, the median drop step is {r.ratio:.2f} times the unclamped one (95% "
                   f"interval {r.low:.2f} to {r.high:.2f}, {how}, {N_BOOT} times): "
                   + {"earlier": "the drop comes clearly earlier.", "later": "the drop comes clearly later.",
                      "unclear": "these seeds cannot tell it from no clamp."}[verdicts[key]])
    claim = ("Singh et al. (2024) find that induction heads form through subcircuits that interact (the previous-token "
             "head's attend-and-copy, the induction head's match, its copy), and that this interaction makes the phase "
             "change; on that account a subcircuit clamped in its formed state takes its part of the interaction away, "
             "and the transition should come earlier.")
    said = []
    for (hold, clamp), v in verdicts.items():
        if hold != "none" and clamp == "none":
            point = arms[(hold, clamp)]
            text = {"earlier": f"holding {hold} brings the drop clearly earlier",
                    "later": f"holding {hold} brings the drop later",
                    "unclear": f"holding {hold} is inconclusive (the interval holds 1"
                               + (f"; {point.n - point.n_dropped} of its {point.n} seeds never dropped" if
                                  point.n_dropped < point.n else "") + ")"}[v]
            mine = [s for s in point.seeds if s in own]
            if mine:
                same = [s for s in mine if own[s] == hold]
                heads = sorted({own[s] for s in mine})
                text += (f", and {hold} is the previous-token head the unclamped run of the same seed grows on "
                         f"{len(same)} of those {len(mine)} seeds (the readings below find {' or '.join(heads)})"
                         + (", so on every one of them the hold adds a previous-token head beside the one the seed "
                            "would grow instead of holding that one in place" if not same else ""))
            said.append(text)
        elif hold == "none" and clamp != "none":
            runs = runs_of(hold, clamp)
            text = {"earlier": f"clamping {clamp} brings the drop clearly earlier",
                    "later": f"clamping {clamp} brings the drop later",
                    "unclear": f"clamping {clamp} does not clearly move it"}[v]
            if v == "earlier" and arms[(hold, clamp)].n_dropped:
                text += (f", but nearly by construction: the clamp computes the look-up itself, so the later-copy loss "
                         f"can fall with no circuit behind it; block 1's sharpest previous-token score ends at "
                         f"{_range(runs['prev_token_block1'])} with it "
                         f"({_range(runs_of('none', 'none')['prev_token_block1'])} unclamped), and {abrupt_of(runs)} "
                         f"of its {arms[(hold, clamp)].n_dropped} drops are abrupt, "
                         "so what it moves is not an abrupt phase change")
            said.append(text)
    if said:
        out.append(claim + " These arms test it only weakly: " + "; ".join(said) + ".")
    return out


def clamp_frame(path: str | Path = CLAMPS_FILE) -> pd.DataFrame:
    """One row per run for the clamps chart: arm (its name), seed, drop_step, dropped, y (the drop step, or
    the cap for a run that never dropped), median and quartiles of its arm."""
    rows = []
    for (hold, clamp), p in clamp_arms(path).items():
        low, high = p.quartiles()
        rows += [{"arm": arm_name(hold, clamp), "seed": seed, "drop_step": step, "dropped": step is not None,
                  "y": p.cap if step is None else step, "median": p.median if math.isfinite(p.median) else None,
                  "q25": low, "q75": min(high, p.cap)} for seed, step in zip(p.seeds, p.steps)]
    return pd.DataFrame(rows)


# Replication of the Causal page's headline readings across training seeds (bench/seed_readings.py writes
# the table; its docstring defines the columns and the criteria of each *_clear/_needed/_is_ column).

READINGS_FILE = LAWS_DIR / "readings.csv"


def _spread(values: pd.Series) -> str:
    v = values.astype(float)
    return f"median {v.median():.2f}, from {v.min():.2f} to {v.max():.2f}"


def _true(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().eq("true")


def readings_sentences(path: str | Path = READINGS_FILE) -> list[str]:
    """Per headline reading of the Causal page: on how many training seeds it holds and the spread of its
    number over the seeds, set beside one model's interval over its sequences."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}.")
    t = pd.read_csv(path, comment="#", dtype={"key_sender": str, "best_block": str}, keep_default_na=False)
    need = {"seed", "prev_head", "prev_token", "prev_clear", "prev_noise", "prev_needed", "key_is_prev", "best_block"}
    missing = sorted(need - set(t.columns))
    if missing or t.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'rows'}: run bench/seed_readings.py.")
    n = len(t)
    seeds = ", ".join(str(s) for s in t["seed"])
    heads = t.groupby("prev_head")["seed"].apply(lambda s: ", ".join(map(str, s)))
    which = "; ".join(f"{h} on seed{'s' if ',' in s else ''} {s}" for h, s in heads.items())
    same = "the same head on every seed" if len(heads) == 1 else "a different head on different seeds"
    width = (t["prev_noise_high"] - t["prev_noise_low"]).astype(float)
    others = t[~_true(t["key_is_prev"]) & (t["key_sender"] != "")]
    unclear = int((t["key_sender"] == "").sum())
    counts = t["induction_heads"].astype(int).tolist()
    return [
        f"Training seeds {seeds}, one model each ({n} in all), the Causal page's experiments on each as the page "
        "opens them. Every share below is of the gap M(clean) − M(corrupted) the Causal page measures effects "
        "against.",
        f"**Which head is the previous-token head.** A block-1 head has a clear previous-token score (at least 0.5) "
        f"on {int(_true(t['prev_clear']).sum())} of {n} seeds; the sharpest one scores {_spread(t['prev_token'])}. "
        f"It is {same} ({which}): the label is the seed's, the role is not.",
        f"**Its noising effect.** Noising that head's output leaves {_spread(t['prev_noise'])} of M(clean) − "
        f"M(corrupted), clearly needed "
        f"(its interval ending below 0.9) on {int(_true(t['prev_needed']).sum())} of {n} seeds. One model's 95% "
        f"interval over its sequences is {width.median():.2f} wide (median); the seeds spread over "
        f"{float(t['prev_noise'].max() - t['prev_noise'].min()):.2f}.",
        f"**The key path into block 2.** The previous-token head's key path is clearly the most needed one into all "
        f"of block 2 on {int(_true(t['key_is_prev']).sum())} of {n} seeds"
        + (f", another head's on {len(others)}" if len(others) else "")
        + (f", no clear answer on {unclear}" if unclear else "")
        + f"; noising it leaves {_spread(t['prev_key'])} of the gap, within "
        f"{float((t['prev_key'] - t['prev_noise']).abs().max()):.2f} of noising the head's whole output on every seed.",
        f"**The induction heads' effects.** Block 2's best head, patched alone, clearly restores the most of M on "
        f"{int((t['best_block'] == 'block 2').sum())} of {n} seeds; it restores {_spread(t['block2_effect'])}, and "
        f"block 2's single-head patches summed (each head patched on its own, then added: not one patch of "
        f"them all together) {_spread(t['block2_sum'])}. Induction heads (induction_any at least 0.6) per seed: "
        f"{', '.join(map(str, counts))}.",
    ]


# Onset, drop and completion on the same runs, at a constant rate (issue 44). checkpoints/laws/targets.csv
# trains two series with the learning rate never decayed and a cap long enough that few runs are censored,
# each run stopped once its later-copy loss is below 0.5 nats (core.pool.sweep's stop_below): sequence length T
# at batch 32, and batch B at T = 96. Each run records three steps: the head-score onset (block 1's best
# previous-token score at or above core.training.onset.RISING from then on), the drop (ln V / 2) and completion
# (0.5 nats). Along T each sequence holds more later-copy targets; along B each step holds more sequences: both
# raise the later-copy targets per step, so the two series set on that one axis separate "how many targets
# the model has seen" from "how many steps it has taken".

TARGETS_FILE = LAWS_DIR / "targets.csv"
STAGES = {"onset_step": "head-score onset", "drop_step": "drop (ln V / 2)", "completion_step": "completion (0.5 nats)"}
STAGE_SOURCES = {  # the paper whose prediction each stage is the closest measure of
    "onset_step": "the formation of the circuit, which Musat et al. (2025) and Aoyama et al. (2025) time",
    "drop_step": "the lab's drop step, the tables above",
    "completion_step": "how long the copy takes to learn once the circuit is there, which no paper here predicts",
}
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
    d = _digits((fit.low, fit.high), [0.0, -0.5, -1.0])
    return f"{_signed(fit.slope)} (95% interval {_signed(fit.low, d)} to {_signed(fit.high, d)})"


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
        out.append(f"So along T {verdict} (completion's slope {_signed(comp.slope)}, the onset's {_signed(on.slope)}, "
                   f"{_signed(gap)} apart). A longer sequence holds more later-copy targets (about "
                   f"{_num(round(later_targets(16, 32, 64)))} at T = 64, {_num(round(later_targets(16, 32, 160)))} at "
                   "T = 160 with periods 16-32), so each step's gradient carries more examples of the copy once "
                   "the circuit can use them.")
    for s in STAGES:
        a, b = fits[("targets_seq_len", s)], fits[("targets_batch_size", s)]
        if a is None or b is None:
            continue
        overlap = a.low <= b.high and b.low <= a.high
        pooled = fits[("targets", s)]
        out.append(f"Against the later-copy targets per step, the {STAGES[s]}'s slope is {_fit_text(a)} along T "
                   f"and {_fit_text(b)} along B: "
                   + ("their intervals overlap, so these runs cannot tell longer sequences from more sequences: "
                      "as far as they show, what counts is how many targets a step holds" if overlap else
                      "the two series disagree (their intervals do not overlap), so longer sequences and more "
                      "sequences are not interchangeable here")
                   + (f"; all {len(pooled.xs)} points together: {_fit_text(pooled)}." if pooled else "."))
    return out


def slope_power(points: tuple[Point, ...], slope: float = -0.5, level: float = LEVEL,
                seeds: tuple[int, ...] = POWER_SEEDS, seed: int = BOOT_SEED
                ) -> pd.DataFrame | None:
    """How many seeds a point it takes to tell a slope of `slope` from 0, from the measured seed spread: each
    seed's log step at each point minus the point's log median (the seeds that reached it at every point, kept
    together as the paired bootstrap keeps them) is the noise; an experiment with n seeds draws n of those seeds
    with replacement, N_BOOT times, and fits the slope of the medians. Under slope 0 that gives the fitted slopes'
    null spread, its central `level` interval [low, high]; under `slope` every fitted slope is `slope` more (the
    medians move by slope * log x). Rows n, low, high (the null interval), power (the share of experiments under
    `slope` whose fit falls outside the null interval). None with fewer than MIN_SPREAD such seeds or 2 points."""
    if len(points) < 2 or not paired(points):
        return None
    logy = np.array([[math.log(s) if s is not None else math.nan for s in p.steps] for p in points]).T  # [S, P]
    logy = logy[np.isfinite(logy).all(axis=1)]
    if len(logy) < MIN_SPREAD:
        return None
    noise = logy - np.log(np.median(np.exp(logy), axis=0))
    logx = np.log([p.x for p in points])
    rng = np.random.default_rng(seed)
    a = (1 - level) / 2
    rows = []
    for n in seeds:
        idx = rng.integers(0, len(noise), (N_BOOT, n))
        meds = np.log(np.median(np.exp(noise)[idx], axis=1))  # [N_BOOT, P]: each point's median step
        fitted, _ = _slope(logx, meds)
        low, high = np.quantile(fitted, [a, 1 - a])
        moved = fitted + slope
        rows.append({"n": n, "low": float(low), "high": float(high),
                     "power": float(((moved < low) | (moved > high)).mean())})
    return pd.DataFrame(rows)


def seeds_needed(power: pd.DataFrame | None, target: float = POWER) -> int | None:
    """The fewest seeds a point in a slope_power table from which the power stays at or above `target` for every
    larger number tried (None if the largest falls short): resampled medians are discrete, so the power is not
    quite monotone in the seeds."""
    if power is None:
        return None
    below = power.loc[power["power"] < target, "n"]
    later = power[power["n"] > below.max()] if len(below) else power  # at or above target from there on
    return int(later["n"].min()) if len(later) else None


def power_frame(table: pd.DataFrame | None = None, shipped: tuple[str, ...] = ("batch", "seqlen")) -> pd.DataFrame:
    """slope_power of the drop step (and completion) on each constant-rate series, and of the drop on the shipped
    decayed tables `shipped`: rows series, stage, seeds_measured (seeds that reached it at every point), noise_sd
    (the spread of a seed's log step about its point's median), power_5, power_12 (with 5 and 12 seeds a point),
    needed (the fewest seeds for POWER)."""
    table = targets_table() if table is None else table
    cases = []
    for axis, (_, name, _) in SERIES.items():
        runs = series_table(table, axis)
        for stage in ("drop_step", "completion_step"):
            cases.append((f"{name}, constant rate", STAGES[stage], stage_points(runs, stage, axis)))
    for law_name in shipped:
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


def power_percent(power: float, target: float = POWER) -> str:
    """A power in percent, whole unless rounding would carry it across `target` or to 100%: then with the decimals
    that keep it on its side (0.795 is "79.5%", not "80%", beside a statement that 80% takes more seeds)."""
    digits = next((d for d in range(5) if all((round(power, d + 2) >= level) == (power >= level)
                                              for level in (target, 1.0))), 4)
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
    return (f"How many seeds it takes to tell a slope of −0.5 from 0, {POWER:.0%} of the time at the 95% level, "
            "resampling the measured seed spread (each seed's steps about its point's median, kept together across "
            "points): " + "; ".join(parts) + ".")
