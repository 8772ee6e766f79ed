"""core.training.heap: a training process's malloc keeps the memory a step frees (issue #29).

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
