"""core.training.heap: a training process's malloc keeps the memory a step frees, so the next step
reuses it instead of asking the system again.

Run in a bare interpreter each (the settings are process-wide): allocate and free 16 MB in 4 MB
blocks, touching every page, as a training step's tensors do. glibc's default trims the freed blocks
off its heap, so every round faults all of its pages in again; after keep_freed_memory() none."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

ROUNDS = textwrap.dedent("""
    import resource, sys
    from core.training import heap
    if sys.argv[1] == "keep":
        assert heap.keep_freed_memory()
    n = 4 << 20

    def step():
        blocks = [bytearray(n) for _ in range(4)]
        for b in blocks:
            b[::4096] = b"x" * len(range(0, n, 4096))

    for _ in range(3):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        step()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
""")


def faults_per_round(*args: str) -> float:
    out = subprocess.run([sys.executable, "-c", ROUNDS, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    return float(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_kept_heap_faults_nothing_in_again():
    pages = (16 << 20) // 4096
    assert faults_per_round("default") > 0.9 * pages  # glibc trims, the next round faults it all in
    assert faults_per_round("keep") < 0.01 * pages


def test_heap_module_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", "import sys, core.training.heap; print('torch' in sys.modules)"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


MATMULS = textwrap.dedent("""
    import ctypes
    import torch

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2

    def in_use():
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd

    torch.set_num_threads(2)
    a, b = torch.randn(3072, 128), torch.randn(128, 384)  # a default step's projection shapes
    before = in_use()
    for _ in range(3):
        c = a @ b
        d = c.T @ a
    del c, d
    print((in_use() - before) / 2**20)
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_the_training_environment_keeps_mkl_from_holding_buffers():
    """With core.training.heap.TRAINING_ENV, the heap still in use after two-thread matmuls is what
    they returned (nothing); without it MKL may keep buffers of its own, how many depends on the CPU's
    code path (MKL held 34 MB after a two-thread step on an Intel host, 1.2 MB on an AMD EPYC:
    bench/README.md "A training process's memory")."""
    import os

    import torch

    from core.training.heap import TRAINING_ENV

    if not torch.backends.mkl.is_available():
        pytest.skip("torch does not use MKL here")

    def held_mb(env: dict) -> float:
        out = subprocess.run([sys.executable, "-c", MATMULS], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             check=True, env={**{k: v for k, v in os.environ.items() if k not in TRAINING_ENV}, **env})
        return float(out.stdout)

    without, with_env = held_mb({}), held_mb(TRAINING_ENV)
    assert with_env < 0.5
    assert without >= with_env - 0.1
