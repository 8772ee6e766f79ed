"""The drop: where the later-copy loss falls. The one place its definitions live (docs/DESIGN.md,
"The drop").

A curve is the later-copy loss l(s) (nats) at logged steps s; V is the vocabulary size, so a uniform
guess scores ln V (4.16 nats for V = 64).
- drop_step: the first step with l < ln V / 2. The single number every page, table and question
  calls "the drop step".
- the drop window [drop_start, drop_end]: drop_end is the first step with l < LOW; drop_start is
  the last step before it with l >= HIGH. It measures how long the fall takes.
"""
from __future__ import annotations

import math

HIGH = 3.0  # nats: still on the plateau
LOW = 1.0  # nats: the skill is there


def drop_threshold(vocab_size: int) -> float:
    """Half the loss of a uniform guess, ln V / 2: below it the later-copy loss has dropped."""
    return math.log(vocab_size) / 2


def drop_step(steps: list[int], losses: list[float], vocab_size: int) -> int | None:
    """The first step whose loss is below drop_threshold(vocab_size), or None."""
    limit = drop_threshold(vocab_size)
    return next((int(s) for s, l in zip(steps, losses) if isinstance(l, (int, float)) and l < limit), None)


def drop_window(steps: list[int], losses: list[float]) -> tuple[int, int] | None:
    """(drop_start, drop_end) of a finished fall from HIGH to below LOW, or None if l never fell below LOW."""
    end_i = next((i for i, l in enumerate(losses) if l < LOW), None)
    if end_i is None:
        return None
    start_i = max((i for i in range(end_i) if losses[i] >= HIGH), default=0)
    return steps[start_i], steps[end_i]
