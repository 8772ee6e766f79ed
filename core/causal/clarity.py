"""When the Causal page's numbers give a clear answer: the one rule set behind both what the page says
(core.causal.readings's sentences) and what it asks (core.quiz.causal's questions), so a sentence and a
question on the same runs cannot disagree.

- The runs must differ: M(clean) - M(corrupted) >= MIN_GAP nats, or every patch effect is a ratio of
  small differences.
- One row beats another when its 95% bootstrap interval over the sequences (effect_low, effect_high,
  core.causal.intervals) lies wholly above the other's; a frame without intervals needs the point
  estimates CLEAR_GAP apart (the margin core.quiz.questions uses for every question).
- A path is clearly needed when noising it leaves at most NEEDED (its interval's upper end).
"""
from __future__ import annotations

import pandas as pd

MIN_GAP = 0.5  # nats: below this M(clean) - M(corrupted) is too small for patch effects to mean much
NEEDED = 0.9  # a path is clearly needed when noising it leaves at most this much (interval's upper end)
CLEAR_GAP = 0.05  # without intervals, the right option must beat the runner-up by at least this much


def clear_gap(gap: float | None) -> bool:
    """The runs differ enough for patch effects to mean something (False for NaN). None: no gap was
    measured with the frame at hand (a frame on its own), which then does not decide."""
    return gap is None or (gap == gap and gap >= MIN_GAP)


def above(hi_row, lo_row) -> bool:
    """hi_row's 95% interval lies wholly above lo_row's (columns effect_low, effect_high); without
    intervals, the point estimates (patch_effect) must differ by CLEAR_GAP."""
    if "effect_low" in hi_row and "effect_high" in lo_row:
        return bool(hi_row["effect_low"] > lo_row["effect_high"])
    return bool(hi_row["patch_effect"] - lo_row["patch_effect"] >= CLEAR_GAP)


def above_all(rows: dict, best: str) -> bool:
    """rows[best] is above() every other row with a defined effect."""
    return all(above(rows[best], r) for k, r in rows.items() if k != best and r["patch_effect"] == r["patch_effect"])


def flipped(row: pd.Series) -> pd.Series:
    """The row with its effect and interval negated (a lower effect ranks higher)."""
    out = row.copy()
    out["patch_effect"] = -row["patch_effect"]
    if "effect_low" in row:
        out["effect_low"], out["effect_high"] = -row["effect_high"], -row["effect_low"]
    return out


def most_needed(noised: pd.DataFrame, gap: float | None) -> pd.Series | None:
    """The row (one per sender, column sender) whose noising leaves the least, when that is clear: the
    gap is clear, its interval ends below NEEDED and lies below every other row's. None otherwise."""
    if noised is None or len(noised) < 2 or not clear_gap(gap) or not noised["patch_effect"].notna().any():
        return None
    rows = {str(r["sender"]): r for _, r in noised.iterrows()}
    worst = str(noised.loc[noised["patch_effect"].idxmin(), "sender"])
    if rows[worst].get("effect_high", rows[worst]["patch_effect"]) < NEEDED and above_all(
            {k: flipped(r) for k, r in rows.items()}, worst):
        return rows[worst]
    return None
