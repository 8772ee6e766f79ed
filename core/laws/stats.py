"""The statistics every Laws table shares: a point's runs, the log-log fit of the medians, its paired
bootstrap, and the numbers as the page prints them.

A point keeps every seed's step (of the drop, or of a stage); a run that never reached it within its cap
counts as "later than the cap" (censored): it raises the point's median and quartiles, and a point whose
median is censored (half its seeds or more never reached it) has no median and stays out of the fit.
The fit is the least-squares line through (log x, log median step) over the points that have a median;
its interval is a paired bootstrap over the seeds, with core.reading.bootstrap's resample count, seed and
level. Paired, because a seed's runs at two points are not unrelated: the seed sets the initial weights
(identical at every point of a sweep whose settings leave the weights' shapes alone) and the data
stream, and a seed that is late at one point tends to be late at the others (seed_rank_correlation). So
each resample draws seeds once and uses them at every point (a drawn seed a point does not hold is left
out there); a table whose points share too few seeds falls back to resampling each point's seeds on its own.

Every resample is kept. One in which a fitted point's median is censored has a slope that is not a number
but a direction: the censored medians are later than any step, so the slope is +inf when they sit right of
the points' mean log x (-inf when left of it), ranked last (first) as a censored run is. The interval then
has an open end wherever more than its tail's share of resamples met a censored median, and Fit.censored
says how many did: the table cannot say where that end is, only that it is beyond any finite slope.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from core.reading.bootstrap import BOOT_SEED, LEVEL, N_BOOT, resample_indices
from core.sweeps.run import read_table

LAWS_DIR = Path(__file__).resolve().parents[2] / "checkpoints" / "laws"
MIN_SEEDS = 2  # per point: fewer gives no spread and nothing to resample


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
        low, high = np.quantile(with_inf(self.steps), [0.25, 0.75], method="nearest")
        return float(low), float(high)

    @property
    def median(self) -> float:
        """The median drop step; inf when half the runs or more never dropped (the median is above the cap)."""
        return _median(with_inf(self.steps))


@dataclass(frozen=True)
class Fit:
    """log(median drop step) = intercept + slope * log(x) over `xs`, and slope's bootstrap interval."""
    slope: float
    intercept: float
    low: float
    high: float
    xs: tuple[float, ...]  # the points fitted (those with a median)
    resamples: int  # bootstrap resamples with a slope (every one, unless censored medians met on both sides)
    censored: int = 0  # resamples in which a fitted point's median was censored (slope +inf or -inf)
    paired: bool = True  # the seeds were drawn together at every point

    @property
    def open(self) -> bool:
        """Whether an end of the interval is infinite (censored medians decided it)."""
        return math.isinf(self.low) or math.isinf(self.high)

    def predict(self, x: float) -> float:
        return math.exp(self.intercept) * x ** self.slope


def with_inf(steps) -> np.ndarray:
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


def lsq_slope(logx: np.ndarray, logy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope and intercept of logy [..., P] on logx [P], batched over leading axes."""
    dx = logx - logx.mean()
    slope = ((logy - logy.mean(-1, keepdims=True)) * dx).sum(-1) / (dx ** 2).sum()
    return slope, logy.mean(-1) - slope * logx.mean()


def paired(points: tuple[Point, ...]) -> bool:
    """Whether every point holds the same seeds (so seed k's runs can be resampled together)."""
    return len({p.seeds for p in points}) == 1


def boot_medians(steps: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The median (inf for censored runs, _median's rule) of steps[idx] per row of idx [N_BOOT, n]."""
    values = np.sort(steps[idx], axis=1)
    k = values.shape[1]
    return values[:, k // 2] if k % 2 else (values[:, k // 2 - 1] + values[:, k // 2]) / 2


def shared_seeds(points: tuple[Point, ...]) -> tuple[int, ...] | None:
    """The seeds to draw together at every point: all the points' seeds when at least MIN_SEEDS of them are held at
    every point (a point lacking a drawn seed leaves it out), else None (the points share too few seeds)."""
    common = set.intersection(*(set(p.seeds) for p in points))
    if len(common) < MIN_SEEDS:
        return None
    return tuple(sorted(set().union(*(p.seeds for p in points))))


def masked_medians(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The median of values[idx] per row, NaN entries (seeds a point lacks) left out, inf ranked last (_median's
    rule); NaN for a row with no value."""
    drawn = np.sort(values[idx], axis=1)  # NaN sorts after inf
    count = np.isfinite(drawn).sum(axis=1) + np.isinf(drawn).sum(axis=1)
    lo = np.take_along_axis(drawn, np.maximum((count - 1) // 2, 0)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(drawn, np.maximum(count // 2, 0)[:, None], axis=1)[:, 0]
    with np.errstate(invalid="ignore"):
        out = np.where(count % 2 == 1, lo, (lo + hi) / 2)
    return np.where(count > 0, out, np.nan)


def boot_slopes(logx: np.ndarray, medians: np.ndarray) -> np.ndarray:
    """The least-squares slope of log(medians) [N, P] on logx [P] per row; a row with censored (inf) medians gets
    +inf or -inf, the sign of the censored points' summed distance from mean log x (the limit as those medians
    grow together), NaN if that sum is 0 or a median is missing."""
    dx = logx - logx.mean()
    censored = np.isinf(medians)
    finite = np.where(censored | np.isnan(medians), 1.0, medians)
    slopes, _ = lsq_slope(logx, np.log(finite))
    side = (censored * dx).sum(axis=1)
    with np.errstate(invalid="ignore"):
        slopes = np.where(censored.any(axis=1), np.sign(side) * np.inf, slopes)
    slopes = np.where(censored.any(axis=1) & (side == 0), np.nan, slopes)
    return np.where(np.isnan(medians).any(axis=1), np.nan, slopes)


def quantiles(values: np.ndarray, qs) -> list[float]:
    """numpy's linear quantiles, NaN left out, where an infinite value is an open end: a quantile that falls on or
    next to +inf (-inf) is +inf (-inf), not an interpolation with it."""
    v = np.sort(values[~np.isnan(values)])
    if not len(v):
        return [math.nan for _ in qs]
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo, hi = v[int(math.floor(pos))], v[int(math.ceil(pos))]
        if lo == hi or not (math.isfinite(lo) and math.isfinite(hi)):
            out.append(float(hi if math.isinf(hi) and hi > 0 else lo))
        else:
            out.append(float(lo + (hi - lo) * (pos - math.floor(pos))))
    return out


def fit_points(points: tuple[Point, ...]) -> Fit | None:
    """The log-log fit of the medians (None if fewer than two points have one) and its interval: each
    of N_BOOT resamples draws the seeds with replacement (resample_indices) and refits. The draw is
    paired: one draw of seeds for every point, when the points share their seeds (shared_seeds; see the
    module's docstring); otherwise one draw per point. Every resample is kept: one that meets a censored
    median has an infinite slope (boot_slopes), counted in Fit.censored, and can make an end open."""
    used = [p for p in points if math.isfinite(p.median)]
    if len(used) < 2:
        return None
    logx = np.log([p.x for p in used])
    slope, intercept = lsq_slope(logx, np.log([p.median for p in used]))
    boot = np.empty((N_BOOT, len(used)))
    together = paired(points)
    if together:
        shared = resample_indices(used[0].n)
        for i, p in enumerate(used):
            boot[:, i] = boot_medians(with_inf(p.steps), shared)
    elif (union := shared_seeds(tuple(used))) is not None:
        together = True
        idx = resample_indices(len(union))
        for i, p in enumerate(used):
            at = dict(zip(p.seeds, with_inf(p.steps)))
            boot[:, i] = masked_medians(np.array([at.get(s, np.nan) for s in union]), idx)
    else:
        for i, p in enumerate(used):
            boot[:, i] = boot_medians(with_inf(p.steps), resample_indices(p.n, BOOT_SEED + i))
    slopes = boot_slopes(logx, boot)
    a = (1 - LEVEL) / 2
    low, high = quantiles(slopes, [a, 1 - a])
    return Fit(float(slope), float(intercept), low, high, tuple(p.x for p in used), int((~np.isnan(slopes)).sum()),
               int(np.isinf(boot).any(axis=1).sum()), together)


def placed_fit(points: tuple[Point, ...], step: float) -> Fit | None:
    """fit_points with every censored run placed at `step` (a step past its cap where it might have come): what
    an open end or a verdict depends on, read at a few such steps."""
    return fit_points(tuple(replace(p, steps=tuple(step if s is None else s for s in p.steps)) for p in points))


def interval_text(fit: Fit, digits: int = 2) -> str:
    """"+0.72 to +inf" (an open end printed as ±inf)."""
    def end(x: float) -> str:
        return ("+inf" if x > 0 else "−inf") if math.isinf(x) else signed(x, digits)
    return f"{end(fit.low)} to {end(fit.high)}"


def censored_text(fit: Fit) -> str:
    """"; 142 of the 1000 resamples met a censored median, their slope +inf (ranked last)", or ""."""
    if not fit.censored:
        return ""
    return (f"; {fit.censored} of the {N_BOOT} resamples met a censored median, their slope infinite (ranked beyond "
            "every finite one)")


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
            out[seed] = float(lsq_slope(logx, np.log(steps))[0])
    return out


def seed_rank_correlation(points: tuple[Point, ...]) -> float | None:
    """How consistently the seeds keep their order from point to point: the Spearman rank correlation
    of the seeds' drop steps (a never-dropped run ranked last, ties at their mean rank) between two
    points, averaged over every pair of points. +1: the same seed is the earliest, the second, ... at
    every point; 0: a seed's rank at one point says nothing of its rank at another. None when the points
    do not hold the same seeds, or a point's runs all tie."""
    if not paired(points) or len(points) < 2:
        return None
    ranks = [_ranks(with_inf(p.steps)) for p in points]
    rs = []
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            a, b = ranks[i] - ranks[i].mean(), ranks[j] - ranks[j].mean()
            if not (a.any() and b.any()):
                return None
            rs.append(float((a * b).sum() / math.sqrt((a ** 2).sum() * (b ** 2).sum())))
    return float(np.mean(rs))


def num(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:g}"


def signed(x: float, digits: int = 2) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def decimals(values, marks) -> int:
    """Decimals enough that no value reads as equal to a mark it is not (an interval end of -0.502 beside
    a predicted -0.50 is printed -0.502, so "the whole interval is above -0.50" does not read wrong)."""
    for digits in (2, 3, 4):
        if not any(round(v, digits) == round(m, digits) and v != m for v in values for m in marks):
            return digits
    return 4


def trend(fit: Fit) -> str:
    """Which way the drop step moves with x, as far as the interval tells."""
    if fit.low > 0:
        return "comes later"
    if fit.high < 0:
        return "comes earlier"
    return "shows no clear trend"


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


def group_sentence(name: str, point: Point) -> str:
    """'<name>: median drop step M (quartiles a-b), k of n runs dropped within cap steps.'"""
    if point.n_dropped == 0:
        return (f"{name}: none of {point.n} runs dropped within {point.cap} steps (censored: training stopped "
                f"there, so each drop, if it comes, is later than step {point.cap}).")
    low, high = point.quartiles()
    spread = f"{num(low)} to {num(high) if math.isfinite(high) else f'above {point.cap}'}"
    median = num(point.median) if math.isfinite(point.median) else f"above {point.cap}"
    return (f"{name}: median drop step {median} (quartiles {spread}); {point.n_dropped} of {point.n} runs dropped "
            f"within {point.cap} steps.")


def signed_rank(a, b) -> tuple[float, int, int]:
    """The paired Wilcoxon signed-rank test of b against a, seed by seed (None: censored, later than any step):
    (two-sided exact p, seeds where b is later, seeds that differ). The differences b - a are ranked by size, ties
    at their mean rank (a censored run against a finite one is the largest difference; two censored runs, or two
    equal steps, are no difference and are left out); p is the share of the 2^n equally likely sign patterns (no
    difference between the arms: each seed's sign a coin toss) whose rank sum is at least as far from its mean as
    the one measured. n is at most 20 here (2^20 patterns)."""
    x, y = with_inf(a), with_inf(b)
    with np.errstate(invalid="ignore"):
        d = y - x
    d = d[~np.isnan(d) & (d != 0)]
    n = len(d)
    if not n:
        return 1.0, 0, 0
    if n > 20:
        raise ValueError(f"{n} paired seeds: the exact signed-rank test here enumerates at most 20.")
    mag = np.where(np.isinf(d), np.inf, np.abs(d))
    ranks = _ranks(mag)
    observed = ranks[d > 0].sum()
    mean = ranks.sum() / 2
    signs = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1  # every sign pattern
    sums = signs @ ranks
    p = float((np.abs(sums - mean) >= abs(observed - mean) - 1e-9).mean())
    return p, int((d > 0).sum()), n
