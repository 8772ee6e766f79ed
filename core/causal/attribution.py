"""Logit-difference attribution (Wang et al. 2022): core.causal.metrics's logit_diff of the clean run, the
right token's logit minus that of the token the corrupted run's first copy offers (corrupted[t - L]), split
exactly into one term per part of the final stream (core.reading.attribution.stream_parts: the embedding,
every head's output, each block's b_O), since the unembedding is linear and the model has no LayerNorm.
"""
from __future__ import annotations

import torch

from core.causal.patching import target_mask
from core.model.tinycharlm import TinyCharLM
from core.reading.attribution import stream_parts


@torch.no_grad()
def logit_diff_attribution(model: TinyCharLM, clean: torch.Tensor, corrupted: torch.Tensor,
                           periods: torch.Tensor) -> torch.Tensor:
    """Each part's term of the clean run's logit difference: [P] (core.reading.attribution.part_labels), the
    mean over the second-copy targets L+1 <= t < 2L (core.causal.patching.target_mask) of part p at position
    t - 1 dotted with W_E[clean_t] - W_E[corrupted_{t-L}]. Summed over the parts: metric_values' logit_diff."""
    parts = stream_parts(model, clean)  # [P, B, T, D]
    b, i = target_mask(periods, clean.shape[1]).nonzero(as_tuple=True)  # target t = i + 1
    direction = model.W_E[clean[b, i + 1]] - model.W_E[corrupted[b, i + 1 - periods[b]]]  # [N, D]
    return (parts[:, b, i] * direction).sum(-1).mean(-1)
