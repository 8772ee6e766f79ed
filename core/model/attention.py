"""The training forward's attention: rotary, causal softmax attention and the held head in one
autograd.Function with its own backward. Where a C++ compiler is found, causal_attention runs the same
computation compiled (core.model.attention_cpp) if kernel_choice() measured it faster on this machine;
ATTENTION_LAB_ATTENTION=eager keeps this eager kernel, =cpp the compiled one.

    z, pattern = causal_attention(qkv, n_heads, cos, sin, hold=None, need_pattern=False)

qkv [B, T, 3 * H * d_head] is the fused projection h @ [W_Q | W_K | W_V] (+ biases), heads inner:
qkv.view(B, T, 3, H, d_head)[:, :, 0] is q, its columns in pair_order (fused_qkv builds it). z
[B, T, H * d_head] is every head's A_h v_h side by side, ready for the fused W_O product. It
computes what TinyCharLM's analysis path computes (rotary on q and k, scores q.k / sqrt(d_head)
with a causal mask, softmax, A v; the held head's pattern replaced by hooks.previous_token_pattern), checked
against F.scaled_dot_product_attention in tests/test_attention_kernel.py.

Why not SDPA: at these sizes (T <= 384, d_head 32) torch's CPU flash-attention kernel runs at a
quarter of the matrix-product rate, and the permuted q, k, v views cost a rotary pass twice as slow
and a copy per block. Here one pass reads q and k from the projection and writes them rotated into
per-head contiguous [T, d_head] slabs, and each product is one batched matrix product (bmm) over
the B*H heads (a bmm writing into a
strided view falls into a per-sequence loop); the rotary pairs are reordered to sit side by side
(fused_qkv), so rotating is one complex multiplication. Queries go in blocks of QUERY_BLOCK rows
against the keys up to the block's end, which skips most of the masked half of q k^T and A v. The
pattern is kept for the backward (about 3.5 MB a block at the default sizes), which needs no
recomputation; the softmax backward takes its row sums from dz . z (= sum_j A_ij dA_ij) instead of
a pass over the T x T pattern.
"""
from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass

import torch

from core.model import attention_cpp
from core.model.hooks import previous_token_pattern

_MASKS: dict[tuple, torch.Tensor] = {}
_HELD: dict[tuple, torch.Tensor] = {}


def causal_bias(T: int, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """[T, T]: 0 where key j <= query i, -inf above the diagonal (added to the scores)."""
    key = (T, dtype, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.zeros(T, T, dtype=dtype, device=device).masked_fill_(
            torch.ones(T, T, dtype=torch.bool, device=device).triu(1), float("-inf"))
    return _MASKS[key]


def held_pattern(T: int, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """core.model.hooks.previous_token_pattern(T) (the held head's pattern, defined there once), cached."""
    key = (T, dtype, str(device))
    if key not in _HELD:
        _HELD[key] = previous_token_pattern(T, device).to(dtype)
    return _HELD[key]


_TABLES: dict[tuple, tuple[torch.Tensor, ...]] = {}


def pair_order(d_head: int) -> torch.Tensor:
    """The column order of q and k inside qkv: (0, d/2, 1, d/2 + 1, ...), so each rotary pair (j,
    j + d/2) sits side by side and rotates as one complex number. q.k is unchanged by a common
    reordering of q's and k's coordinates."""
    half = d_head // 2
    return torch.stack([torch.arange(half), torch.arange(half, d_head)], 1).reshape(-1)


def in_pair_order(x: torch.Tensor) -> torch.Tensor:
    """x[..., pair_order(d)] for x [..., d], as a transposition of its two halves: its backward is a
    copy, where an index's is an accumulating scatter (index_put, about 0.5 ms of a default step)."""
    return x.unflatten(-1, (2, x.shape[-1] // 2)).transpose(-1, -2).flatten(-2)


def fused_qkv(h: torch.Tensor, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None) -> torch.Tensor:
    """h [B, T, D] -> qkv [B, T, 3 H d_head] in causal_attention's layout: q, k, v of every head
    (heads inner), q and k in pair_order. W_* [H, D, d_head], b_* [H, d_head] or None."""
    B, T, D = h.shape
    H, _, dh = W_Q.shape
    W = torch.cat([in_pair_order(W_Q), in_pair_order(W_K), W_V], 0).permute(1, 0, 2).reshape(D, 3 * H * dh)
    if b_Q is None:
        return (h.reshape(B * T, D) @ W).view(B, T, 3 * H * dh)
    b = torch.cat([in_pair_order(b_Q), in_pair_order(b_K), b_V], 0).reshape(-1)
    return torch.addmm(b, h.reshape(B * T, D), W).view(B, T, 3 * H * dh)


def rotary_table(cos: torch.Tensor, sin: torch.Tensor, n_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(R, R*), complex [T, 2, H, d_head/2]: q's pairs (slot 0) and k's (slot 1) rotate by
    multiplication with R = e^{i t theta_j}, q's scaled by 1/sqrt(d_head) so the scores are a plain
    q k^T; R* = conj(R) is the backward. cos, sin [T, d_head] from core.model.tinycharlm.rope_cos_sin."""
    T, dh = cos.shape
    key = (T, dh, n_heads, cos.dtype, str(cos.device), cos.data_ptr())
    if key not in _TABLES:
        half = dh // 2
        scale = torch.tensor([1.0 / math.sqrt(dh), 1.0], dtype=cos.dtype, device=cos.device)[None, :, None, None]
        R = torch.complex(cos[:, None, None, :half] * scale, sin[:, None, None, :half] * scale)
        R = R.expand(T, 2, n_heads, half).contiguous()
        _TABLES[key] = (R, R.conj().resolve_conj(), cos)  # cos kept alive: its data_ptr is in the key
    return _TABLES[key][:2]


def _as_pairs(x: torch.Tensor) -> torch.Tensor:
    """Real [..., d] (last dim contiguous) -> complex view [..., d/2] of its neighbouring pairs."""
    return torch.view_as_complex(x.unflatten(-1, (x.shape[-1] // 2, 2)))


QUERY_BLOCK = 48  # query rows per block: block i's rows attend to keys 0..end_i only (see CausalAttention)


def _blocks(T: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, T)) for s in range(0, T, size)]


class CausalAttention(torch.autograd.Function):
    """qkv [B, T, 3 H dh] -> (z [B, T, H dh], patterns); see the module docstring.

    The queries are taken in blocks of `block` rows; block [s, e) scores against keys 0..e-1 only, so
    the masked upper right of q k^T is mostly never computed (at T = 96 and 48-row blocks, 3/4 of the
    products and of the pattern's elementwise passes). patterns is one [H B, e - s, e] tensor per block.
    """

    @staticmethod
    def forward(ctx, qkv, R, R_conj, n_heads: int, hold: int, block: int):
        B, T, width = qkv.shape
        H = n_heads
        dh = width // (3 * H)
        x = qkv.view(B, T, 3, H, dh)
        heads = qkv.new_empty(3, H, B, T, dh)  # q (rotated, scaled), k (rotated), v: each head contiguous
        torch.mul(_as_pairs(x[:, :, :2]), R, out=_as_pairs(heads[:2].permute(2, 3, 0, 1, 4)))
        heads[2].copy_(x[:, :, 2].permute(2, 0, 1, 3))
        q, k, v = heads.view(3, H * B, T, dh)
        bias = causal_bias(T, qkv.dtype, qkv.device)
        z = qkv.new_empty(B, T, H, dh)
        Ps, Zs = [], []
        for s, e in _blocks(T, block):
            P = torch.bmm(q[:, s:e], k[:, :e].transpose(1, 2))  # [H B, e - s, e]
            P.add_(bias[s:e, :e])
            P = torch.softmax(P, -1)
            if 0 <= hold < H:
                P.view(H, B, e - s, e)[hold] = held_pattern(T, qkv.dtype, qkv.device)[s:e, :e]
            Z = torch.bmm(P, v[:, :e])  # [H B, e - s, dh]
            z[:, s:e] = Z.view(H, B, e - s, dh).permute(1, 2, 0, 3)
            Ps.append(P)
            Zs.append(Z)
        ctx.save_for_backward(heads, R_conj, *Ps, *Zs)
        ctx.hold, ctx.block = hold, block
        ctx.mark_non_differentiable(*Ps)
        ctx.set_materialize_grads(False)
        return (z.view(B, T, H * dh), *Ps)

    @staticmethod
    def backward(ctx, dz, *_dpatterns):
        if dz is None:  # z unused (grads are not materialised)
            return None, None, None, None, None, None
        heads, R_conj, *saved = ctx.saved_tensors
        n = len(saved) // 2
        Ps, Zs = saved[:n], saved[n:]
        _, H, B, T, dh = heads.shape
        q, k, v = heads.view(3, H * B, T, dh)
        dZ = dz.view(B, T, H, dh).permute(2, 0, 1, 3).reshape(H * B, T, dh)
        grads = heads.new_zeros(3, H * B, T, dh)  # dq, dk, dv
        dq, dk, dv = grads
        for (s, e), P, Z in zip(_blocks(T, ctx.block), Ps, Zs):
            dZ_i = dZ[:, s:e]
            dv[:, :e].add_(torch.bmm(P.transpose(1, 2), dZ_i))
            dS = torch.bmm(dZ_i, v[:, :e].transpose(1, 2))
            dS.sub_((dZ_i * Z).sum(-1, keepdim=True)).mul_(P)  # softmax backward: sum_j A_ij dA_ij = dz_i . z_i
            if 0 <= ctx.hold < H:  # a held pattern does not depend on q or k
                dS.view(H, B, e - s, e)[ctx.hold] = 0.0
            dq[:, s:e] = torch.bmm(dS, k[:, :e])
            dk[:, :e].add_(torch.bmm(dS.transpose(1, 2), q[:, s:e]))
        grads = grads.view(3, H, B, T, dh)
        g = heads.new_empty(B, T, 3, H, dh)
        torch.mul(_as_pairs(grads[:2].permute(2, 3, 0, 1, 4)), R_conj, out=_as_pairs(g[:, :, :2]))
        g[:, :, 2] = grads[2].permute(1, 2, 0, 3)
        return g.view(B, T, 3 * H * dh), None, None, None, None, None


@dataclass(frozen=True)
class KernelChoice:
    """Which kernel trains in this process and why. eager_ms and compiled_ms: the measurement behind an
    automatic choice (CPU ms of one block's forward + backward at `sizes` (B, T, H, d_head), medians),
    None where nothing was measured (switched by hand, or no compiled kernel)."""
    kernel: str  # "compiled" or "eager"
    why: str
    eager_ms: float | None = None
    compiled_ms: float | None = None
    sizes: tuple[int, int, int, int] = (32, 96, 4, 32)
    cpu: str = ""


_CHOICE: KernelChoice | None = None
_CHOICE_LOCK = threading.Lock()


def measure_kernels(sizes=(32, 96, 4, 32), rounds: int = 3, n: int = 5) -> dict[str, float]:
    """CPU ms (this thread's) of one block's attention forward + backward, eager and compiled in
    alternating rounds after a warm-up, medians: {"eager": ms, "compiled": ms}. Needs the compiled kernel."""
    with torch.inference_mode(False), torch.enable_grad():  # it may be first called inside an evaluation
        return _measure(sizes, rounds, n)


def _measure(sizes, rounds: int, n: int) -> dict[str, float]:
    B, T, H, dh = sizes
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3 * H * dh, generator=g).requires_grad_()
    dz = torch.randn(B, T, H * dh, generator=g)
    cos, sin = _rope_tables(T, dh)
    R, R_conj = rotary_table(cos, sin, H)
    runs = {"eager": lambda: CausalAttention.apply(qkv, R, R_conj, H, -1, QUERY_BLOCK)[0].backward(dz),
            "compiled": lambda: attention_cpp.causal_attention(qkv, H, cos, sin).backward(dz)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(rounds + 1):
        for name, run in runs.items():
            for _ in range(n if r else 2):  # round 0 warms up
                qkv.grad = None
                t = time.thread_time()
                run()
                if r:
                    times[name].append(1000 * (time.thread_time() - t))
    return {name: statistics.median(ts) for name, ts in times.items()}


def _rope_tables(T: int, dh: int):
    from core.model.config import ModelConfig
    from core.model.tinycharlm import rope_cos_sin  # tinycharlm imports this module

    return rope_cos_sin(T, dh, ModelConfig().rope_base)


def choose(measured: dict[str, float]) -> str:
    """The rule: the compiled kernel only where it was measured faster than the eager one."""
    return "compiled" if measured["compiled"] < measured["eager"] else "eager"


def kernel_choice() -> KernelChoice:
    """The kernel this process trains with: by ATTENTION_LAB_ATTENTION when it says eager or cpp, else
    (auto) by a measurement made once per machine and recorded beside the compiled build
    (attention_cpp.recorded_choice; about 0.5 CPU-s the first time). Never raises."""
    global _CHOICE
    switch = attention_cpp.switch()
    if switch == "auto" and _CHOICE is not None:  # every block of every step after the first
        return _CHOICE
    if switch == "eager":
        return KernelChoice("eager", "ATTENTION_LAB_ATTENTION=eager")
    if not attention_cpp.available():
        return KernelChoice("eager", f"no compiled kernel: {attention_cpp.reason()}")
    if switch == "cpp":
        return KernelChoice("compiled", "ATTENTION_LAB_ATTENTION=cpp")
    with _CHOICE_LOCK:
        if _CHOICE is None:
            from core.model import cpu

            record = attention_cpp.recorded_choice()
            if record is None:
                sizes = KernelChoice.sizes
                ms = measure_kernels(sizes)
                record = {"kernel": choose(ms), "eager_ms": round(ms["eager"], 3),
                          "compiled_ms": round(ms["compiled"], 3), "sizes": list(sizes), "cpu": cpu.kind(),
                          "torch": torch.__version__}
                attention_cpp.record_choice(record)
            why = (f"measured on this machine ({record['cpu']}): compiled {record['compiled_ms']:.2f} CPU-ms, "
                   f"eager {record['eager_ms']:.2f} for one block's forward and backward")
            _CHOICE = KernelChoice(record["kernel"], why, record["eager_ms"], record["compiled_ms"],
                                   tuple(record["sizes"]), record["cpu"])
        return _CHOICE


def causal_attention(qkv: torch.Tensor, n_heads: int, cos: torch.Tensor, sin: torch.Tensor,
                     hold: int | None = None, need_pattern: bool = False, block: int = QUERY_BLOCK):
    """Rotary + causal attention of every head from the fused projection (module docstring).

    qkv [B, T, 3 H dh] from fused_qkv; cos, sin [T, dh] (core.model.tinycharlm.rope_cos_sin); hold: a
    head whose pattern is held_pattern(T) (its q and k get no gradient); block: query rows per block.
    Returns z [B, T, H dh], and with need_pattern also the pattern [B, H, T, T] (not differentiable).
    """
    if attention_cpp.supports(qkv, n_heads) and kernel_choice().kernel == "compiled":
        return attention_cpp.causal_attention(qkv, n_heads, cos, sin, hold, need_pattern)
    R, R_conj = rotary_table(cos, sin, n_heads)
    z, *Ps = CausalAttention.apply(qkv, R, R_conj, n_heads, -1 if hold is None else hold, max(1, int(block)))
    if not need_pattern:
        return z
    B, T = qkv.shape[:2]
    pattern = qkv.new_zeros(n_heads * B, T, T)
    for (s, e), P in zip(_blocks(T, block), Ps):
        pattern[:, s:e, :e] = P
    return z, pattern.view(n_heads, B, T, T).transpose(0, 1)
