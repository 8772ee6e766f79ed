"""TinyCharLM: an attention-only transformer with rotary embeddings and a tied unembedding.

Semantics (docs/DESIGN.md): residual stream h0 = W_E[x], no positional embedding; each block adds
sum_h (A_h v_h) W_O[h] (+ b_O) where A_h is a causal softmax over rotary-rotated q.k / sqrt(d_head);
logits = h_L W_E^T. No MLP, no LayerNorm. Parameters are stored in the per-head form used by files
and analysis (W_Q [H, D, d_head], W_O [H, d_head, D]); the training forward fuses them on the fly.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from core.model.attention import causal_attention, fused_qkv, held_pattern

MAX_LAYERS = 6


@dataclass
class ModelConfig:
    vocab_size: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    bias: bool = False
    rope_base: float = 10000.0

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {self.vocab_size}.")
        if not 0 <= self.n_layers <= MAX_LAYERS:
            raise ValueError(f"n_layers must be between 0 and {MAX_LAYERS}, got {self.n_layers}.")
        if self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads}).")
        if self.d_head % 2:
            raise ValueError(f"d_head = d_model / n_heads must be even for rotary embeddings, got {self.d_head}.")
        if self.rope_base <= 1:
            raise ValueError(f"rope_base must be above 1, got {self.rope_base}.")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Rotary embedding (rotate-half convention: pairs (j, j + d_head/2), angle t * base^(-2j/d_head))

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


# ---------------------------------------------------------------------------------------------


class AttentionBlock(nn.Module):
    """One attention-only block: n_heads heads, each q/k/v of width d_head, summed into the stream."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        H, D, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        self.cfg = cfg
        self.W_Q = nn.Parameter(torch.empty(H, D, dh))
        self.W_K = nn.Parameter(torch.empty(H, D, dh))
        self.W_V = nn.Parameter(torch.empty(H, D, dh))
        self.W_O = nn.Parameter(torch.empty(H, dh, D))
        if cfg.bias:
            self.b_Q = nn.Parameter(torch.zeros(H, dh))
            self.b_K = nn.Parameter(torch.zeros(H, dh))
            self.b_V = nn.Parameter(torch.zeros(H, dh))
            self.b_O = nn.Parameter(torch.zeros(D))
        self.prev_head: int | None = None  # a training experiment: this head's pattern held on i-1 (kept: the
        # checkpoint's train entry records it as hold_prev_head and read_checkpoint restores it)

    def _qkv(self, h: torch.Tensor):
        """Fused projection: h [B, T, D] -> q, k, v each [B, H, T, d_head], rotary applied to q, k."""
        B, T, D = h.shape
        H, dh = self.cfg.n_heads, self.cfg.d_head
        W = torch.cat([self.W_Q, self.W_K, self.W_V], 0).permute(1, 0, 2).reshape(D, 3 * H * dh)
        qkv = h @ W
        if self.cfg.bias:
            qkv = qkv + torch.cat([self.b_Q, self.b_K, self.b_V], 0).reshape(-1)
        q, k, v = qkv.view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
        cos, sin = rope_cos_sin(T, dh, self.cfg.rope_base, h.dtype)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, h: torch.Tensor, ablate: dict[int, str] | None = None) -> torch.Tensor:
        """Fused path: h [B, T, D] -> h + attention output [B, T, D].

        ablate {head: "zero" | "mean"} knocks heads out (core.reading.ablation): a head's output z_h W_O[h] is
        linear in its mixed values z_h [B, T, d_head], so zeroing z_h (or replacing it by its mean over
        the batch at each position) zero- (or mean-) ablates the head.
        """
        B, T, D = h.shape
        c = self.cfg
        qkv = fused_qkv(h, self.W_Q, self.W_K, self.W_V, *((self.b_Q, self.b_K, self.b_V) if c.bias else ()))
        cos, sin = rope_cos_sin(T, c.d_head, c.rope_base, h.dtype)
        z = causal_attention(qkv, c.n_heads, cos, sin, self.prev_head)  # [B, T, H * d_head] (core.model.attention)
        if ablate:
            z = z.clone()
            zh = z.view(B, T, c.n_heads, c.d_head)
            for hd, mode in ablate.items():
                zh[:, :, hd] = 0.0 if mode == "zero" else zh[:, :, hd].mean(0, keepdim=True)
        out = z @ self.W_O.reshape(-1, D)
        return h + (out + self.b_O if c.bias else out)

    def _write(self, z: torch.Tensor) -> torch.Tensor:
        """Fused output of all heads: z [B, H, T, d_head] -> sum_h z_h W_O[h] (+ b_O), [B, T, D]."""
        B, H, T, dh = z.shape
        out = z.transpose(1, 2).reshape(B, T, H * dh) @ self.W_O.reshape(H * dh, -1)
        return out + self.b_O if self.cfg.bias else out

    def forward_with_cache(self, h: torch.Tensor, per_head: bool = True):
        """Analysis path, per head and explicit.

        Returns (h_out [B, T, D], pattern [B, H, T, T], head_out [B, H, T, D], v [B, H, T, d_head]);
        head_out is each head's contribution (A_h v_h) W_O[h]. per_head=False skips the per-head
        outputs, the costliest product here: head_out is None.
        """
        B, T, D = h.shape
        q, k, v = self._qkv(h)
        scores = (q / math.sqrt(self.cfg.d_head)) @ k.transpose(-1, -2)
        mask = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
        pattern = scores.masked_fill_(~mask, float("-inf")).softmax(-1)
        if self.prev_head is not None:
            pattern[:, self.prev_head] = held_pattern(T, pattern.dtype, h.device)
        z = pattern @ v
        if not per_head:
            return h + self._write(z), pattern, None, v
        head_out = torch.einsum("bhtd,hdm->bhtm", z, self.W_O)
        out = head_out.sum(1)
        if self.cfg.bias:
            out = out + self.b_O
        return h + out, pattern, head_out, v


class TinyCharLM(nn.Module):
    """Attention-only character LM. model(tokens [B, T]) -> logits [B, T, V]."""

    def __init__(self, cfg: ModelConfig | None = None):
        super().__init__()
        self.cfg = cfg or ModelConfig()
        self.W_E = nn.Parameter(torch.empty(self.cfg.vocab_size, self.cfg.d_model))
        self.blocks = nn.ModuleList(AttentionBlock(self.cfg) for _ in range(self.cfg.n_layers))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None):
        """Initialise so that the embedding has unit-scale rows and each block starts near identity.

        W_E ~ N(0, 1/D) gives rows of norm about 1 (logits start near uniform but not flat);
        W_Q, W_K, W_V ~ N(0, 1/D) keep q, k, v at unit scale; W_O ~ N(0, 1/(H d_head)) / sqrt(2 L)
        keeps the summed head outputs small next to the embedding at the start.
        """
        D, H, dh, L = self.cfg.d_model, self.cfg.n_heads, self.cfg.d_head, max(self.cfg.n_layers, 1)
        with torch.no_grad():
            self.W_E.normal_(0.0, D ** -0.5, generator=generator)
            for block in self.blocks:
                for W in (block.W_Q, block.W_K, block.W_V):
                    W.normal_(0.0, D ** -0.5, generator=generator)
                block.W_O.normal_(0.0, (H * dh) ** -0.5 / math.sqrt(2 * L), generator=generator)
                if self.cfg.bias:
                    for b in (block.b_Q, block.b_K, block.b_V, block.b_O):
                        b.zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] (long) -> logits [B, T, V]."""
        h = self.W_E[tokens]
        for block in self.blocks:
            h = block(h)
        return h @ self.W_E.T

    def run_with_cache(self, tokens: torch.Tensor, per_head: bool = True):
        """Same model, per head: returns (logits [B, T, V], cache).

        cache["resid"][l] is the stream entering block l ([B, T, D]; index n_layers is the final
        stream), cache["pattern"][l] is [B, H, T, T] (query i, key j), cache["head_out"][l] is
        [B, H, T, D] (None with per_head=False, for callers that need only patterns and logits) and
        cache["v"][l] is [B, H, T, d_head].
        """
        h = self.W_E[tokens]
        cache = {"resid": [h], "pattern": [], "head_out": [], "v": []}
        for block in self.blocks:
            h, pattern, head_out, v = block.forward_with_cache(h, per_head)
            cache["resid"].append(h)
            cache["pattern"].append(pattern)
            cache["head_out"].append(head_out)
            cache["v"].append(v)
        return h @ self.W_E.T, cache

    @property
    def d_head(self) -> int:
        return self.cfg.d_head
