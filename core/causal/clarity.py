"""When measured numbers give a clear answer: the one rule set behind both what the Causal page says
(core.causal.readings's sentences) and what it asks (core.quiz.causal's questions), so a sentence and a
question on the same runs cannot disagree; the questions of core.quiz.questions compare intervals and
margins with it too.

- The runs must differ: M(clean) - M(corrupted) >= MIN_GAP nats, or every patch effect is a ratio of
  small differences.
- One row beats another when its 95% bootstrap interval over the sequences (effect_low, effect_high,
  core.causal.patching.effect_interval; a head score's, core.reading.heads.score_intervals, for the Attention page's
  question) lies wholly above the other's; a frame without intervals needs the point estimates
  CLEAR_GAP apart (the margin core.quiz.questions uses for every question).
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


def above(hi_row, lo_row, value: str = "patch_effect") -> bool:
    """hi_row's 95% interval lies wholly above lo_row's (columns <prefix>_low, <prefix>_high: effect_low,
    effect_high for a patch effect, prev_token_low, prev_token_high for a head score); without intervals,
    the point estimates (column `value`) must differ by CLEAR_GAP."""
    low, high = _interval_columns(value)
    if low in hi_row and high in lo_row:
        return bool(hi_row[low] > lo_row[high])
    return bool(hi_row[value] - lo_row[value] >= CLEAR_GAP)


def above_all(rows: dict, best: str, value: str = "patch_effect") -> bool:
    """rows[best] is above() every other row with a defined value."""
    return all(above(rows[best], r, value) for k, r in rows.items() if k != best and r[value] == r[value])


def _interval_columns(value: str) -> tuple[str, str]:
    prefix = "effect" if value == "patch_effect" else value
    return f"{prefix}_low", f"{prefix}_high"


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
