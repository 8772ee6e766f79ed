"""Weight-level views of a head: QK and OV circuits, the rotary positional profile, the OV copying
matrix, the direct path and the skip-trigram rules a head reads from the weights (Elhage et al. 2021).
Composition between heads is in core.composition.

Row-vector convention throughout (as the model computes): a head reads x and writes x W_OV with
W_OV = W_V W_O; its content score between query stream x_i and key stream x_j at offset 0 is
x_i W_QK x_j^T / sqrt(d_head) with W_QK = W_Q W_K^T. Both are D x D of rank <= d_head. With rotary
embeddings (Su et al. 2021) the score at offset i - j = t is x_i W_Q R_t W_K^T x_j^T, so W_QK is the
offset-0 content part and the positional part is shown separately as a profile over offsets.
"""
from __future__ import annotations

import math

import pandas as pd
import torch

from .factored import FactoredMatrix
from .model import TinyCharLM, apply_rope, rope_cos_sin

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


def direct_path(model: TinyCharLM) -> FactoredMatrix:
    """W_E W_E^T: [V, V] (row = current token, column = next-token logit). A 0-block model's logits
    are exactly its rows: a Gram matrix, so symmetric and positive semidefinite, rank <= min(V, D)."""
    return FactoredMatrix(model.W_E, model.W_E.T)


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
# OV copying


@torch.no_grad()
def effective_embedding(model: TinyCharLM, layer: int) -> torch.Tensor:
    """[V, D]: the stream each token would carry into block `layer` if every head before it attended
    to the token itself: X_0 = W_E, X_{l+1} = X_l + sum_h (X_l W_V[h] + b_V[h]) W_O[h] (+ b_O).

    Earlier blocks can rewrite every token's own stream (a head that attends to itself is a per-token
    map, like the first MLP of GPT-2), so a later head's values read X_layer rather than W_E. This is
    the "effective embedding" used for copy scores in GPT-2 analyses (Wang et al., 2022).
    """
    X = model.W_E
    for block in model.blocks[:layer]:
        v = torch.einsum("vd,hdk->hvk", X, block.W_V)
        if model.cfg.bias:
            v = v + block.b_V[:, None, :]
        out = torch.einsum("hvk,hkm->vm", v, block.W_O)
        X = X + out + (block.b_O if model.cfg.bias else 0.0)
    return X


@torch.no_grad()
def ov_copying_matrix(model: TinyCharLM, layer: int, head: int | None = None, effective: bool = False) -> torch.Tensor:
    """C = W_E W_V W_O W_E^T: [V, V], row = attended token a, column = boosted logit b.

    head=None sums the OV circuits of all the block's heads. effective=True reads the rows from
    effective_embedding(model, layer) instead of W_E (the same for block 1).
    """
    rows = effective_embedding(model, layer) if effective else model.W_E
    return rows @ _block_ov(model, layer, head) @ model.W_E.T


def _block_ov(model: TinyCharLM, layer: int, head: int | None) -> torch.Tensor:
    """W_V W_O [D, D] of one head, or summed over the block's heads (head=None)."""
    b = model.blocks[layer]
    if head is None:
        return torch.einsum("hdk,hkm->dm", b.W_V, b.W_O)
    return b.W_V[head] @ b.W_O[head]


def ov_diag_top1(C: torch.Tensor) -> float:
    """Share of rows whose largest entry is on the diagonal (chance 1/V)."""
    return float((C.argmax(-1) == torch.arange(C.shape[0])).float().mean())


def ov_diag_topk(C: torch.Tensor, k: int = 5) -> float:
    """Share of rows whose diagonal entry is among the row's k largest (chance k/V)."""
    k = min(k, C.shape[-1])
    top = C.topk(k, dim=-1).indices
    return float((top == torch.arange(C.shape[0])[:, None]).any(-1).float().mean())


def ov_copying_eig(C: torch.Tensor) -> float:
    """Re(sum of eigenvalues) / sum |eigenvalues|: +1 for pure copying, -1 for anti-copying."""
    eig = torch.linalg.eigvals(C.double())
    total = eig.abs().sum()
    return float(eig.sum().real / total) if total > 0 else 0.0


def copying_scores(C: torch.Tensor) -> dict[str, float]:
    """ov_diag_top1, ov_diag_top5 and ov_copying_eig of one copying matrix C [V, V]."""
    return {"ov_diag_top1": ov_diag_top1(C), "ov_diag_top5": ov_diag_topk(C, 5), "ov_copying_eig": ov_copying_eig(C)}


COPY_COLUMNS = ("ov_diag_top1", "ov_diag_top5", "ov_copying_eig")


@torch.no_grad()
def ov_copying_table(model: TinyCharLM) -> pd.DataFrame:
    """One row per head, then one per block for the sum of its heads (head = "all").

    Columns: layer, block, head, ov_diag_top1, ov_diag_top5, ov_copying_eig, and
    ov_diag_top1_effective (rows read from the effective embedding).
    """
    rows, E = [], model.W_E
    for layer in range(model.cfg.n_layers):
        X = effective_embedding(model, layer)  # W_E itself for block 1
        for head in [*range(model.cfg.n_heads), None]:
            ov = _block_ov(model, layer, head)
            C = E @ ov @ E.T
            effective = ov_diag_top1(X @ ov @ E.T) if layer else ov_diag_top1(C)
            rows.append({"layer": layer, "block": layer + 1, "head": "all" if head is None else head,
                         **copying_scores(C), "ov_diag_top1_effective": effective})
    return pd.DataFrame(rows, columns=["layer", "block", "head", *COPY_COLUMNS, "ov_diag_top1_effective"])


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
