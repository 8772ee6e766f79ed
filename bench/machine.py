"""The machine's speed, printed beside every timing in bench/ (the host's matmul rate moves threefold
between days): the one-thread float32 1024 x 1024 product rate, mean over 20 after a warm-up.
time_to_induction.matmul_peak is the *best* single product instead: the bound a training is held to."""
from __future__ import annotations

import time


def matmul_rate() -> float:
    """Mean float32 GFLOP/s of a 1024 x 1024 by 1024 x 1024 product at one torch thread, over 20 products."""
    import torch

    torch.set_num_threads(1)
    n, repeats = 1024, 20
    a = torch.randn(n, n)
    b = a.clone()
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * 2 * n ** 3 / (time.perf_counter() - t0) / 1e9


def as_cpu() -> str:
    """`--cpu native|avx2|sse4` for a bench script: with an emulated kind not yet in force, the script runs
    again in a new process with core.model.cpu.emulate's environment (torch reads its switches when it
    loads) and this process exits with its status. Returns the kind this process measures as
    (core.model.cpu.kind: "AVX-512", "AVX2", ...). Call before importing torch."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from core.model import cpu

    args = sys.argv[1:]
    wanted = "native"
    for i, a in enumerate(args):
        if a == "--cpu" and i + 1 < len(args):
            wanted = args[i + 1]
        elif a.startswith("--cpu="):
            wanted = a.split("=", 1)[1]
    env = cpu.emulate(wanted)
    if any(os.environ.get(k) != v for k, v in env.items()):
        raise SystemExit(subprocess.run([sys.executable, *sys.argv], env={**os.environ, **env}).returncode)
    return cpu.kind()
