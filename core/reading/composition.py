"""Composition scores (Elhage et al. 2021): how much a later head's queries, keys or values read
what an earlier head writes, from the weights alone, against a random baseline.
"""
from __future__ import annotations

import functools

import pandas as pd
import torch

from core.model.tinycharlm import TinyCharLM

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


def composition_baseline(d_model: int, d_head: int, n_draws: int = 100) -> dict[str, float]:
    """Mean composition score of random matrices with the same shapes: each circuit is a product of
    Gaussian [D, d_head] and [d_head, D] factors. Returns {kind: mean over n_draws} (cached: it depends
    on the shapes only)."""
    return dict(_baseline(int(d_model), int(d_head), int(n_draws), 0))


def composition_matrix(model: TinyCharLM, kind: str, writer: int = 0, reader: int = 1) -> torch.Tensor:
    """[H writer heads, H reader heads] Q-, K- or V-composition scores from core.reading.circuits."""
    if kind not in COMPOSITION_KINDS:
        raise ValueError(f"composition kind must be one of {', '.join(COMPOSITION_KINDS)}, got {kind!r}.")
    df = composition_table(model)
    df = df[(df.kind == kind) & (df.writer_layer == writer) & (df.reader_layer == reader)]
    H = model.cfg.n_heads
    out = torch.zeros(H, H)
    for r in df.itertuples():
        out[r.writer_head, r.reader_head] = r.score
    return out
