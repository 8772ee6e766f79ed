"""The CPU a training runs on: its kind (AVX-512, AVX2, SSE4, ARM), the flags the compiled attention is
built with for it, and the emulation of another kind on this host.

    kind()              "AVX-512", "AVX2", "SSE4", "ARM (NEON)" or the machine's name
    march()             g++'s target flags for the compiled attention: ("-march=native",) here
    emulate("avx2")     the environment that makes a new process behave as an AVX2 machine

A figure measured on one kind holds there only (the compiled attention's vectors are one register
wide, torch's kernels and MKL's products pick their instruction set at run time), so bench/ reports
the kind beside every timing and measures the others by emulation: ATTENTION_LAB_CPU builds the
compiled attention for that kind (-march=x86-64-v3 without AVX-512 for AVX2) and torch's own switches
(ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA) hold its kernels to the same set. The
torch switches are read when torch loads, so an emulation applies to a process started with them.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

ENV = "ATTENTION_LAB_CPU"

# kind -> (its name, g++'s flags, torch's switches)
EMULATIONS = {
    "avx2": ("AVX2", ("-march=x86-64-v3", "-mno-avx512f"),
             {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}),
    "sse4": ("SSE4", ("-march=x86-64-v2",),
             {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}),
}


def emulated() -> str | None:
    """The kind $ATTENTION_LAB_CPU emulates ('avx2', 'sse4'), or None (an unknown value is ignored)."""
    value = os.environ.get(ENV, "").strip().lower()
    return value if value in EMULATIONS else None


def flags_line() -> str:
    """The CPU's feature flags as /proc/cpuinfo lists them (x86 'flags', ARM 'Features')."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def native_kind() -> str:
    """This host's kind, emulation aside."""
    if platform.machine().lower() in ("aarch64", "arm64"):
        return "ARM (NEON)"
    flags = set(flags_line().split())
    if "avx512f" in flags:
        return "AVX-512"
    if "avx2" in flags:
        return "AVX2"
    if "sse4_2" in flags:
        return "SSE4"
    return platform.machine() or "unknown"


def kind() -> str:
    """The kind this process behaves as: the emulated one, else the host's."""
    e = emulated()
    return EMULATIONS[e][0] if e else native_kind()


def march() -> tuple[str, ...]:
    """g++'s target flags for the compiled attention in this process."""
    e = emulated()
    return EMULATIONS[e][1] if e else ("-march=native",)


def emulate(name: str) -> dict[str, str]:
    """The environment variables that make a process started with them an emulated `name` machine
    ('avx2' or 'sse4'); {} for 'native'."""
    if name == "native":
        return {}
    if name not in EMULATIONS:
        raise ValueError(f"no emulation {name!r}: choose native, {', '.join(EMULATIONS)}")
    return {ENV: name, **EMULATIONS[name][2]}


# How far a shipped checkpoint's figures may move when it is retrained on another CPU kind (measured by
# bench/cpu_reproduce.py, its figures in bench/README.md's current-figures table; pinned by
# tests/test_cpu_kinds.py):
# the drop step is the same; core.report's copy metrics, head scores and OV copy scores within these.
# Copy metrics moved at most 0.011 on an Intel AVX-512 host emulating AVX2, 0.0203 on an AMD EPYC one
# (variable-period-2block's first-copy loss; MKL takes other code paths on AMD): 0.03 holds both.
TOLERANCE = {"metric": 0.03, "head_score": 0.05, "ov_score": 0.15}
OV_SCORES = ("ov_diag_top1", "ov_copying_eig")
