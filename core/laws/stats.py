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
each resample draws seed indices once and uses them at every point; a table whose points do not share
their seeds falls back to resampling each point's seeds on its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
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
    resamples: int  # bootstrap resamples whose every fitted point kept a median

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
    slope, intercept = lsq_slope(logx, np.log([p.median for p in used]))
    boot = np.empty((N_BOOT, len(used)))
    shared = resample_indices(used[0].n, seed) if paired(points) else None
    for i, p in enumerate(used):
        idx = shared if shared is not None else resample_indices(p.n, seed + i)
        boot[:, i] = boot_medians(with_inf(p.steps), idx)
    ok = np.isfinite(boot).all(axis=1)
    slopes, _ = lsq_slope(logx, np.log(boot[ok]))
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
