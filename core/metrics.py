"""Loss and accuracy split by copy (DESIGN.md "Metrics")."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .task import copy_masks

METRIC_NAMES = (
    "loss_first_copy",
    "loss_second_copy",
    "loss_later_copies",
    "acc_second_copy",
    "acc_later_copies",
)


def per_target_loss(logits: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy (nats) and correctness of each target: logits [B, T, V], tokens [B, T]
    -> (loss [B, T-1], correct [B, T-1]) for targets t = 1..T-1."""
    pred, target = logits[:, :-1], tokens[:, 1:]
    loss = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1), reduction="none")
    return loss.view_as(target), pred.argmax(-1) == target


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    n = int(mask.sum())
    return float(x[mask].float().mean()) if n else math.nan


def copy_metrics(logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor) -> dict[str, float]:
    """The five copy metrics of METRIC_NAMES from logits [B, T, V], tokens [B, T], periods [B]."""
    loss, correct = per_target_loss(logits, tokens)
    masks = copy_masks(periods, tokens.shape[1])
    return {
        "loss_first_copy": _masked_mean(loss, masks["first"]),
        "loss_second_copy": _masked_mean(loss, masks["second"]),
        "loss_later_copies": _masked_mean(loss, masks["later"]),
        "acc_second_copy": _masked_mean(correct, masks["second"]),
        "acc_later_copies": _masked_mean(correct, masks["later"]),
    }
