"""Part 1: the task and attention patterns (pages: Train, Attention).

Your file: write each function below, then check it with

    python -m pytest exercises/test_part1_attention.py

from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).
Hints and solutions: the Exercises page of the app, or exercises/solutions/part1_attention.py.
"""
import math  # noqa: F401

import torch  # noqa: F401

from core.model.rope import apply_rope, rope_cos_sin  # noqa: F401


def tile_patterns(patterns: torch.Tensor, periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Build a batch of the repeated-sequence task from its patterns.

    patterns [B, max L] (long): row b's first periods[b] entries are sequence b's pattern (the rest is
    padding); periods [B] (long): each sequence's period L. Return tokens [B, seq_len] (long) with
    tokens[b, t] = patterns[b, t mod L_b]: the pattern repeated until seq_len tokens.
    """
    raise NotImplementedError("not written yet")


def later_copy_mask(periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The mask of later-copy targets.

    Token x_t is the *target* predicted at position t - 1, for t = 1..T-1. A target is in the later
    copies when t >= L (it can be read from an earlier copy). periods [B]; return a bool mask
    [B, seq_len - 1] whose column c is target t = c + 1 (the logits at position c).
    """
    raise NotImplementedError("not written yet")


def causal_pattern(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Attention pattern from queries and keys with rotary positions.

    q, k [B, H, T, d_head] are the queries and keys *before* rotation (h W_Q, h W_K). Rotate both by
    their position with `apply_rope(x, cos, sin)`, where `cos, sin = rope_cos_sin(T, d_head, 10000.0)`
    (imported from core.model.tinycharlm), score q_i . k_j / sqrt(d_head), mask keys j > i, and
    softmax over the keys. Return the pattern A [B, H, T, T] (query i on axis 2, key j on axis 3);
    each row sums to 1.
    """
    raise NotImplementedError("not written yet")


def prev_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """Previous-token score of every head of one block.

    pattern [B, H, T, T] (query i, key j). Return [H]: the mean of A[i, i-1] over the batch and the
    queries i >= 1.
    """
    raise NotImplementedError("not written yet")


def induction_score(pattern: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Induction score on the latest copy.

    pattern [B, H, T, T], periods [B]. At query i >= L the token after the latest earlier copy of
    x_i sits at j = i + 1 - L. Return [H]: the mean of A[i, i+1-L] over the batch and the queries
    i >= L (pooled: every (sequence, query) pair counts once).
    """
    raise NotImplementedError("not written yet")


def induction_any_score(pattern: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Induction score on any earlier copy (induction_any, the lab's "is an induction head").

    pattern [B, H, T, T], periods [B]. At query i >= L, sum the attention on the token after every
    earlier copy, A[i, i+1-kL] for k = 1, 2, ... while i+1-kL >= 0; then average these sums over the
    batch and the queries i >= L. Return [H].
    """
    raise NotImplementedError("not written yet")


def hooked_induction_scores(model, tokens: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Writing a hook: every head's induction score, stored during one forward pass.

    model: a TinyCharLM; tokens [B, T], periods [B]. Run `model.run_with_hooks(tokens, edits=edits)` once,
    where edits = {hook name: fn}: for each block l the hook point f"blocks.{l}.attn.hook_pattern" hands fn
    the block's pattern [B, H, T, T] (query i, key j) and runs on with what fn returns. Give each block a
    hook that stores the block's induction scores (as in induction_score: the mean of A[i, i+1-L] over the
    batch and the queries i >= L, pooled) and returns the pattern unchanged. Return [n_layers, H]: row l
    holds block l's scores.
    """
    raise NotImplementedError("not written yet")
