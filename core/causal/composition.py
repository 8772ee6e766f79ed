"""Weight-based K-composition (core.reading.composition, Elhage et al., 2021) beside path patching of the
same key paths (core.causal.path_patching), from block 1 into each block-2 head.

Why they can disagree under RoPE: a key at position j is rotated by j and a query at i by i, so the score
reads x_i W_Q R_(j-i) W_K^T x_j^T. The weight-only product W_OV^w W_K W_Q^T of the K-composition score leaves
the rotation out: it scores a writer as if every key sat at the query's own position, and so cannot tell a
previous-token head (whose write matters one position back) from a self-attending one. Path patching runs
the model, rotation included, and measures what the key path does to M.

The RoPE-aware score (rope_composition) puts the rotation back: the same norm ratio with the receiver's
W_Q R_(-d) W_K^T at each query-key offset d = i - j, averaged with the weights of the offsets the receiver
attends at (its attention mass by offset on the clean run's scored queries; an induction head's is L - 1).
A rotation by d turns each rotary pair by d times its frequency, so which stream directions a query at i
matches with a key at j changes with d: at offset 0 the score is the plain one.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.causal.patching import PatchRuns, target_mask
from core.model.rope import rope_cos_sin
from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM
from core.reading.composition import composition_matrix, composition_score

MIN_WEIGHT = 1e-3  # offsets with less attention mass than this are left out of the average


def rotary_matrix(offset: int, d_head: int, base: float) -> torch.Tensor:
    """R [d_head, d_head] (float64) turning a column vector by position `offset` (negative: back) in the model's
    rotate-half convention: rotated q_i . rotated k_j = q_i^T R(j - i) k_j."""
    cos, sin = rope_cos_sin(abs(offset) + 1, d_head, base, torch.float64)
    c, s = cos[abs(offset)], sin[abs(offset)] * (1 if offset >= 0 else -1)
    half = d_head // 2
    R = torch.diag(c)
    j = torch.arange(half)
    R[j, j + half], R[j + half, j] = -s[:half], s[:half]
    return R


def rotated_qk(model: TinyCharLM, layer: int, head: int, offset: int) -> torch.Tensor:
    """W_QK [D, D] of one head at query-key offset i - j = offset, rotation included: x_i W_QK x_j^T is the
    score's bilinear part (before 1/sqrt(d_head), biases left out). offset 0 is the plain W_Q W_K^T."""
    b = model.blocks[layer]
    R = rotary_matrix(-offset, model.cfg.d_head, model.cfg.rope_base)
    return b.W_Q[head].detach().double() @ R @ b.W_K[head].detach().double().T


def receiver_offsets(runs: PatchRuns, layer: int) -> torch.Tensor:
    """[H, T] each head of block `layer`'s mean attention mass at offset d = i - j on the clean run, over the
    queries whose next token M scores (L <= i <= 2L - 2)."""
    P = runs.clean_cache["pattern"][layer]  # [B, H, T, T]
    B, H, T, _ = P.shape
    scored = torch.zeros(B, T, dtype=torch.bool)
    scored[:, :-1] = target_mask(runs.periods, T)
    i, j = torch.tril_indices(T, T)
    mass = torch.zeros(H, T, dtype=torch.float64)
    picked = P[:, :, i, j] * scored[:, i][:, None]  # [B, H, pairs]
    mass.index_add_(1, i - j, picked.sum(0).double())
    return mass / scored.sum()


@torch.no_grad()
def rope_composition(model: TinyCharLM, weights: torch.Tensor, writer: int = 0, reader: int = 1) -> torch.Tensor:
    """RoPE-aware K-composition [H writer heads, H reader heads]: for each reader r, the norm ratio
    ||W_OV^w W_QK^r(d)^T|| / (||W_OV^w|| ||W_QK^r(d)||) averaged over offsets d with weights[r, d] (weights
    [H, n_offsets], normalised per reader; offsets below MIN_WEIGHT left out). ValueError for a reader without
    weight, or blocks out of order."""
    if not 0 <= writer < reader < model.cfg.n_layers:
        raise ValueError(f"The writer's block must come before the reader's, both of the model's {model.cfg.n_layers}: "
                         f"got {writer} and {reader}.")
    H = model.cfg.n_heads
    if weights.shape[0] != H or (weights.sum(1) <= 0).any():
        raise ValueError(f"weights must be [{H} reader heads, offsets] with some weight for every reader.")
    b, rb = model.blocks[writer], model.blocks[reader]
    ov = torch.einsum("hdk,hkm->hdm", b.W_V.double(), b.W_O.double())  # [H, D, D]
    out = torch.zeros(H, H, dtype=torch.float64)
    for r in range(H):
        w = weights[r].double() / weights[r].sum()
        ds = torch.nonzero(w >= MIN_WEIGHT).flatten().tolist()
        R = torch.stack([rotary_matrix(-d, model.cfg.d_head, model.cfg.rope_base) for d in ds])  # [n, dh, dh]
        qk = rb.W_Q[r].double() @ R @ rb.W_K[r].double().T  # [n, D, D]: rotated_qk at each offset
        scores = composition_score(ov[:, None], qk.transpose(-1, -2)[None])  # [H writers, n]
        out[:, r] = (scores * w[ds]).sum(1) / w[ds].sum()
    return out


def composition_vs_paths(model: TinyCharLM, paths: pd.DataFrame, rope: torch.Tensor | None = None) -> pd.DataFrame:
    """One row per block-1 sender and block-2 receiver: sender, receiver (labels), k_score (weights), k_lost
    (1 - the noising effect of the sender's key path into that receiver: the share of M lost), testable; with
    rope ([H, H], rope_composition) also k_rope after k_score.
    paths: results.Experiments.paths (path_patching.path_patch_table with sender/receiver labels).
    ValueError for fewer than two blocks or a paths frame without the key noising rows."""
    if model.cfg.n_layers < 2:
        raise ValueError("Composition needs two blocks: this model has fewer.")
    k = paths[(paths["path"] == "k") & (paths["direction"] == "noising") & (paths["receiver_layer"] == 1)
              & (paths["receiver_head"] >= 0)] if len(paths) else paths
    if not len(k):
        raise ValueError("paths has no key-path noising rows into block 2 (use results.Experiments.paths).")
    scores = composition_matrix(model, "K", 0, 1)
    rows = []
    for r in k.itertuples():
        s, h = int(r.sender_head), int(r.receiver_head)
        row = {"sender": head_label(0, s), "receiver": head_label(1, h), "k_score": float(scores[s, h])}
        if rope is not None:
            row["k_rope"] = float(rope[s, h])
        rows.append(row | {"k_lost": 1 - float(r.patch_effect), "testable": bool(r.testable)})
    cols = ["sender", "receiver", "k_score", *(["k_rope"] if rope is not None else []), "k_lost", "testable"]
    return pd.DataFrame(rows, columns=cols)


def rope_composition_vs_paths(model: TinyCharLM, runs: PatchRuns, paths: pd.DataFrame) -> pd.DataFrame:
    """composition_vs_paths with k_rope: the RoPE-aware score, each block-2 receiver's offsets weighted by its
    attention on the clean run (receiver_offsets). Same ValueErrors."""
    if model.cfg.n_layers < 2:
        raise ValueError("Composition needs two blocks: this model has fewer.")
    return composition_vs_paths(model, paths, rope_composition(model, receiver_offsets(runs, 1)))


