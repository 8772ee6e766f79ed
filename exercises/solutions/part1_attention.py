"""Part 1: the task and attention patterns (pages: Train, Attention). Solutions."""
import math

import torch

from core.model.rope import apply_rope, rope_cos_sin


def tile_patterns(patterns: torch.Tensor, periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Build a batch of the repeated-sequence task from its patterns.

    patterns [B, max L] (long): row b's first periods[b] entries are sequence b's pattern (the rest is
    padding); periods [B] (long): each sequence's period L. Return tokens [B, seq_len] (long) with
    tokens[b, t] = patterns[b, t mod L_b]: the pattern repeated until seq_len tokens.
    """
    positions = torch.arange(seq_len)[None, :] % periods[:, None]  # [B, T]
    return patterns.gather(1, positions)


def later_copy_mask(periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The mask of later-copy targets.

    Token x_t is the *target* predicted at position t - 1, for t = 1..T-1. A target is in the later
    copies when t >= L (it can be read from an earlier copy). periods [B]; return a bool mask
    [B, seq_len - 1] whose column c is target t = c + 1 (the logits at position c).
    """
    t = torch.arange(1, seq_len)[None, :]
    return t >= periods[:, None]


def causal_pattern(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Attention pattern from queries and keys with rotary positions.

    q, k [B, H, T, d_head] are the queries and keys *before* rotation (h W_Q, h W_K). Rotate both by
    their position with `apply_rope(x, cos, sin)`, where `cos, sin = rope_cos_sin(T, d_head, 10000.0)`
    (imported from core.model.tinycharlm), score q_i . k_j / sqrt(d_head), mask keys j > i, and
    softmax over the keys. Return the pattern A [B, H, T, T] (query i on axis 2, key j on axis 3);
    each row sums to 1.
    """
    T, dh = q.shape[-2], q.shape[-1]
    cos, sin = rope_cos_sin(T, dh, 10000.0, q.dtype)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(-1)


def prev_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """Previous-token score of every head of one block.

    pattern [B, H, T, T] (query i, key j). Return [H]: the mean of A[i, i-1] over the batch and the
    queries i >= 1.
    """
    return pattern.diagonal(-1, dim1=-2, dim2=-1).mean((0, 2))


def induction_score(pattern: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Induction score on the latest copy.

    pattern [B, H, T, T], periods [B]. At query i >= L the token after the latest earlier copy of
    x_i sits at j = i + 1 - L. Return [H]: the mean of A[i, i+1-L] over the batch and the queries
    i >= L (pooled: every (sequence, query) pair counts once).
    """
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H), 0
    for b in range(B):
        L = int(periods[b])
        i = torch.arange(L, T)
        total += pattern[b][:, i, i + 1 - L].sum(-1)
        count += len(i)
    return total / count


def induction_any_score(pattern: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Induction score on any earlier copy (induction_any, the lab's "is an induction head").

    pattern [B, H, T, T], periods [B]. At query i >= L, sum the attention on the token after every
    earlier copy, A[i, i+1-kL] for k = 1, 2, ... while i+1-kL >= 0; then average these sums over the
    batch and the queries i >= L. Return [H].
    """
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H), 0
    for b in range(B):
        L = int(periods[b])
        for i in range(L, T):
            keys = list(range(i + 1 - L, -1, -L))
            total += pattern[b, :, i, keys].sum(-1)
            count += 1
    return total / count


def hooked_induction_scores(model, tokens: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Writing a hook: every head's induction score, stored during one forward pass.

    model: a TinyCharLM; tokens [B, T], periods [B]. Run `model.run_with_hooks(tokens, edits=edits)` once,
    where edits = {hook name: fn}: for each block l the hook point f"blocks.{l}.attn.hook_pattern" hands fn
    the block's pattern [B, H, T, T] (query i, key j) and runs on with what fn returns. Give each block a
    hook that stores the block's induction scores (as in induction_score: the mean of A[i, i+1-L] over the
    batch and the queries i >= L, pooled) and returns the pattern unchanged. Return [n_layers, H]: row l
    holds block l's scores.
    """
    scores = {}

    def store(layer):  # one hook per block: a function made here keeps its own `layer`
        def hook(pattern):
            B, H, T, _ = pattern.shape
            total, count = torch.zeros(H), 0
            for b in range(B):
                L = int(periods[b])
                i = torch.arange(L, T)
                total += pattern[b][:, i, i + 1 - L].sum(-1)
                count += len(i)
            scores[layer] = total / count
            return pattern
        return hook

    edits = {f"blocks.{l}.attn.hook_pattern": store(l) for l in range(model.cfg.n_layers)}
    with torch.no_grad():
        model.run_with_hooks(tokens, edits=edits)
    return torch.stack([scores[l] for l in range(model.cfg.n_layers)])
