"""Which attention should train: the lab's two kernels against PyTorch's own paths, on this CPU kind.

    nice -n 5 python bench/attention_paths.py [--cpu native|avx2|sse4] [--no-compile] [--json]

One block's attention forward + backward at the default training sizes (B 32, T 96, 4 heads, d_head
32), from the fused projection qkv to z (rotary included, as a training step needs it), one torch
thread, this thread's CPU ms, medians over alternating rounds:
- eager:     the model's eager path, PyTorch's own ops: per-head views, core.model.rope.apply_rope,
             then core.model.hooks.attend (F.scaled_dot_product_attention(is_causal=True)) with
             autograd's backward
- compiled:  core.model.attention_cpp (the C++ kernel, built for this kind)
- inductor:  the eager path through torch.compile (Inductor's generated C++ for this CPU), with the
             CPU-seconds its first call (the compile, in this process and its compile workers) costs
The one-thread 1024^2 matmul rate (bench/machine.matmul_rate) and the CPU kind are printed beside.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import as_cpu  # noqa: E402

CPU_KIND = as_cpu() if __name__ == "__main__" else None

import torch  # noqa: E402
from machine import matmul_rate  # noqa: E402

from core.model import attention, attention_cpp  # noqa: E402
from core.model.rope import rope_cos_sin  # noqa: E402

B, T, H, DH = 32, 96, 4, 32


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", default="native", choices=("native", "avx2", "sse4"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3 * H * DH, generator=g).requires_grad_()
    dz = torch.randn(B, T, H * DH, generator=g)
    cos, sin = rope_cos_sin(T, DH, 10000.0)
    paths = {"eager": lambda: attention.eager_z(qkv, H, cos, sin)}
    out = {"cpu": CPU_KIND, "torch_capability": torch.backends.cpu.get_cpu_capability(), "sizes": [B, T, H, DH]}
    if attention_cpp.available():
        paths["compiled"] = lambda: attention_cpp.causal_attention(qkv, H, cos, sin)
    else:
        out["compiled_unavailable"] = attention_cpp.reason()
    if not args.no_compile:
        compiled_fn = torch.compile(attention.eager_z, dynamic=False)
        c0, k0, w0 = time.process_time(), _children_cpu(), time.perf_counter()
        compiled_fn(qkv, H, cos, sin).backward(dz)
        out["inductor_first_call"] = {"cpu_s": round(time.process_time() - c0 + _children_cpu() - k0, 2),
                                      "wall_s": round(time.perf_counter() - w0, 2)}
        paths["inductor"] = lambda: compiled_fn(qkv, H, cos, sin)
    rates = [matmul_rate()]
    times: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(args.rounds + 1):
        for name, fn in paths.items():
            for _ in range(10 if r else 3):
                qkv.grad = None
                t = time.thread_time()
                fn().backward(dz)
                if r:
                    times[name].append(1000 * (time.thread_time() - t))
    rates.append(matmul_rate())
    out["ms"] = {name: round(statistics.median(ts), 2) for name, ts in times.items()}
    out["x_eager"] = {name: round(ms / out["ms"]["eager"], 2) for name, ms in out["ms"].items()}
    out["matmul_gflops_1thread"] = [round(x, 1) for x in rates]
    out["threads"] = torch.get_num_threads()
    out["env"] = {k: os.environ[k] for k in ("ATTENTION_LAB_CPU", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")
                  if k in os.environ}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"CPU {CPU_KIND} (torch capability {out['torch_capability']}), matmul {out['matmul_gflops_1thread']} GFLOP/s")
    print("one block's attention forward + backward, CPU ms:", out["ms"], "| x eager:", out["x_eager"])
    if "inductor_first_call" in out:
        print("torch.compile's first call (the compile):", out["inductor_first_call"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
