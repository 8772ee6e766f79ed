"""The machine's speed, printed beside every timing in bench/ (the host's matmul rate moves threefold
between days): the one-thread float32 1024 x 1024 product rate, mean over `repeats` after a warm-up.
time_to_induction.matmul_peak is the *best* single product instead: the bound a training is held to."""
from __future__ import annotations

import time


def matmul_rate(n: int = 1024, repeats: int = 20, threads: int = 1) -> float:
    """Mean float32 GFLOP/s of an n x n by n x n product at `threads` torch threads."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(n, n)
    b = a.clone()
    for _ in range(3):
        a @ b
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return repeats * 2 * n ** 3 / (time.perf_counter() - t0) / 1e9
