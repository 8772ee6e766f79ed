"""Weight-level views of a head: QK and OV circuits, the rotary positional profile, the direct path
and composition scores (Elhage et al. 2021). The OV copying matrix and its scores live in
core.copying (re-exported here).

Row-vector convention throughout (as the model computes): a head reads x and writes x W_OV with
W_OV = W_V W_O; its content score between query stream x_i and key stream x_j at offset 0 is
x_i W_QK x_j^T / sqrt(d_head) with W_QK = W_Q W_K^T. Both are D x D of rank <= d_head. With rotary
embeddings (Su et al. 2021) the score at offset i - j = t is x_i W_Q R_t W_K^T x_j^T, so W_QK is the
offset-0 content part and the positional part is shown separately as a profile over offsets.
"""
from __future__ import annotations

import functools
import math

import pandas as pd
import torch

from .copying import (COPY_COLUMNS, block_ov, copying_scores, effective_embedding,  # noqa: F401 (re-exported)
                      ov_copying_eig, ov_copying_matrix, ov_copying_table, ov_diag_top1, ov_diag_topk)
from .model import TinyCharLM, apply_rope, rope_cos_sin


class FactoredMatrix:
    """A low-rank product A @ B kept as its factors (as TransformerLens does).

    A [..., m, r], B [..., r, n]. The product is formed only when asked (.AB); singular values come
    from the r x r core, so they cost O((m + n) r^2) rather than an m x n SVD.
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor):
        if A.shape[-1] != B.shape[-2]:
            raise ValueError(f"inner sizes differ: A {tuple(A.shape)}, B {tuple(B.shape)}.")
        self.A, self.B = A.detach(), B.detach()

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.A.shape[:-1], self.B.shape[-1])

    @property
    def inner(self) -> int:
        """r: the rank can be at most this."""
        return self.A.shape[-1]

    @property
    def AB(self) -> torch.Tensor:
        """The product [..., m, n]."""
        return self.A @ self.B

    @property
    def T(self) -> "FactoredMatrix":
        return FactoredMatrix(self.B.transpose(-1, -2), self.A.transpose(-1, -2))

    def __matmul__(self, other):
        if isinstance(other, FactoredMatrix):
            return FactoredMatrix(self.A, (self.B @ other.A) @ other.B)
        return FactoredMatrix(self.A, self.B @ other)

    def __rmatmul__(self, other):
        return FactoredMatrix(other @ self.A, self.B)

    @property
    def S(self) -> torch.Tensor:
        """Singular values [..., min(r, m, n)], largest first."""
        Ra = torch.linalg.qr(self.A.double())[1]
        Rb = torch.linalg.qr(self.B.transpose(-1, -2).double())[1]
        return torch.linalg.svdvals(Ra @ Rb.transpose(-1, -2)).float()

    def svals(self, full: bool = False) -> torch.Tensor:
        """Singular values; full=True pads with exact zeros to min(m, n) (the rank bound made visible)."""
        s = self.S
        if full:
            n = min(self.shape[-2:]) - s.shape[-1]
            s = torch.cat([s, s.new_zeros(*s.shape[:-1], max(n, 0))], -1)
        return s

    def rank(self, rtol: float = 1e-5) -> int:
        """Numerical rank: singular values above rtol * the largest (2-D matrices only)."""
        s = self.S
        return int((s > rtol * s.max()).sum()) if s.numel() and s.max() > 0 else 0

    def norm(self) -> torch.Tensor:
        """Frobenius norm [...]."""
        return self.S.norm(dim=-1)


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


@torch.no_grad()
def W_QK(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    """W_Q[h] W_K[h]^T: [D, D] (the product)."""
    return qk_circuit(model, layer, head).AB


@torch.no_grad()
def W_OV(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    """W_V[h] W_O[h]: [D, D], rank <= d_head (row vector convention: x -> x W_OV)."""
    return ov_circuit(model, layer, head).AB


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
# Composition scores


COMPOSITION_KINDS = ("Q", "K", "V")


def _composition_pair(ov_w: torch.Tensor, qk_r: torch.Tensor, ov_r: torch.Tensor, kind: str) -> tuple:
    """(left, right) whose product the score measures, row-vector convention.

    Q: the reader's queries read the writer: x W_OV^w W_QK^r.   K: its keys: W_QK^r (x W_OV^w)^T,
    whose norm equals that of W_OV^w (W_QK^r)^T.   V: its values: x W_OV^w W_OV^r.
    """
    if kind == "Q":
        return ov_w, qk_r
    if kind == "K":
        return ov_w, qk_r.transpose(-1, -2)
    if kind == "V":
        return ov_w, ov_r
    raise ValueError(f"composition kind must be one of Q, K, V, got {kind!r}.")


def composition_score(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """||left right||_F / (||left||_F ||right||_F), batched over leading dims."""
    num = (left @ right).norm(dim=(-2, -1))
    return num / (left.norm(dim=(-2, -1)) * right.norm(dim=(-2, -1))).clamp_min(1e-30)


@torch.no_grad()
def composition_table(model: TinyCharLM) -> pd.DataFrame:
    """Q, K and V composition from every head of an earlier block into every head of a later one.

    Rows {kind, writer_layer, writer_head, reader_layer, reader_head, score}; empty with < 2 blocks.
    """
    L, H = model.cfg.n_layers, model.cfg.n_heads
    ov = [torch.einsum("hdk,hkm->hdm", b.W_V, b.W_O) for b in model.blocks]  # [H, D, D] each
    qk = [torch.einsum("hdk,hmk->hdm", b.W_Q, b.W_K) for b in model.blocks]
    rows = []
    for lw in range(L):
        for lr in range(lw + 1, L):
            for kind in COMPOSITION_KINDS:
                left, right = _composition_pair(ov[lw][:, None], qk[lr][None], ov[lr][None], kind)
                scores = composition_score(left, right)  # [H writer, H reader]
                for a in range(H):
                    for b in range(H):
                        rows.append((kind, lw, a, lr, b, float(scores[a, b])))
    return pd.DataFrame(rows, columns=["kind", "writer_layer", "writer_head", "reader_layer", "reader_head", "score"])


@functools.lru_cache(maxsize=16)
def _baseline(d_model: int, d_head: int, n_draws: int, seed: int) -> tuple[tuple[str, float], ...]:
    g = torch.Generator().manual_seed(seed)

    def circuit():  # [n, D, D], rank d_head
        return torch.randn(n_draws, d_model, d_head, generator=g) @ torch.randn(n_draws, d_head, d_model, generator=g)

    with torch.no_grad():
        ov_w, qk_r, ov_r = circuit(), circuit(), circuit()
        return tuple((kind, float(composition_score(*_composition_pair(ov_w, qk_r, ov_r, kind)).mean()))
                     for kind in COMPOSITION_KINDS)


def composition_baseline(d_model: int, d_head: int, n_draws: int = 100, seed: int = 0) -> dict[str, float]:
    """Mean composition score of random matrices with the same shapes: each circuit is a product of
    Gaussian [D, d_head] and [d_head, D] factors. Returns {kind: mean over n_draws} (cached: it depends
    on the shapes only)."""
    return dict(_baseline(int(d_model), int(d_head), int(n_draws), int(seed)))
