"""The training timeline of one run, from its snapshots (checkpoint format v2): the later-copy loss
and Olsson et al.'s in-context-learning score at every snapshot, the loss at each position before
and after the drop, and a film strip of two heads' patterns across the drop.

Everything is measured on the fixed evaluation batch of the run's task (core.training.trainer.eval_batch).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from core.model.hooks import hook_name
from core.model.snapshots import snapshot_model
from core.model.task import copy_masks
from core.model.tinycharlm import TinyCharLM
from core.training.frames import FRAMES, MAX_LIVE_FRAMES, frame_indices, keep_frame, live_strip, pick_heads  # noqa: F401 -- their public path too
from core.training.trainer import eval_batch
from core.training.transition import describe_curve

EARLY, LATE = 10, 90  # positions (0-based) of the predicted tokens the ICL score compares, at most
# (Olsson et al. compare the 500th token of the context with the 50th; these are the scaled-down choice, pulled in by
# icl_positions so that `early` is in the first copy and `late` in a later copy of every sequence)
BEFORE = 50  # the "before the drop" loss-by-position curve: the snapshot nearest this many steps before drop_start
CHUNK = 16  # sequences a timeline measures at a time (measure_step)
CROP = 64  # the film strip shows the first CROP positions of one sequence


def icl_positions(seq_len: int, period_min: int | None = None, period_max: int | None = None) -> tuple[int, int]:
    """(early, late) predicted-token positions, pulled inside a short sequence and, given the task's
    period range, chosen so that `early` < period_min (in the first copy of every sequence) and, where
    the sequence is long enough, `late` >= period_max (in a later copy of every sequence)."""
    late = min(LATE, seq_len - 1)
    early = min(EARLY, late - 1)
    if period_min is not None:
        early = max(1, min(early, period_min - 1))
    if period_max is not None and late < period_max <= seq_len - 1:
        late = period_max
    return early, late


def icl_positions_hold(early: int, late: int, period_min: int, period_max: int) -> dict:
    """Whether the ICL score's positions do what its caption says: {first: early < period_min (the
    token at `early` is in the first copy of every sequence), later: late >= period_max}."""
    return {"first": early < period_min, "later": late >= period_max}


@torch.no_grad()
def measure_step(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor) -> dict:
    """loss_later (nats), loss_by_position [T-1] (entry t-1: mean loss of predicting the token at
    position t = 1..T-1) and pattern0 [L, H, T, T], the patterns of the batch's first sequence.
    CHUNK sequences at a time, keeping only the patterns: the whole 128-sequence batch at once, with the
    stream and v kept too, took about 150 MB for a moment, in the server at the end of every Train-page run
    (bench/README.md, "Server memory"); each sequence's floats are the same either way."""
    names = [hook_name(layer, "attn.hook_pattern") for layer in range(model.cfg.n_layers)]
    T, per, pattern0 = tokens.shape[1], [], None
    for i in range(0, tokens.shape[0], CHUNK):
        logits, cache = model.run_with_hooks(tokens[i:i + CHUNK], cache=names)
        per.append(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                   tokens[i:i + CHUNK, 1:].reshape(-1), reduction="none").view(-1, T - 1))
        if i == 0 and names:
            pattern0 = torch.stack([cache[n][0] for n in names]).numpy()
    per = torch.cat(per)
    later = copy_masks(periods, T)["later"]
    return {"loss_later": float(per[later].mean()), "loss_by_position": per.mean(0).numpy(), "pattern0": pattern0}


def timeline(model: TinyCharLM, info: dict) -> dict | None:
    """The timeline of a model with snapshots (None without): steps (snapshots, then the final step),
    loss_later, icl (loss at `late` minus loss at `early`), early, late, loss_by_position [n, T-1],
    drop (core.training.transition.describe_curve of this curve), before_after (indices of a snapshot on the
    plateau and one after the drop) and position_change (_position_change), frames (FRAMES steps across the drop),
    heads {"previous-token": (layer, head), "induction": (layer, head)} picked on the final model,
    patterns {head name: [FRAMES, CROP, CROP]}, period (of the film strip's sequence)."""
    snaps = info.get("snapshots") or []
    if not snaps or model.cfg.n_layers == 0:
        return None
    task = info["task"]
    tokens, periods = eval_batch(task, model.cfg.vocab_size)
    final = (info.get("train") or {}).get("steps_done")
    if not isinstance(final, int) and info.get("history"):
        final = info["history"][-1].get("step")
    if not isinstance(final, int) or final <= snaps[-1]["step"]:
        return None  # the file does not say where its final weights sit on the timeline
    models = (snapshot_model(model, s["state_dict"]) if s else model for s in [*snaps, None])  # one at a time
    steps = [s["step"] for s in snaps] + [final]
    i0 = strip_index(periods)  # the film strip's sequence goes first
    tokens = torch.cat([tokens[i0:i0 + 1], tokens[:i0], tokens[i0 + 1:]])
    periods = torch.cat([periods[i0:i0 + 1], periods[:i0], periods[i0 + 1:]])
    rows = [measure_step(m.eval(), tokens, periods) for m in models]
    loss = [r["loss_later"] for r in rows]
    by_pos = np.stack([r["loss_by_position"] for r in rows])
    early, late = icl_positions(tokens.shape[1], task.period_min, task.period_max)
    icl = by_pos[:, late - 1] - by_pos[:, early - 1]
    drop = describe_curve(steps, loss, model.cfg.vocab_size)
    frames = frame_indices(steps, drop)
    heads = pick_heads(info.get("history"), rows[-1]["pattern0"], int(periods[0]))
    before_after = _before_after(steps, loss, drop)
    crop = min(CROP, tokens.shape[1])
    patterns = {name: np.stack([rows[i]["pattern0"][lh[0], lh[1], :crop, :crop] for i in frames])
                for name, lh in heads.items() if lh is not None}
    return {"steps": steps, "loss_later": loss, "icl": icl.tolist(), "early": early, "late": late,
            "loss_by_position": by_pos, "drop": drop, "frames": [steps[i] for i in frames], "heads": heads,
            "patterns": patterns, "period": int(periods[0]), "tokens": tokens[0, :crop].tolist(),
            "before_after": before_after, "position_change": _position_change(by_pos, before_after, task.period_max),
            "icl_holds": icl_positions_hold(early, late, task.period_min, task.period_max)}


def strip_index(periods: torch.Tensor) -> int:
    """The film strip's sequence in an evaluation batch: the one with the shortest period, so its
    first CROP positions hold the most copies."""
    return int(torch.argmin(periods))


# ---------------------------------------------------------------------------------------------
# The film strip of a run still training: patterns the worker streams with each logged row




def strip_tokens(task, vocab_size: int) -> tuple[torch.Tensor, int]:
    """([1, T], period): the film strip's sequence of the run's evaluation batch (as timeline() picks it)."""
    tokens, periods = eval_batch(task, vocab_size)
    if periods is None:  # the Markov task: its first sequence (no period; 0 stands for none)
        return tokens[:1], 0
    i0 = strip_index(periods)
    return tokens[i0:i0 + 1], int(periods[i0])


@torch.no_grad()
def frame_patterns(model: TinyCharLM, tokens: torch.Tensor) -> np.ndarray | None:
    """[L, H, c, c] float16: every head's pattern on the first c = min(CROP, T) positions of tokens [1, T]
    (None for a 0-block model)."""
    _, cache = model.run_with_cache(tokens, per_head=False)
    if not cache["pattern"]:
        return None
    c = min(CROP, tokens.shape[1])
    return torch.stack([p[0, :, :c, :c] for p in cache["pattern"]]).to(torch.float16).numpy()


def _position_change(by_pos: np.ndarray, before_after: tuple[int, int] | None, period_max: int) -> dict | None:
    """How much the loss varies with position before the drop, beside what the drop takes off:
    spread_before (nats, max - min over positions at the `before` snapshot) and drop (the mean fall from
    `before` to `after` at positions from `from_position` = period_max on, in a later copy of every
    sequence); None without a drop."""
    if before_after is None:
        return None
    b, a = before_after
    later = slice(period_max - 1, None)  # entry t - 1 predicts the token at position t
    return {"spread_before": float(by_pos[b].max() - by_pos[b].min()), "from_position": period_max,
            "drop": float((by_pos[b][later] - by_pos[a][later]).mean())}


def _before_after(steps: list[int], loss: list[float], drop: dict) -> tuple[int, int] | None:
    """Indices of a snapshot on the plateau (the nearest to BEFORE steps before the drop's start, which
    is already inside the fall; at most the drop's start) and one after it (50 steps past the drop's
    end, or the nearest snapshot to that), or None when the curve never dropped."""
    if not drop["dropped"]:
        return None
    start = steps.index(drop["drop_start"])
    target = drop["drop_start"] - BEFORE
    before = min(range(start + 1), key=lambda i: (abs(steps[i] - target), -i))
    target = drop["drop_end"] + 50
    after = min(range(len(steps)), key=lambda i: (abs(steps[i] - target), i))
    return before, max(after, steps.index(drop["drop_end"]))

