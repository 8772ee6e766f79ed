"""Restarts: sequences in which a fresh pattern begins at a random point, and how long the model
needs to catch up (one period plus one token for an induction circuit).

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.model.lazy import no_grad
from core.model.metrics import per_target_loss
from core.model.task import TaskConfig

if TYPE_CHECKING:
    import torch

    from core.model.tinycharlm import TinyCharLM


@dataclass
class RestartBatch:
    """Sequences in which fresh patterns begin at random positions.

    tokens [B, T]; restart [B, T] bool (a fresh pattern begins at t; never at t = 0); since [B, T]
    (t minus the start of t's segment, the sequence start counting as a start); period [B, T] (the
    period of t's segment); after_restart [B, T] bool (t's segment began at a restart, not at 0).
    """

    tokens: torch.Tensor
    restart: torch.Tensor
    since: torch.Tensor
    period: torch.Tensor
    after_restart: torch.Tensor


def restart_positions(batch_size: int, seq_len: int, n_restarts: int,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """[B, T] bool: `n_restarts` distinct positions per sequence, uniform over 1..T-1. Drawn from
    their own random numbers, before and without reference to any token."""
    import torch

    if not 0 <= n_restarts < seq_len:
        raise ValueError(f"n_restarts must be between 0 and {seq_len - 1}, got {n_restarts}.")
    order = torch.rand(batch_size, seq_len - 1, generator=generator).argsort(-1)[:, :n_restarts] + 1
    mask = torch.zeros(batch_size, seq_len, dtype=torch.bool)
    mask.scatter_(1, order, True)
    return mask


def fill_segments(restart: torch.Tensor, task: TaskConfig, vocab_size: int,
                  generator: torch.Generator | None = None) -> RestartBatch:
    """Give every segment between restarts its own period (uniform in the task's range) and its own
    fresh pattern (uniform tokens), tiled from the segment's first position."""
    import torch

    B, T = restart.shape
    seg = restart.long().cumsum(-1)  # [B, T] segment index, 0 before the first restart
    n_seg = int(seg.max()) + 1
    periods = torch.randint(task.period_min, task.period_max + 1, (B, n_seg), generator=generator)
    patterns = torch.randint(0, vocab_size, (B, n_seg, task.period_max), generator=generator)
    t = torch.arange(T).expand(B, T)
    seg_start = torch.where(restart, t, torch.zeros_like(t)).cummax(-1).values  # latest start <= t
    since = t - seg_start
    period = periods.gather(1, seg)
    flat = patterns.view(B, -1).gather(1, seg * task.period_max + since % period)
    return RestartBatch(flat, restart, since, period, seg > 0)


def sample_restarts(task: TaskConfig, batch_size: int, vocab_size: int, n_restarts: int = 1,
                    generator: torch.Generator | None = None,
                    token_generator: torch.Generator | None = None) -> RestartBatch:
    """Restart positions first (from `generator`), then every segment's period and tokens (from
    `token_generator`, default the same generator): where a restart falls cannot depend on tokens."""
    task.validate(vocab_size)
    restart = restart_positions(batch_size, task.seq_len, n_restarts, generator)
    return fill_segments(restart, task, vocab_size, token_generator if token_generator is not None else generator)


def restart_example(task: TaskConfig, vocab_size: int, seed: int) -> dict:
    """One restart sequence for display, as plain values: tokens (list), restart (its position),
    old_period, new_period, seed (the one used).

    Draws exactly as sample_restarts does, but skips seeds (seed, seed+1, ...) whose restart leaves
    no room to show both patterns (a whole old period before it; after it, a new period and RUN + 1 tokens),
    for at most 200 seeds.
    """
    import torch

    T = task.seq_len
    for s in range(seed, seed + 200):
        rb = sample_restarts(task, 1, vocab_size, 1, torch.Generator().manual_seed(s))
        r = int(rb.restart[0].nonzero()[0, 0])
        old, new = int(rb.period[0, 0]), int(rb.period[0, r])
        if r >= old and r + new + 1 + RUN <= T or s == seed + 199:
            return {"tokens": rb.tokens[0].tolist(), "restart": r, "old_period": old, "new_period": new, "seed": s}


@no_grad
def restart_curve(model: TinyCharLM, task: TaskConfig, n_seqs: int = 1024, seed: int = 0,
                  chunk: int = 256) -> dict:
    """Accuracy of the next-token prediction against where the target sits in its segment.

    Over n_seqs sampled sequences with one restart each, every target t >= 1 is placed by k = since[t] (tokens
    since its pattern began) and by k - period (tokens since that pattern's second copy began).
    Returns numpy-free lists: "k", "acc_restart", "n_restart" (targets after a restart),
    "acc_start", "n_start" (targets in the segment that began at position 0) and the same against
    "k_rel" (k - period): "acc_rel_restart", "n_rel_restart", "acc_rel_start", "n_rel_start";
    plus "summary" over targets after a restart: accuracy in the new pattern's first copy
    (first_copy), at its second copy's first token (second_copy_first_token: no induction can know it,
    since its predecessor, the pattern's last token, has not been followed by anything yet), at the
    token after that (first_predictable, k = L + 1: the earliest a context-reader can be right) and
    from there on (rest); and over restart segments with room for that (n_segments): how many
    tokens after the restart the model needs until RUN predictions in a row are right
    (median_recovery), that number minus the earliest possible L + 1 (median_lag), the share with lag
    0 (share_earliest), and n_recovered; and context_probe, restart_context_probe's figures on this
    sample (its first restart per sequence).
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    T = task.seq_len
    K, R0 = T, task.period_max  # k in 0..T-1, k_rel in -period_max..T-1
    cnt = torch.zeros(2, 2, K + R0)  # [after_restart, by rel?, bin]
    hit = torch.zeros_like(cnt)
    recover = []  # (tokens after the restart until predictions are right again, period)
    probe = [0.0, 0.0, 0]  # restart_context_probe's counts on this sample
    for s in range(0, n_seqs, chunk):
        rb = sample_restarts(task, min(chunk, n_seqs - s), model.cfg.vocab_size, 1, g)
        logits = model(rb.tokens)
        _, correct = per_target_loss(logits, rb.tokens)  # [b, T-1] targets 1..T-1
        recover += _recoveries(rb, correct)
        probe = [a + b for a, b in zip(probe, _two_token_counts(model, rb, logits))]
        since, per, after = rb.since[:, 1:], rb.period[:, 1:], rb.after_restart[:, 1:].long()
        for rel, idx in ((0, since), (1, since - per + R0)):
            flat = (after * 2 + rel) * (K + R0) + idx
            cnt.view(-1).index_add_(0, flat.reshape(-1), torch.ones(flat.numel()))
            hit.view(-1).index_add_(0, flat.reshape(-1), correct.reshape(-1).float())
    acc = hit / cnt.clamp_min(1)
    out = {"k": list(range(K)), "k_rel": list(range(-R0, K))}
    for after, tag in ((1, "restart"), (0, "start")):
        out[f"acc_{tag}"] = acc[after, 0, :K].tolist()
        out[f"n_{tag}"] = cnt[after, 0, :K].long().tolist()
        out[f"acc_rel_{tag}"] = acc[after, 1].tolist()
        out[f"n_rel_{tag}"] = cnt[after, 1].long().tolist()
    rel_h, rel_c = hit[1, 1], cnt[1, 1]
    out["summary"] = {
        "first_copy": float(rel_h[:R0].sum() / rel_c[:R0].sum().clamp_min(1)),
        "second_copy_first_token": float(rel_h[R0] / rel_c[R0].clamp_min(1)),
        "first_predictable": float(rel_h[R0 + 1] / rel_c[R0 + 1].clamp_min(1)),
        "rest": float(rel_h[R0 + 1:].sum() / rel_c[R0 + 1:].sum().clamp_min(1)),
        "n_after_restart": int(rel_c.sum()),
    }
    ks = sorted(k for k, _ in recover if k is not None)
    lag = sorted(k - (L + 1) for k, L in recover if k is not None)
    out["summary"].update({
        "n_segments": len(recover), "n_recovered": len(lag),
        "median_recovery": float(ks[len(ks) // 2]) if ks else math.nan,
        "median_lag": float(lag[len(lag) // 2]) if lag else math.nan,
        "share_earliest": sum(x == 0 for x in lag) / len(lag) if lag else math.nan,
        "context_probe": _probe_summary(tuple(probe)),
    })
    return out


RUN = 3  # predictions in a row that count as "predicting again"


@no_grad
def restart_context_probe(model: TinyCharLM, task: TaskConfig, n_seqs: int = 512, seed: int = 0) -> dict:
    """Does the model find its place from one token or from two?

    At the first token it could know after a restart (the new pattern's second token, predicted from
    the second copy's first token), the earlier occurrence of the current token sits right at the
    restart, so the token before it belongs to the old pattern. A model that matches the current token
    alone is unaffected; one that also matches the token before fails there. The probe measures the
    accuracy at that target as sampled ("as_sampled") and with the token before the restart replaced
    by the new pattern's last token ("two_tokens_match"), over the n sequences whose (first) restart
    leaves room for it. Returns {"as_sampled", "two_tokens_match", "n"}; restart_curve reports the
    same for its own sample.
    """
    import torch

    rb = sample_restarts(task, n_seqs, model.cfg.vocab_size, 1, torch.Generator().manual_seed(seed))
    return _probe_summary(_two_token_counts(model, rb))


def _two_token_counts(model: TinyCharLM, rb: RestartBatch,
                      logits: torch.Tensor | None = None) -> tuple[float, float, int]:
    """(right as sampled, right with the token before the restart matched, n) at the first knowable
    token after each sequence's first restart (restart_context_probe); logits [B, T, V] of rb.tokens
    when already computed."""
    import torch

    rows = []
    for b in range(rb.tokens.shape[0]):
        starts = rb.restart[b].nonzero()
        if len(starts):
            r = int(starts[0])
            L = int(rb.period[b, r])
            if r + L + 1 < rb.tokens.shape[1]:
                rows.append((b, r, L))
    if not rows:
        return 0.0, 0.0, 0
    b_idx = torch.tensor([b for b, _, _ in rows])
    q_idx = torch.tensor([r + L for _, r, L in rows])  # position of the second copy's first token
    fixed = rb.tokens.clone()
    fixed[b_idx, torch.tensor([r - 1 for _, r, _ in rows])] = rb.tokens[b_idx, q_idx - 1]

    def right(tokens: torch.Tensor, logits: torch.Tensor) -> float:
        return float((logits[b_idx, q_idx].argmax(-1) == tokens[b_idx, q_idx + 1]).sum())

    sampled = logits if logits is not None else model(rb.tokens)
    return right(rb.tokens, sampled), right(fixed, model(fixed)), len(rows)


def _probe_summary(counts: tuple[float, float, int]) -> dict:
    as_sampled, matched, n = counts
    if not n:
        return {"as_sampled": None, "two_tokens_match": None, "n": 0}
    return {"as_sampled": as_sampled / n, "two_tokens_match": matched / n, "n": n}


def _recoveries(rb: RestartBatch, correct: torch.Tensor) -> list[tuple[int | None, int]]:
    """For every segment that began at a restart and is long enough to show its second copy's second
    token and RUN - 1 more: (k, L) with k the fewest tokens after the restart from which RUN targets in a row
    are right (None if never, within the segment), L the segment's period. correct [B, T-1]."""
    out = []
    T = rb.tokens.shape[1]
    for b in range(rb.tokens.shape[0]):
        starts = rb.restart[b].nonzero()[:, 0].tolist()
        ok = [False] + correct[b].tolist()  # ok[t]: target t predicted right (t >= 1)
        for i, r in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else T
            L = int(rb.period[b, r])
            if r + L + 1 + RUN > end:
                continue
            k = next((k for k in range(end - r - RUN + 1) if all(ok[r + k:r + k + RUN])), None)
            out.append((k, L))
    return out
