"""The induction transition across seeds: definitions, measurement of one loss curve, and the
shipped study (checkpoints/transition_study.csv, written by bench/transition_study.py).

A curve is the later-copy loss l(s) (loss_later_copies on the fixed evaluation batch, nats) at
steps s = 0, k, 2k, ... With V the vocabulary size (ln V = 4.16 nats for V = 64, a uniform guess):
- drop_step, drop_start and drop_end as core.model.drop defines them (drop_step: the first step with
  l < ln V / 2; the window: from the last step with l >= 3 nats to the first with l < 1 nat).
  width = drop_end - drop_start, the steps the loss takes to fall by at least 2 nats.
- dropped: the curve reaches l < LOW (1 nat) within the run.
- abrupt: dropped, and width <= drop_start / 2 -- the fall from HIGH to LOW takes at most half as
  many steps as the plateau before it lasted.
Optional columns, measured on the fixed evaluation batch at the end of the run:
- prev_token_block1: the largest prev_token score of a block-1 head.
- induction_heads: how many heads of the last block have induction_any (attention on the token after
  any earlier copy, core.reading.heads) of at least INDUCTION_HEAD. Files written before induction_any
  existed counted the latest copy only (induction >= 0.6); they lack the induction_any_* columns.
- induction_any_max, induction_any_2nd: the largest and second-largest induction_any of a last-block
  head (so a reader can move the threshold without retraining).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.model.drop import HIGH, LOW, drop_step, drop_window

STUDY_FILE = Path(__file__).resolve().parents[2] / "checkpoints" / "transition_study.csv"
COLUMNS = ["blocks", "seed", "steps_run", "dropped", "abrupt", "drop_step", "drop_start", "drop_end", "width",
           "plateau_loss", "final_loss_later"]
HEAD_COLUMNS = ["prev_token_block1", "induction_heads", "induction_any_max", "induction_any_2nd"]  # optional
if TYPE_CHECKING:  # pandas is imported where it is used: a training process never imports it (its memory)
    import pandas as pd

INDUCTION_HEAD = 0.6  # an induction head: induction_any at least this
SHARP_PREV_TOKEN = 0.9  # a sharp previous-token head: prev_token at least this


def describe_curve(steps: list[int], losses: list[float], vocab_size: int = 64) -> dict:
    """The transition figures of one curve (definitions in the module docstring).

    steps, losses: equal-length lists, steps increasing. Returns dropped, abrupt, drop_step,
    drop_start, drop_end, width (None where undefined), plateau_loss (median loss on steps before
    drop_start, or over the whole curve when it never dropped) and final_loss_later.
    """
    if len(steps) != len(losses) or not steps:
        raise ValueError("steps and losses must be non-empty and of equal length.")
    import pandas as pd
    window = drop_window(steps, losses)
    out = {"dropped": window is not None, "abrupt": False, "drop_step": drop_step(steps, losses, vocab_size),
           "drop_start": None, "drop_end": None, "width": None, "final_loss_later": float(losses[-1])}
    if window is None:
        out["plateau_loss"] = float(pd.Series(losses).median())
        return out
    start, end = window
    start_i = steps.index(start)
    before = losses[: start_i + 1]
    out.update(drop_start=start, drop_end=end, width=end - start, plateau_loss=float(pd.Series(before).median()),
               abrupt=(end - start) <= start / 2)
    return out


def load_study(path: str | Path | None = None) -> pd.DataFrame:
    """The shipped study as a frame with COLUMNS (one row per run); comment lines start with '#'."""
    import pandas as pd

    frame = pd.read_csv(path or STUDY_FILE, comment="#")
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"the transition study file lacks the columns {', '.join(missing)}.")
    for c in ("dropped", "abrupt"):
        frame[c] = frame[c].astype(str).str.lower().eq("true")
    return frame[COLUMNS + [c for c in HEAD_COLUMNS if c in frame.columns]]


def head_figures(prev_token: list[list[float]], induction_any: list[list[float]]) -> dict:
    """The optional head columns from per-[layer][head] prev_token and induction_any scores."""
    last = sorted(induction_any[-1], reverse=True) if induction_any else []
    return {"prev_token_block1": round(max(prev_token[0]), 3) if prev_token else None,
            "induction_heads": sum(s >= INDUCTION_HEAD for s in last),
            "induction_any_max": round(last[0], 3) if last else None,
            "induction_any_2nd": round(last[1], 3) if len(last) > 1 else None}


def study_command(path: str | Path | None = None) -> str | None:
    """The command that regenerated the study, from its '# command:' header line."""
    for line in Path(path or STUDY_FILE).read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# command:"):
            return line.split(":", 1)[1].strip()
    return None


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per number of blocks: runs, how many dropped and how many abruptly, and the median and range
    of drop_step and width over the runs that dropped."""
    import pandas as pd

    rows = []
    for blocks, g in frame.groupby("blocks"):
        d = g[g["dropped"]]
        rows.append({
            "blocks": int(blocks), "runs": len(g), "dropped": int(g["dropped"].sum()), "abrupt": int(g["abrupt"].sum()),
            "drop_step_median": float(d["drop_step"].median()) if len(d) else None,
            "drop_step_min": float(d["drop_step"].min()) if len(d) else None,
            "drop_step_max": float(d["drop_step"].max()) if len(d) else None,
            "width_median": float(d["width"].median()) if len(d) else None,
            "width_max": float(d["width"].max()) if len(d) else None,
            "final_loss_later_median": float(g["final_loss_later"].median()),
        } | ({"sharp_prev_token": int((g["prev_token_block1"] >= SHARP_PREV_TOKEN).sum()),
              "two_induction_heads": int((g["induction_heads"] >= 2).sum())} if "induction_heads" in g else {}))
    return pd.DataFrame(rows)


def shipped_study(path: str | Path | None = None) -> dict | None:
    """The shipped study: {"runs", "summary", "command", "high", "low"}, {"error": sentence} for an
    unreadable file, or None while it has not been measured (no file)."""
    import pandas as pd

    path = Path(path or STUDY_FILE)
    if not path.is_file():
        return None
    try:
        runs = load_study(path)
        return {"runs": runs, "summary": summarize(runs), "command": study_command(path), "high": HIGH, "low": LOW}
    except (ValueError, OSError, KeyError, pd.errors.ParserError) as e:
        return {"error": f"The transition study file {path.name} could not be read: {e}"}
