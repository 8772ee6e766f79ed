"""Zero blocks: the Gram form. A model without blocks predicts the next token from the current one
alone through W_E W_E^T, a symmetric table; this compares it with the task's real bigram statistics,
which carry no information (every pattern is drawn uniformly).
"""
from __future__ import annotations

import math

import torch

from core.model.task import TaskConfig, sample_batch
from core.model.tinycharlm import TinyCharLM

GRAM_CHECK_SEQS = 256  # fresh sequences on which the model's logits are checked against the Gram rows


@torch.no_grad()
def gram_logits(model: TinyCharLM) -> torch.Tensor:
    """W_E W_E^T: [V, V], row = current token a, column = next-token logit b. For a zero-block
    model this *is* the model: logits[i] = gram[x_i]. Symmetric and positive semidefinite."""
    return model.W_E @ model.W_E.T


@torch.no_grad()
def bigram_counts(task: TaskConfig, vocab_size: int, n_seqs: int = 4096, seed: int = 0) -> torch.Tensor:
    """Counts [V, V] of (current a, next b) over sampled task sequences, each sequence's distinct
    pairs counted once: the L pairs x_t -> x_{t+1}, t = 0..L-1, of one period (later copies repeat
    the same pairs, adding copies but no information, which would inflate any estimate from them)."""
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, vocab_size, generator=g)
    one_period = torch.arange(tokens.shape[1] - 1)[None] < periods[:, None]  # [B, T-1]
    idx = (tokens[:, :-1] * vocab_size + tokens[:, 1:])[one_period]
    return torch.bincount(idx, minlength=vocab_size ** 2).view(vocab_size, vocab_size).float()


def mutual_information(counts: torch.Tensor) -> float:
    """Plug-in mutual information (nats) between current and next token from counts [V, V]."""
    p = counts / counts.sum()
    pa, pb = p.sum(1, keepdim=True), p.sum(0, keepdim=True)
    nz = p > 0
    return float((p[nz] * (p[nz] / (pa @ pb)[nz]).log()).sum())


@torch.no_grad()
def zero_block_summary(model: TinyCharLM, task: TaskConfig, n_seqs: int = 4096) -> dict:
    """What a zero-block model can know, and what the task offers it.

    Returns gram [V, V]; model_probs [V, V] (softmax of each Gram row); task_probs [V, V] (estimated
    P(next b | current a)); gram_max_error (max |model logits - Gram rows| over n_check_seqs =
    GRAM_CHECK_SEQS fresh sequences); mutual_info (plug-in, nats) and mutual_info_bias (its expected
    value, (V-1)^2 / (2N), when the tokens are independent); model_loss (model's mean loss on fresh
    sequences), bigram_loss (loss of
    the estimated table on fresh sequences), ln_V, n_pairs, repeat_bits (mean log2(V p(a | a)): how
    much the model favours repeating the current token).
    """
    V = model.cfg.vocab_size
    gram = gram_logits(model)
    counts = bigram_counts(task, V, n_seqs, 0)
    g = torch.Generator().manual_seed(1)
    tokens, _ = sample_batch(task, GRAM_CHECK_SEQS, V, generator=g)
    logits = model(tokens) if model.cfg.n_layers == 0 else None
    gram_err = float((logits - gram[tokens]).abs().max()) if logits is not None else math.nan
    model_probs = gram.softmax(-1)
    task_probs = counts / counts.sum(1, keepdim=True).clamp_min(1)
    a, b = tokens[:, :-1], tokens[:, 1:]
    model_loss = float(-model_probs.log()[a, b].mean())
    smoothed = (counts + 1) / (counts + 1).sum(1, keepdim=True)  # add-one so unseen pairs stay finite
    return {
        "gram": gram, "model_probs": model_probs, "task_probs": task_probs,
        "gram_max_error": gram_err, "mutual_info": mutual_information(counts),
        "mutual_info_bias": (V - 1) ** 2 / (2 * float(counts.sum())),
        "model_loss": model_loss, "bigram_loss": float(-smoothed.log()[a, b].mean()),
        "ln_V": math.log(V), "n_pairs": int(counts.sum()), "n_check_seqs": GRAM_CHECK_SEQS,
        "repeat_bits": float(torch.log2(model_probs.diagonal() * V).mean()),
    }


def log_ratio_to_uniform(P: torch.Tensor) -> torch.Tensor:
    """log2(V * P): 0 where a conditional distribution is uniform, +1 where twice as likely."""
    return torch.log2(P.clamp_min(1e-12) * P.shape[-1])
