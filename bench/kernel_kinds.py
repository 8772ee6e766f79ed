"""The compiled attention built for every CPU kind this host can build and run, on the same inputs.

    python bench/kernel_kinds.py

Builds bench/kernel_driver.cpp (the kernel on fixed inputs: B 3, T 37, 2 heads, d_head 32, head 1
held; forward with the pattern, then backward) for this CPU (-march=native), AVX2 (x86-64-v3 without
AVX-512), SSE4 (x86-64-v2) and, where Debian's cross compiler (g++-aarch64-linux-gnu) and qemu-user are
installed, ARM (armv8-a, NEON; run under qemu-aarch64). Each prints its vector width and sums of |z|,
|g| and the pattern: the kinds must agree to float rounding (their lane-wise sums differ). A kind whose
tools are missing is skipped, saying so.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "core" / "model" / "causal_attention.cpp"
DRIVER = Path(__file__).with_name("kernel_driver.cpp")
KINDS = {"native": ("g++", ["-march=native"], None), "AVX2": ("g++", ["-march=x86-64-v3", "-mno-avx512f"], None),
         "SSE4": ("g++", ["-march=x86-64-v2"], None),
         "ARM (NEON)": ("aarch64-linux-gnu-g++", ["-march=armv8-a", "-static"], "qemu-aarch64")}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for kind, (cxx, flags, runner) in KINDS.items():
            missing = [t for t in (cxx, runner) if t and shutil.which(t) is None]
            if missing:
                print(f"{kind}: skipped ({', '.join(missing)} not installed)")
                continue
            exe = Path(tmp) / kind.split()[0]
            subprocess.run([cxx, "-O3", *flags, "-std=c++17", "-include", str(KERNEL), str(DRIVER), "-o", str(exe)],
                           check=True)
            argv = [runner, str(exe)] if runner else [str(exe)]
            out = subprocess.run(argv, capture_output=True, text=True, check=True)
            print(f"{kind}: {out.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
