"""The training forward's attention compiled: rotary, causal softmax, A v and the backward in one pass
per (sequence, head) (core/model/causal_attention.cpp). Trains wherever it builds and is measured faster
than the eager path (core.model.hooks.attend with PyTorch's ops) on the machine at hand
(core.model.attention.kernel_choice).

    ATTENTION_LAB_ATTENTION unset or auto  the kernel measured faster here (once per machine, recorded beside the build)
    ATTENTION_LAB_ATTENTION=cpp            this one whenever it builds, measured or not
    ATTENTION_LAB_ATTENTION=eager          the eager path always

It computes what core.model.hooks.attend computes (qkv [B, T, 3 H dh] from core.model.attention.fused_qkv,
z [B, T, H dh], the held head, the pattern [B, H, T, T] when asked); checked against
F.scaled_dot_product_attention and the model's hooked path in tests/test_attention_cpp.py. Its floats differ
from the eager path's (other summation order, its own exp), and between CPU kinds (its vectors are the
width of the machine's registers, so its lane-wise sums differ); core.model.cpu.TOLERANCE says how far
a retrained checkpoint's figures may move with them, and bench/README.md's current figures how far they moved.

The source is plain C++ called through ctypes, not a torch extension: without torch's headers it
builds in about 2 CPU-seconds (g++ 12) and needs only a C++ compiler ($CXX, else g++), no ninja. It is
built once per machine into $ATTENTION_LAB_CACHE/ext (else ~/.cache/attention-lab/ext), named by a hash
of the source, the flags, the compiler and the CPU's flags, and written under a temporary name and
renamed, so concurrent workers never load a half-written file. It is built for the CPU it runs on
(-march=native); the hidden switch ATTENTION_LAB_CPU=avx2 (or sse4) builds it for that kind instead,
which is how bench/ emulates a student's AVX2 laptop on an AVX-512 host (with cpu.emulate for torch's
own kernels).
Any failure (no compiler, a failed build or load) leaves available() False with the reason in
reason(), and the model keeps the eager path. It runs on one thread (the lab trains on one); its
packed operands and scratch (about 1.2 MB at the default sizes, 9 MB at T 384 with 4 heads) are kept per thread
from call to call and rebuilt when T, d_head or the head count change.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from core.model import cpu

SOURCE = Path(__file__).with_name("causal_attention.cpp")
ENV_SWITCH = "ATTENTION_LAB_ATTENTION"
SWITCHES = ("auto", "cpp", "eager")
CHOICE_VERSION = 2  # what a recorded measurement compared (2: against the eager path through hooks.attend)


def flags() -> tuple[str, ...]:
    """g++'s flags: for this CPU (-march=native), or for the kind ATTENTION_LAB_CPU emulates."""
    return ("-O3", *cpu.march(), "-std=c++17", "-shared", "-fPIC", "-fno-math-errno")


@dataclass
class Build:
    """How this process got the library: its path, whether it was compiled now, the compiler's
    CPU-seconds (children's user + system), or why there is none (reason)."""
    path: Path | None = None
    compiled: bool = False
    cpu_seconds: float = 0.0
    reason: str = ""


_LOCK = threading.Lock()
_LIB: ctypes.CDLL | None = None
_BUILD: Build | None = None


def cache_dir() -> Path:
    root = os.environ.get("ATTENTION_LAB_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "attention-lab") / "ext"


def _compiler() -> str | None:
    import shutil

    return shutil.which(os.environ.get("CXX", "g++"))


def library_path(compiler: str) -> Path:
    key = hashlib.sha256(b"\0".join([SOURCE.read_bytes(), " ".join(flags()).encode(), compiler.encode(),
                                     platform.machine().encode(), cpu.flags_line().encode()])).hexdigest()[:16]
    return cache_dir() / f"causal_attention_{key}.so"


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _build() -> Build:
    import subprocess  # here, not at import: core.model.attention imports this module in every process
    import tempfile

    compiler = _compiler()
    if compiler is None:
        return Build(reason=f"no C++ compiler ({os.environ.get('CXX', 'g++')} not on PATH)")
    path = library_path(compiler)
    if path.exists():
        return Build(path=path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    cpu0 = _children_cpu()
    try:
        run = subprocess.run([compiler, *flags(), str(SOURCE), "-o", tmp], capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            return Build(reason=f"{compiler} failed (exit {run.returncode}): {run.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Build(path=path, compiled=True, cpu_seconds=_children_cpu() - cpu0)


def _declare(lib: ctypes.CDLL) -> None:
    p, i = ctypes.c_void_p, ctypes.c_int
    for dt in ("f32", "f64"):
        getattr(lib, f"attn_forward_{dt}").argtypes = [p, p, p, i, i, i, i, i, p, p, p]
        getattr(lib, f"attn_backward_{dt}").argtypes = [p, p, p, p, p, p, i, i, i, i, i, p]
        getattr(lib, f"attn_forward_{dt}").restype = None
        getattr(lib, f"attn_backward_{dt}").restype = None


def load() -> Build:
    """Build (once per machine) and load the library (once per process); never raises."""
    global _LIB, _BUILD
    with _LOCK:
        if _BUILD is None:
            try:
                build = _build()
                if build.path is not None:
                    lib = ctypes.CDLL(str(build.path))
                    _declare(lib)
                    _LIB = lib
            except Exception as e:  # noqa: BLE001 - any failure means: keep the eager path
                build = Build(reason=f"{type(e).__name__}: {e}")
            _BUILD = build
        return _BUILD


def available() -> bool:
    """Whether the compiled kernel built and loaded in this process (builds it on first call)."""
    load()
    return _LIB is not None


def reason() -> str:
    """Why available() is False ('' when it is True)."""
    return load().reason


def switch() -> str:
    """$ATTENTION_LAB_ATTENTION: 'auto' (the default, and what an unknown value means), 'cpp' or 'eager'."""
    value = os.environ.get(ENV_SWITCH, "auto").strip().lower()
    return value if value in SWITCHES else "auto"


def choice_path() -> Path | None:
    """Where the measured choice between the kernels is recorded: beside this machine's build."""
    compiler = _compiler()
    return None if compiler is None else library_path(compiler).with_suffix(".choice.json")


def recorded_choice() -> dict | None:
    """The recorded measurement (core.model.attention.kernel_choice writes it), if one is there for this
    build and this torch; None otherwise (never raises)."""
    path = choice_path()
    try:
        record = json.loads(path.read_text()) if path is not None else None
    except (OSError, ValueError):
        return None
    ok = (isinstance(record, dict) and record.get("torch") == torch.__version__
          and record.get("version") == CHOICE_VERSION and record.get("kernel") in ("compiled", "eager"))
    return record if ok else None


def record_choice(record: dict) -> None:
    """Write the measurement beside the build (atomically; an unwritable folder keeps it in memory only)."""
    import tempfile

    path = choice_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


def supports(h: torch.Tensor, n_heads: int) -> bool:
    """Whether the kernel takes a block's stream h [B, T, D] with n_heads heads (else the eager path runs)."""
    return (h.device.type == "cpu" and h.dtype in (torch.float32, torch.float64) and h.dim() == 3
            and h.shape[-1] % n_heads == 0 and (h.shape[-1] // n_heads) % 2 == 0
            and h.numel() > 0 and h.shape[1] < 2 ** 15)


def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def rotary_tables(cos: torch.Tensor, sin: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [T, dh] (rope_cos_sin) -> the kernel's (cs, sn) [T, dh] in pair_order, cached: cs
    holds cos(t theta_j) at 2j and 2j + 1, sn holds -sin(t theta_j) at 2j and +sin at 2j + 1, so
    rotating a pair-ordered row x is x cs + swap_pairs(x) sn."""
    key = (cos.data_ptr(), sin.data_ptr(), tuple(cos.shape), dtype)
    if key not in _TABLES:
        half = cos.shape[1] // 2
        c, s = cos[:, :half].to(dtype), sin[:, :half].to(dtype)
        cs = torch.stack([c, c], -1).flatten(1).contiguous()
        sn = torch.stack([-s, s], -1).flatten(1).contiguous()
        _TABLES[key] = (cs, sn, cos)  # cos kept alive: its data_ptr is in the key
    return _TABLES[key][:2]


class CompiledCausalAttention(torch.autograd.Function):
    """qkv [B, T, 3 H dh] -> (z [B, T, H dh], pattern [B, H, T, T]); the pattern is not
    differentiable and is written only with need_pattern (else an empty tensor is returned in its
    place). The backward does not read it: with a gradient to compute the forward keeps each row's
    softmax max and 1 / sum (stats [B, H, T, 2], 98 KB a block at the default sizes) and the backward
    recomputes the pattern's rows from them, the same floats, instead of the forward writing and the
    backward reading back a 4.7 MB pattern (mostly zeros above the diagonal)."""

    @staticmethod
    def forward(ctx, qkv, cs, sn, n_heads: int, hold: int, need_pattern: bool):
        qkv = qkv.contiguous()
        B, T, width = qkv.shape
        dh = width // (3 * n_heads)
        z = qkv.new_empty(B, T, n_heads * dh)
        grad = ctx.needs_input_grad[0]
        P = qkv.new_empty(B, n_heads, T, T) if need_pattern else qkv.new_empty(0)
        stats = qkv.new_empty(B, n_heads, T, 2) if grad else qkv.new_empty(0)
        fn = _LIB.attn_forward_f32 if qkv.dtype == torch.float32 else _LIB.attn_forward_f64
        fn(_ptr(qkv), _ptr(cs), _ptr(sn), B, T, n_heads, dh, hold, _ptr(z), _ptr(P) if need_pattern else None,
           _ptr(stats) if grad else None)
        ctx.save_for_backward(qkv, cs, sn, z, stats)
        ctx.n_heads, ctx.hold = n_heads, hold
        ctx.mark_non_differentiable(P)
        ctx.set_materialize_grads(False)
        return z, P

    @staticmethod
    def backward(ctx, dz, _dP):
        if dz is None:
            return None, None, None, None, None, None
        qkv, cs, sn, z, stats = ctx.saved_tensors
        dz = dz.contiguous()
        B, T, width = qkv.shape
        H = ctx.n_heads
        g = torch.empty_like(qkv)
        fn = _LIB.attn_backward_f32 if qkv.dtype == torch.float32 else _LIB.attn_backward_f64
        fn(_ptr(qkv), _ptr(cs), _ptr(sn), _ptr(z), _ptr(stats), _ptr(dz), B, T, H, width // (3 * H), ctx.hold,
           _ptr(g))
        return g, None, None, None, None, None


def causal_attention(qkv: torch.Tensor, n_heads: int, cos: torch.Tensor, sin: torch.Tensor,
                     hold: int | None = None, need_pattern: bool = False):
    """z [B, T, H dh] (and with need_pattern the pattern [B, H, T, T]) from qkv [B, T, 3 H dh] in
    fused_qkv's layout; cos, sin [T, dh] (core.model.rope.rope_cos_sin); hold: a head whose pattern
    is one-hot on i - 1 (its q and k get no gradient). The caller has checked available() and supports()."""
    cs, sn = rotary_tables(cos, sin, qkv.dtype)
    hold = -1 if hold is None or not 0 <= hold < n_heads else int(hold)
    z, P = CompiledCausalAttention.apply(qkv, cs, sn, n_heads, hold, need_pattern)
    return (z, P) if need_pattern else z
