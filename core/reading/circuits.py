"""Weight-level views of a head: QK and OV circuits, the rotary positional profile and the skip-trigram
rules a head reads from the weights (Elhage et al. 2021); the direct path W_E W_E^T is
core.reading.bigrams.gram_logits. The OV copying matrix and its scores live in core.reading.copying;
composition between heads in core.reading.composition.

Row-vector convention throughout (as the model computes): a head reads x and writes x W_OV with
W_OV = W_V W_O; its content score between query stream x_i and key stream x_j at offset 0 is
x_i W_QK x_j^T / sqrt(d_head) with W_QK = W_Q W_K^T. Both are D x D of rank <= d_head. With rotary
embeddings (Su et al. 2021) the score at offset i - j = t is x_i W_Q R_t W_K^T x_j^T, so W_QK is the
offset-0 content part and the positional part is shown separately as a profile over offsets.
"""
from __future__ import annotations

import math

import torch

from core.model.rope import apply_rope, rope_cos_sin
from core.model.tinycharlm import TinyCharLM
from core.reading.copying import ov_copying_matrix
from core.reading.factored import FactoredMatrix

# ---------------------------------------------------------------------------------------------
# Per-head circuits


def qk_circuit(model: TinyCharLM, layer: int, head: int) -> FactoredMatrix:
    """W_QK = W_Q[h] W_K[h]^T as factors: [D, D], rank <= d_head (content part, offset 0)."""
    b = model.blocks[layer]
    return FactoredMatrix(b.W_Q[head], b.W_K[head].T)


def ov_circuit(model: TinyCharLM, layer: int, head: int) -> FactoredMatrix:
    """W_OV = W_V[h] W_O[h] as factors: [D, D], rank <= d_head (x -> x W_OV)."""
    b = model.blocks[layer]
    return FactoredMatrix(b.W_V[head], b.W_O[head])


# ---------------------------------------------------------------------------------------------
# Rotary positional profile


@torch.no_grad()
def rotary_profile(q: torch.Tensor, k: torch.Tensor, n_offsets: int, base: float = 1e4) -> torch.Tensor:
    """Score a query q [d_head] gives a key k [d_head] that sits t positions back, t = 0..n_offsets-1.

    Rotary scores depend on positions only through the offset: (R_i q) . (R_j k) = (R_t q) . k with
    t = i - j, divided by sqrt(d_head). Returns [n_offsets].
    """
    dh = q.shape[-1]
    cos, sin = rope_cos_sin(n_offsets, dh, base, q.dtype)
    return apply_rope(q.expand(n_offsets, dh), cos, sin) @ k / math.sqrt(dh)


@torch.no_grad()
def head_qk_vectors(model: TinyCharLM, layer: int, head: int, resid: torch.Tensor | None = None,
                    source: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """The (q, k) [d_head] pair whose rotary profile describes the head's positional preference.

    source="bias": q = b_Q, k = b_K (the content-free part; needs a model with biases).
    source="mean": the average pre-rotation query and key over resid [B, T, D], the stream entering
    `layer` (biases included); without resid the average embedding row is used.
    """
    b = model.blocks[layer]
    if source == "bias":
        if not model.cfg.bias:
            raise ValueError("this model has no biases; use the average query and key instead.")
        return b.b_Q[head].clone(), b.b_K[head].clone()
    if source != "mean":
        raise ValueError(f"source must be 'mean' or 'bias', got {source!r}.")
    x = model.W_E.mean(0) if resid is None else resid.reshape(-1, resid.shape[-1]).mean(0)
    q, k = x @ b.W_Q[head], x @ b.W_K[head]
    if model.cfg.bias:
        q, k = q + b.b_Q[head], k + b.b_K[head]
    return q, k


# ---------------------------------------------------------------------------------------------
# Skip-trigrams read from the weights (direct path only: the head reads and writes embeddings)


@torch.no_grad()
def qk_content(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    """Token-to-token attention scores [V dest b, V source a] at offset 0 (query and key at the same
    position, so RoPE rotates both equally and cancels), biases included:
    (e_b W_Q + b_Q) . (e_a W_K + b_K) / sqrt(d_head)."""
    blk = model.blocks[layer]
    q = model.W_E @ blk.W_Q[head]
    k = model.W_E @ blk.W_K[head]
    if model.cfg.bias:
        q, k = q + blk.b_Q[head], k + blk.b_K[head]
    return q @ k.T / math.sqrt(model.cfg.d_head)


@torch.no_grad()
def skip_trigrams(model: TinyCharLM, layer: int, head: int, k: int = 8) -> list[dict]:
    """The head's strongest "[a] ... [b] -> [c]" rules read from the weights, one per source token a.

    QK margin of (b, a): how far b's score for source a stands above b's mean score over all sources
    (offset-0 content part, see qk_content). OV logit of (a, c): the centered entry of a's row of
    W_E W_OV W_E^T. For each a: the destination b with the largest margin and the token c it boosts
    most; rules ranked by margin x OV logit (a large push that the head actually attends to).
    Returns the top k as dicts with source, dest, boosted (token ids), qk_margin, ov_logit.
    """
    qk = qk_content(model, layer, head)
    qk = qk - qk.mean(-1, keepdim=True)  # [dest b, source a]
    ov = ov_copying_matrix(model, layer, head)
    ov = ov - ov.mean(-1, keepdim=True)  # [source a, boosted c]
    margin, dest = qk.max(0)  # per source a: its best destination
    ov_best, boosted = ov.max(-1)
    strength = margin.clamp_min(0) * ov_best.clamp_min(0)
    order = strength.argsort(descending=True)[:k]
    return [{"source": int(a), "dest": int(dest[a]), "boosted": int(boosted[a]),
             "qk_margin": float(margin[a]), "ov_logit": float(ov_best[a])} for a in order]


def _top_centered(row: torch.Tensor, k: int) -> list[tuple[int, float]]:
    """The k largest entries of row [V] minus its mean, as [(token, value)]."""
    vals, idx = (row - row.mean()).topk(k)
    return list(zip(idx.tolist(), vals.tolist()))


@torch.no_grad()
def ov_top(model: TinyCharLM, layer: int, head: int, source: int, k: int = 5) -> list[tuple[int, float]]:
    """Tokens that attending to `source` boosts most: top k of the centered OV row [(token, logit)]."""
    return _top_centered(ov_copying_matrix(model, layer, head)[source], k)


@torch.no_grad()
def qk_top(model: TinyCharLM, layer: int, head: int, dest: int, k: int = 5) -> list[tuple[int, float]]:
    """Source tokens destination `dest` prefers most at offset 0: [(token, score - row mean)]."""
    return _top_centered(qk_content(model, layer, head)[dest], k)
