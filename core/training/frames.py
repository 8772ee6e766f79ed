"""The film strip's frames, torch-free: the ones a live run keeps as the worker streams them (core.pool.runs),
the strip the Train page draws of them, and which frames and heads a strip shows. A server that only starts,
streams and watches a run imports no torch (core.training.timeline computes the frames, in the worker)."""
from __future__ import annotations

import numpy as np

from core.training.transition import describe_curve

FRAMES = 6
MAX_LIVE_FRAMES = 120  # frames a live run keeps (float16, [L, H, CROP, CROP] each: 64 KB for 2 blocks)


def keep_frame(frames: list[tuple[int, np.ndarray]], step: int, patterns: np.ndarray,
               cap: int = MAX_LIVE_FRAMES) -> list[tuple[int, np.ndarray]]:
    """frames plus (step, patterns); past `cap`, every other older frame is dropped (the newest stays)."""
    frames = frames + [(step, patterns)]
    if len(frames) > cap:
        frames = frames[:-1][::2] + frames[-1:]
    return frames


def frame_indices(steps: list[int], drop: dict) -> list[int]:
    """Indices into `steps` of up to FRAMES frames spread from 50 steps before the drop's start to 50 after
    its end (describe_curve's drop), or over the whole run when it has not dropped."""
    if drop["dropped"]:
        lo, hi = max(drop["drop_start"] - 50, 0), min(drop["drop_end"] + 50, steps[-1])
    else:
        lo, hi = 0, steps[-1]
    return sorted({min(range(len(steps)), key=lambda i: (abs(steps[i] - t), i)) for t in np.linspace(lo, hi, FRAMES)})


def live_strip(frames: list[tuple[int, np.ndarray]], history: list[dict], vocab_size: int,
               period: int) -> dict | None:
    """The film strip of a run in progress, in the form charts draw timeline()'s: frames (steps),
    heads, patterns {head name: [n, c, c]}, positions (c), drop, period; None before
    the first frame or for a 0-block model. Heads are picked on the latest logged row; period is the
    strip sequence's (strip_tokens)."""
    if not frames or not history:
        return None
    steps = [s for s, _ in frames]
    rows = {r["step"]: r for r in history}
    curve = [(s, rows[s]["loss_later_copies"]) for s in steps if s in rows]
    drop = describe_curve([s for s, _ in curve], [v for _, v in curve], vocab_size) if curve else {"dropped": False}
    picked = frame_indices(steps, drop)
    last = frames[-1][1]
    heads = pick_heads([history[-1]], last.astype(np.float32), period)
    patterns = {name: np.stack([frames[i][1][lh[0], lh[1]].astype(np.float32) for i in picked])
                for name, lh in heads.items() if lh is not None}
    return {"frames": [steps[i] for i in picked], "heads": heads, "patterns": patterns,
            "positions": last.shape[-1], "drop": drop, "period": period}


def pick_heads(history: list | None, pattern: np.ndarray, period: int) -> dict:
    """{"previous-token": (0, h), "induction": (L-1, h) or None for one block}: the block-1 head with
    the largest prev_token score and the last-block head with the largest induction score in the
    run's last history row, or (without history) on `pattern` [L, H, T, T] of one sequence."""
    L, H, T, _ = pattern.shape
    last = (history or [{}])[-1]
    if last.get("prev_token") and last.get("induction"):
        prev, ind = last["prev_token"][0], last["induction"][L - 1]
    else:
        prev = [np.mean([pattern[0, h, i, i - 1] for i in range(1, T)]) for h in range(H)]
        ind = [np.mean([pattern[L - 1, h, i, i + 1 - period] for i in range(period, T)]) for h in range(H)]
    return {"previous-token": (0, int(np.argmax(prev))), "induction": (L - 1, int(np.argmax(ind))) if L >= 2 else None}
