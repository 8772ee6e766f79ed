"""The frames a live run keeps for its film strip, torch-free: the server keeps them as the worker streams them
(core.pool.runs), and a server that only streams a run imports no torch (core.training.timeline computes
them, in the worker)."""
from __future__ import annotations

import numpy as np

MAX_LIVE_FRAMES = 120  # frames a live run keeps (float16, [L, H, CROP, CROP] each: 64 KB for 2 blocks)


def keep_frame(frames: list[tuple[int, np.ndarray]], step: int, patterns: np.ndarray,
               cap: int = MAX_LIVE_FRAMES) -> list[tuple[int, np.ndarray]]:
    """frames plus (step, patterns); past `cap`, every other older frame is dropped (the newest stays)."""
    frames = frames + [(step, patterns)]
    if len(frames) > cap:
        frames = frames[:-1][::2] + frames[-1:]
    return frames
