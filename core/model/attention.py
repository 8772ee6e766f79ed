"""Which attention trains, and the layout of the fused path.

The lab has one attention: core.model.hooks.attend (rotary q and k from core.model.rope.apply_rope,
a causal softmax, A v; the held head by hooks.hold_z or hooks.hold_pattern), which every hooked run and
the eager training forward compute with PyTorch's own ops. Where a C++ compiler is found, the same
computation is also compiled (core.model.attention_cpp: rotary, attention, the hold and the backward in
one pass per sequence and head), and a training forward with nothing hooked runs it if kernel_choice()
measured it faster on this machine. ATTENTION_LAB_ATTENTION=eager keeps the eager path, =cpp the compiled one.

The compiled path reads the fused projection qkv [B, T, 3 H d_head] = h @ [W_Q | W_K | W_V] (+ biases),
heads inner: qkv.view(B, T, 3, H, d_head)[:, :, 0] is q, its columns in pair_order (fused_qkv builds it),
so that each rotary pair sits side by side.

Why no third kernel: a hand-written eager kernel (blocked bmm with its own backward) was 0.85-0.88x the
PyTorch path's time; torch.compile's generated code is 0.87x (AVX-512) / 0.83x (AVX2) of it after a first
call of 2.4-19.6 CPU-s per process, where the compiled one is 0.41x / 0.42x (bench/attention_paths.py,
bench/README.md's current figures). The eager path is what every reader meets; the compiled one is an
optimisation checked against it (tests/test_attention_cpp.py).
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass

import torch

from core.model import attention_cpp
from core.model.rope import apply_rope, rope_cos_sin


def pair_order(d_head: int) -> torch.Tensor:
    """The column order of q and k inside qkv: (0, d/2, 1, d/2 + 1, ...), so each rotary pair (j,
    j + d/2) sits side by side. q.k is unchanged by a common reordering of q's and k's coordinates."""
    half = d_head // 2
    return torch.stack([torch.arange(half), torch.arange(half, d_head)], 1).reshape(-1)


def in_pair_order(x: torch.Tensor) -> torch.Tensor:
    """x[..., pair_order(d)] for x [..., d], as a transposition of its two halves: its backward is a
    copy, where an index's is an accumulating scatter (index_put, about 0.5 ms of a default step)."""
    return x.unflatten(-1, (2, x.shape[-1] // 2)).transpose(-1, -2).flatten(-2)


def fused_qkv(h: torch.Tensor, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None, embedded=None) -> torch.Tensor:
    """h [B, T, D] -> qkv [B, T, 3 H d_head] in the compiled kernel's layout: q, k, v of every head
    (heads inner), q and k in pair_order. W_* [H, D, d_head], b_* [H, d_head] or None.
    embedded=(W_E, tokens) when h is W_E[tokens] (block 0 of a training forward): see project."""
    H, _, dh = W_Q.shape
    W = torch.cat([in_pair_order(W_Q), in_pair_order(W_K), W_V], 0).permute(1, 0, 2).reshape(h.shape[-1], 3 * H * dh)
    b = None if b_Q is None else torch.cat([in_pair_order(b_Q), in_pair_order(b_K), b_V], 0).reshape(-1)
    return project(h, W, b, embedded)


def project(h: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None, embedded=None) -> torch.Tensor:
    """h [B, T, D] @ W [D, n] (+ b) -> [B, T, n].

    With embedded=(W_E, tokens), h being W_E[tokens]: the product is taken over the vocabulary instead,
    (W_E @ W + b)[tokens], the same numbers up to rounding. Block 0 of a training step reads the
    embedding, and its projection (forward, and both backward products) over V = 64 rows instead of
    B T = 3072 saves about 5 of a default step's 30 CPU-ms (bench/train_cost.py); the backward is
    F.embedding's, a sum of the rows' gradients per token."""
    if embedded is not None:
        W_E, tokens = embedded
        table = W_E @ W if b is None else torch.addmm(b, W_E, W)
        return torch.nn.functional.embedding(tokens, table)
    B, T, D = h.shape
    flat = h.reshape(B * T, D)
    return (flat @ W if b is None else torch.addmm(b, flat, W)).view(B, T, W.shape[1])


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


def eager_z(qkv: torch.Tensor, n_heads: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """What AttentionBlock's eager path computes from a projection qkv [B, T, 3 H dh] (plain column order)
    to z [B, T, H dh]: per-head views, apply_rope, hooks.attend. The measurements' eager side."""
    from core.model.hooks import attend

    B, T, width = qkv.shape
    dh = width // (3 * n_heads)
    q, k, v = qkv.view(B, T, 3, n_heads, dh).permute(2, 0, 3, 1, 4)
    return attend(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v).transpose(1, 2).reshape(B, T, n_heads * dh)


def _measure(sizes, rounds: int, n: int) -> dict[str, float]:
    from core.model.config import ModelConfig

    B, T, H, dh = sizes
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3 * H * dh, generator=g).requires_grad_()
    dz = torch.randn(B, T, H * dh, generator=g)
    cos, sin = rope_cos_sin(T, dh, ModelConfig().rope_base)

    runs = {"eager": lambda: eager_z(qkv, H, cos, sin).backward(dz),
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
                          "torch": torch.__version__, "version": attention_cpp.CHOICE_VERSION}
                attention_cpp.record_choice(record)
            why = (f"measured on this machine ({record['cpu']}): compiled {record['compiled_ms']:.2f} CPU-ms, "
                   f"eager {record['eager_ms']:.2f} for one block's forward and backward")
            _CHOICE = KernelChoice(record["kernel"], why, record["eager_ms"], record["compiled_ms"],
                                   tuple(record["sizes"]), record["cpu"])
        return _CHOICE


def compiled_trains(h: torch.Tensor, n_heads: int) -> bool:
    """Whether a training forward on the stream h [B, T, D] runs the compiled kernel (its shapes and type
    supported, and kernel_choice() says compiled); else it runs the eager path."""
    return attention_cpp.supports(h, n_heads) and kernel_choice().kernel == "compiled"
