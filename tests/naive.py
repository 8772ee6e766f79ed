"""The naive reference, written from docs/DESIGN.md "TinyCharLM: exact semantics" with explicit loops and
nothing from core/: it checks the model and the checkpoint format against the spec itself."""
from __future__ import annotations

import math

import torch


def naive_rope(x: torch.Tensor, base: float, pairs: str = "rotate_half") -> torch.Tensor:
    """Rotate each position t of x [T, d] by the angle t * base^(-2j/d) in the pair (j, j + d/2).

    pairs="interleaved" uses the pairs (2j, 2j+1) instead, the other common convention; tests use it
    only to show that they can tell the two apart."""
    T, d = x.shape
    rows = []
    for t in range(T):
        row = x[t].tolist()
        for j in range(d // 2):
            a, b = (j, j + d // 2) if pairs == "rotate_half" else (2 * j, 2 * j + 1)
            theta = t * base ** (-2 * j / d)
            c, s = math.cos(theta), math.sin(theta)
            row[a], row[b] = x[t, a].item() * c - x[t, b].item() * s, x[t, a].item() * s + x[t, b].item() * c
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def naive_forward(weights: dict, config: dict, tokens: torch.Tensor, pairs: str = "rotate_half"):
    """weights: the file's state_dict ({"W_E", "blocks.l.W_Q", ...}); config: the file's config dict;
    tokens [T] -> (logits [T, V], patterns: one [H, T, T] per block), all in float64."""
    P = {k: v.detach().double() for k, v in weights.items()}
    H, bias, base = config["n_heads"], config["bias"], config["rope_base"]
    dh = config["d_model"] // H
    T = tokens.shape[0]
    h = P["W_E"][tokens]
    patterns = []
    for l in range(config["n_layers"]):
        update = torch.zeros_like(h)
        heads = []
        for hd in range(H):
            q, k, v = (h @ P[f"blocks.{l}.W_{n}"][hd] for n in "QKV")
            if bias:
                q, k, v = q + P[f"blocks.{l}.b_Q"][hd], k + P[f"blocks.{l}.b_K"][hd], v + P[f"blocks.{l}.b_V"][hd]
            q, k = naive_rope(q, base, pairs), naive_rope(k, base, pairs)
            A = torch.zeros(T, T, dtype=torch.float64)
            for i in range(T):
                scores = torch.stack([q[i] @ k[j] for j in range(i + 1)]) / math.sqrt(dh)  # keys j <= i only
                A[i, : i + 1] = torch.softmax(scores, 0)
            heads.append(A)
            update = update + (A @ v) @ P[f"blocks.{l}.W_O"][hd]
        h = h + update + (P[f"blocks.{l}.b_O"] if bias else 0.0)
        patterns.append(torch.stack(heads))
    return h @ P["W_E"].T, patterns


def rope_batched(x: torch.Tensor, base: float) -> torch.Tensor:
    """naive_rope for x [..., T, d] without the loops (differentiable, x's dtype): each position t rotated
    by the angle t * base^(-2j/d) in the pair (j, j + d/2); the attention kernels' tests need gradients."""
    T, d = x.shape[-2:]
    inv = base ** (-torch.arange(d // 2, dtype=torch.float64) * 2 / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1)
