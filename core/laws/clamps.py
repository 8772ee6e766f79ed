"""The clamps table (checkpoints/laws/clamps.csv): Singh et al. (2024) clamp parts of the induction circuit
while it trains. The lab runs two one-head clamps (core.training.interventions): the hold (a block-1 head's
pattern held on the previous token, the counterpart of their code's opto_prev_token_heads) and
clamp_induction_head (a block-2 head's pattern on the ideal induction pattern, their opto_induction_heads).
Neither is their "layer 1 clamp" (perfect_prev_token_input), which replaces block 1 as a whole.

Each arm's drop steps, and each clamped arm's median against the unclamped one's with a paired bootstrap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from core.laws.readings import READINGS_FILE
from core.laws.stats import (
    LAWS_DIR,
    Point,
    boot_medians,
    group_sentence,
    groups,
    num,
    paired,
    quantiles,
    with_inf,
)
from core.model.drop import HIGH, LOW
from core.reading.bootstrap import BOOT_SEED, LEVEL, N_BOOT, resample_indices
from core.sweeps.grid import SETTINGS
from core.sweeps.run import read_table

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
    same initial weights in both; otherwise each arm's seeds drawn on their own. Every resample is kept: a
    censored median is later than any step, so the ratio is inf where only the arm's is censored and 0 where only
    the base's is (both: no ratio, left out); `censored` counts the resamples with a censored median, and an end
    is open (inf) when they decide it. `resamples`: those with a ratio. inf: the arm's median is above its cap."""
    ratio: float
    low: float
    high: float
    resamples: int
    censored: int = 0


def median_ratio(arm: Point, base: Point) -> Ratio:
    """arm.median / base.median and its interval (see Ratio)."""
    shared = resample_indices(base.n) if paired((base, arm)) else None
    boot = [boot_medians(with_inf(p.steps), shared if shared is not None else resample_indices(p.n, BOOT_SEED + i))
            for i, p in enumerate((base, arm))]
    with np.errstate(invalid="ignore"):
        ratios = boot[1] / boot[0]  # inf / finite = inf, finite / inf = 0, inf / inf = NaN
    a = (1 - LEVEL) / 2
    low, high = quantiles(ratios, [a, 1 - a])
    censored = int((np.isinf(boot[0]) | np.isinf(boot[1])).sum())
    return Ratio(arm.median / base.median, low, high, int((~np.isnan(ratios)).sum()), censored)


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
            start = num(runs["drop_start"].astype(float).median())
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
        high = f"{r.high:.2f}" if math.isfinite(r.high) else "inf"
        open_end = (f"; in {r.censored} of them a median was censored, so the upper end is open" if math.isinf(r.high)
                    else f"; in {r.censored} of them a median was censored" if r.censored else "")
        out.append(f"With the {arm_name(*key)}, the median drop step is {r.ratio:.2f} times the unclamped one "
                   f"({LEVEL:.0%} interval {r.low:.2f} to {high}, {how}, {N_BOOT} times{open_end}): "
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


def clamp_frame() -> pd.DataFrame:
    """One row per run of the clamps table (CLAMPS_FILE) for its chart: arm (its name), seed, drop_step, dropped,
    y (the drop step, or the cap for a run that never dropped), median and quartiles of its arm."""
    rows = []
    for (hold, clamp), p in clamp_arms().items():
        low, high = p.quartiles()
        rows += [{"arm": arm_name(hold, clamp), "seed": seed, "drop_step": step, "dropped": step is not None,
                  "y": p.cap if step is None else step, "median": p.median if math.isfinite(p.median) else None,
                  "q25": low, "q75": min(high, p.cap)} for seed, step in zip(p.seeds, p.steps)]
    return pd.DataFrame(rows)
