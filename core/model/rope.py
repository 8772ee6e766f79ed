"""Rotary embedding (Su et al., 2021) in the rotate-half convention: pairs (j, j + d_head/2) rotated by the
angle t * base^(-2j/d_head) at position t. TinyCharLM's only positional signal; the analyses rotate with the
same tables.
"""
from __future__ import annotations

import torch

_ROPE_CACHE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def rope_cos_sin(seq_len: int, d_head: int, base: float, dtype=torch.float32):
    """cos, sin tables of shape [seq_len, d_head] for positions 0..seq_len-1."""
    key = (seq_len, d_head, float(base), dtype)
    if key not in _ROPE_CACHE:
        inv_freq = base ** (-torch.arange(0, d_head // 2, dtype=torch.float64) * 2 / d_head)
        angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        _ROPE_CACHE[key] = (angles.cos().to(dtype), angles.sin().to(dtype))
    return _ROPE_CACHE[key]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, sign: float) -> torch.Tensor:
    """x * cos + sign * rotate_half(x) * sin, where rotate_half(x) = cat(-x2, x1) for x = cat(x1, x2).

    sign=-1 gives the transpose (the inverse rotation), which is the backward pass of sign=+1.
    """
    half = x.shape[-1] // 2
    out = x * cos
    out[..., :half].addcmul_(x[..., half:], sin[..., :half], value=-sign)
    out[..., half:].addcmul_(x[..., :half], sin[..., half:], value=sign)
    return out


class _Rotary(torch.autograd.Function):
    """Rotary embedding with a hand-written backward: the backward of a rotation is the inverse
    rotation. Autograd through cat/neg/slices costs a step about 10% more (zero-filled slice grads)."""

    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return _rotate(x, cos, sin, 1.0)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, sin, -1.0), None, None


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [..., T, d_head] by position; cos/sin are [T, d_head]."""
    return _Rotary.apply(x, cos, sin)
