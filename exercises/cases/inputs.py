"""Inputs that several sections' checks build: task batches, a model's cache, a few heads to check on."""
from __future__ import annotations

import torch

from exercises import planted


def batch(model, task, n: int = 8, seed: int = 0, seq_len: int | None = None):
    """A seeded task batch (tokens [n, T], periods [n]) for the model's vocabulary; seq_len shortens it."""
    from core.model.task import TaskConfig, sample_batch

    if seq_len is not None:
        task = TaskConfig(task.period_min, min(task.period_max, seq_len // 2), seq_len)
    g = torch.Generator().manual_seed(seed)
    return sample_batch(task, n, model.cfg.vocab_size, generator=g)


def _patterns(model, tokens):
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    return cache


def head_list(model, label):
    """A few (layer, head) pairs of a model: the planted circuit's two heads; else the first two heads
    of the last block, and head 1.1 when there are two blocks or more."""
    if model.cfg.n_layers == 0:
        return []
    if label.startswith("the planted"):
        return [planted.PREV, planted.INDUCTION]
    last = model.cfg.n_layers - 1
    return [(last, h) for h in range(min(model.cfg.n_heads, 2))] + ([(0, 0)] if last else [])
