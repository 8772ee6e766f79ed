"""Loss and accuracy split by copy (docs/DESIGN.md "Metrics"). Torch is imported by the functions that need
it: the Home page reads later_copy_floor without it (docs/DESIGN.md, "A reading server without torch")."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

METRIC_NAMES = (  # copy_metrics's keys: the tests check core.report's and the shipped manifest's metrics by them
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
    import torch  # the package before its submodule (docs/DESIGN.md "Many sessions' first pages at once")

    loss = torch.nn.functional.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1), reduction="none")
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


def second_copy_first_token_accuracy(logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor) -> float:
    """Accuracy on the target t = L, the second copy's first token (logits [B, T, V], tokens [B, T],
    periods [B]). "Later copies" (t >= L) include it, yet its predecessor, the pattern's last token,
    has never been followed by anything before: with varying periods no model can know it."""
    import torch

    b = torch.arange(tokens.shape[0])
    L = periods.long()
    keep = tokens.shape[1] > L
    pred = logits[b[keep], L[keep] - 1].argmax(-1)
    return float((pred == tokens[b[keep], L[keep]]).float().mean()) if keep.any() else math.nan


def later_copy_floor(period_min: int, period_max: int, seq_len: int, vocab_size: int) -> dict[str, float]:
    """What the unknowable target t = L costs loss_later_copies, for L uniform in [period_min,
    period_max] and a uniform guess there: {"share": its expected share of later-copy targets,
    "loss": ln V times that share (nats), the floor a perfect context-reader still pays}."""
    Ls = range(period_min, period_max + 1)
    share = len(Ls) / sum(seq_len - L for L in Ls)  # one such target per sequence, pooled over targets
    return {"share": share, "loss": share * math.log(vocab_size)}


def copy_masks(periods: torch.Tensor, seq_len: int) -> dict[str, torch.Tensor]:
    """Boolean masks [B, seq_len - 1] over targets t = 1..seq_len-1 (logit position t-1).

    Keys: "first" (t < L), "second" (L <= t < 2L), "later" (t >= L).
    """
    import torch

    t = torch.arange(1, seq_len)[None, :]
    L = periods[:, None]
    return {"first": t < L, "second": (t >= L) & (t < 2 * L), "later": t >= L}


def log_row(model, tokens: torch.Tensor, periods: torch.Tensor, edits: dict | None = None) -> dict:
    """A repeat-task training log's measurements: copy metrics plus each head's prev_token, induction and
    induction_any score ([layer][head] lists). edits: run_with_hooks's, e.g. a clamp's (a Trainer passes its
    run's own)."""
    import torch

    from core.model.hooks import eval_patterns
    from core.reading.heads import head_scores

    logits, patterns = eval_patterns(model, tokens, edits)
    with torch.no_grad():
        row = copy_metrics(logits, tokens, periods)
        scores = [head_scores(p, periods) for p in patterns]
    row["prev_token"] = [s["prev_token"].tolist() for s in scores]
    row["induction"] = [s["induction"].tolist() for s in scores]
    row["induction_any"] = [s["induction_any"].tolist() for s in scores]
    return row
