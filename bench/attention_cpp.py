"""The compiled causal attention (core.model.attention_cpp) against the eager path (core.model.hooks.attend).

    nice -n 5 python bench/attention_cpp.py [--steps 300] [--json]

One torch thread, the heap kept as in the pool's workers (core.training.heap), CPU time throughout:
(a) kernel: forward + backward of one block's attention at the default sizes (B 32, T 96, 4 heads,
    d_head 32), eager and compiled alternately, medians over rounds;
(b) in situ: two Trainers of the default Train-page settings and the same seed stepped alternately in
    this process, one with ATTENTION_LAB_ATTENTION=cpp: CPU ms a step (median; a log step counts as
    a step with its log, the median leaves them out) and the step's ratio to its bound
    (time_to_induction.step_flops at the best 1024^2 product rate, matmul_peak);
(c) the build: CPU-seconds of the compiler at first use (into an empty $ATTENTION_LAB_CACHE/ext) and
    of a load from that folder in a fresh process;
(d) drift: after --steps interleaved steps, the largest parameter difference between the two
    Trainers and each one's drop step (core.training.live.drop_step on its logs);
(e) where the compiled attention's time goes in situ: during (b)'s compiled steps, the
    CPU ms a step inside the kernel's forward and backward calls (ctypes, all blocks) and in the
    autograd.Function around them (its forward and backward minus the calls: allocations, checks,
    saving, ctypes conversion), medians over the steps.
The one-thread 1024^2 matmul rate (bench/machine.matmul_rate, mean) is printed beside every timing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine import as_cpu  # noqa: E402

CPU_KIND = as_cpu() if __name__ == "__main__" else None
import torch  # noqa: E402
from machine import matmul_rate  # noqa: E402
from time_to_induction import matmul_peak, step_flops  # noqa: E402

from core.model import attention_cpp  # noqa: E402
from core.model.attention import measure_kernels  # noqa: E402
from core.training.heap import keep_freed_memory  # noqa: E402
from core.training.live import drop_step  # noqa: E402
from core.training.run_config import RunConfig  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402

SWITCH = attention_cpp.ENV_SWITCH


def build_cost() -> dict:
    """(c): the compiler's CPU-seconds into an empty build folder, then a fresh process's load from it."""
    with tempfile.TemporaryDirectory(prefix="attention-cpp-bench-") as tmp:
        env = dict(os.environ, ATTENTION_LAB_CACHE=tmp, PYTHONPATH=str(ROOT))
        code = ("import time, resource; from core.model import attention_cpp as a; c = time.process_time(); "
                "b = a.load(); r = resource.getrusage(resource.RUSAGE_CHILDREN); "
                "print(b.compiled, b.cpu_seconds, time.process_time() - c, r.ru_utime + r.ru_stime, repr(b.reason))")
        out = []
        for _ in range(2):
            line = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True).stdout.split(maxsplit=4)
            out.append({"compiled": line[0] == "True", "compiler_cpu_s": round(float(line[1]), 3),
                        "load_cpu_s": round(float(line[2]), 4), "reason": line[4].strip()})
    return {"first_use": out[0], "cached": out[1]}


def kernel_ms() -> dict:
    """(a): forward + backward of one block's attention, eager and compiled alternately (the measurement
    core.model.attention.kernel_choice makes, with more rounds)."""
    ms = measure_kernels((32, 96, 4, 32), rounds=5, n=15)
    return {"eager": round(ms["eager"], 2), "cpp": round(ms["compiled"], 2)}


class _Parts:
    """(e): CPU seconds inside the kernel's calls and inside CompiledCausalAttention's forward and
    backward, accumulated while installed (the library's functions and the Function's methods wrapped)."""

    def __init__(self):
        self.t = dict.fromkeys(("kernel_fwd", "kernel_bwd", "function_fwd", "function_bwd"), 0.0)
        self.on = False

    def _timed(self, key, fn):
        def call(*a):
            if not self.on:
                return fn(*a)
            c = time.process_time()
            try:
                return fn(*a)
            finally:
                self.t[key] += time.process_time() - c
        return call

    def install(self):
        lib, F = attention_cpp._LIB, attention_cpp.CompiledCausalAttention
        self.saved = (lib, F.forward, F.backward)
        proxy = type("TimedLib", (), {})()
        for dt in ("f32", "f64"):
            setattr(proxy, f"attn_forward_{dt}", self._timed("kernel_fwd", getattr(lib, f"attn_forward_{dt}")))
            setattr(proxy, f"attn_backward_{dt}", self._timed("kernel_bwd", getattr(lib, f"attn_backward_{dt}")))
        attention_cpp._LIB = proxy
        F.forward = staticmethod(self._timed("function_fwd", F.forward))
        F.backward = staticmethod(self._timed("function_bwd", F.backward))

    def remove(self):
        attention_cpp._LIB, F = self.saved[0], attention_cpp.CompiledCausalAttention
        F.forward, F.backward = staticmethod(self.saved[1]), staticmethod(self.saved[2])

    def take(self) -> dict:
        out, self.t = self.t, dict.fromkeys(self.t, 0.0)
        return out


def in_situ(steps: int) -> dict:
    """(b), (d) and (e): two Trainers of the same seed, stepped alternately, one with the compiled kernel."""
    model_cfg, task_cfg, train_cfg = RunConfig.of().configs()
    trainers, cpu, parts = {}, {"eager": [], "cpp": []}, []
    timer = _Parts()
    timer.install()
    for name in cpu:
        os.environ[SWITCH] = name
        trainers[name] = Trainer(model_cfg, task_cfg, train_cfg)
    for _ in range(steps):
        for name, trainer in trainers.items():
            os.environ[SWITCH] = name
            timer.on = name == "cpp"
            c = time.process_time()
            trainer.run(1)
            cpu[name].append(1000 * (time.process_time() - c))
            timer.on = False
            if name == "cpp":
                parts.append(timer.take())
    timer.remove()
    os.environ.pop(SWITCH, None)
    def med(f) -> float:
        return statistics.median(1000 * f(p) for p in parts[10:])

    where = {"kernel_fwd_ms": round(med(lambda p: p["kernel_fwd"]), 2),
             "kernel_bwd_ms": round(med(lambda p: p["kernel_bwd"]), 2),
             "wrapper_fwd_ms": round(med(lambda p: p["function_fwd"] - p["kernel_fwd"]), 3),
             "wrapper_bwd_ms": round(med(lambda p: p["function_bwd"] - p["kernel_bwd"]), 3)}
    params = {name: {n: p.detach() for n, p in t.model.named_parameters()} for name, t in trainers.items()}
    diff = max(float((p - params["cpp"][n]).abs().max()) for n, p in params["eager"].items())
    return {"ms_per_step": {name: round(statistics.median(ts[10:]), 2) for name, ts in cpu.items()},
            "cpp_attention_per_step": where,
            "param_max_abs_diff": diff,
            "drop_step": {name: drop_step(t.history, model_cfg.vocab_size) for name, t in trainers.items()},
            "later_copy_loss_at_end": {name: round(t.history[-1]["loss_later_copies"], 4)
                                       for name, t in trainers.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--cpu", default="native", choices=("native", "avx2", "sse4"),
                    help="emulate this CPU kind (core.model.cpu; AVX-512 hosts can emulate AVX2 and SSE4)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    keep_freed_memory()
    out = {"cpu": CPU_KIND, "build": build_cost()}
    if not attention_cpp.available():
        print(json.dumps({**out, "unavailable": attention_cpp.reason()}, indent=1))
        return 1
    flops = step_flops()
    rates = [matmul_rate()]
    out["kernel_ms"] = kernel_ms()
    rates.append(matmul_rate())
    peak = matmul_peak()
    situ = in_situ(args.steps)
    peak = max(peak, matmul_peak())
    rates.append(matmul_rate())
    bound_ms = flops / peak / 1e6
    situ["step_bound_ms"] = round(bound_ms, 2)
    situ["x_bound"] = {name: round(ms / bound_ms, 2) for name, ms in situ["ms_per_step"].items()}
    situ["matmul_peak_gflops"] = round(peak, 1)
    out.update(in_situ=situ, step_gflop=round(flops / 1e9, 3), matmul_gflops_1thread=[round(r, 1) for r in rates])
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    b = out["build"]
    print(f"CPU {CPU_KIND}")
    print(f"build: first use {b['first_use']['compiler_cpu_s']} compiler CPU-s (compiled {b['first_use']['compiled']}),"
          f" cached load {b['cached']['load_cpu_s']} CPU-s (compiled {b['cached']['compiled']})")
    print(f"(a) one block's attention, forward + backward, CPU ms: {out['kernel_ms']} "
          f"(matmul {rates[0]:.1f} / {rates[1]:.1f} GFLOP/s)")
    s = situ
    print(f"(b) in situ, {args.steps} interleaved steps: CPU ms a step {s['ms_per_step']}, "
          f"bound {s['step_bound_ms']} ms"
          f" ({out['step_gflop']} GFLOP at the best product {s['matmul_peak_gflops']} GFLOP/s): x bound {s['x_bound']}"
          f" (matmul mean {rates[1]:.1f} / {rates[2]:.1f} GFLOP/s)")
    w = s["cpp_attention_per_step"]
    print(f"(e) the compiled attention in situ, CPU ms a step (all blocks): kernel forward {w['kernel_fwd_ms']}, "
          f"backward {w['kernel_bwd_ms']}; the autograd.Function around them: forward {w['wrapper_fwd_ms']}, "
          f"backward {w['wrapper_bwd_ms']}")
    print(f"(d) after {args.steps} steps: parameters differ by at most {s['param_max_abs_diff']:.3g}; "
          f"drop step {s['drop_step']}; later-copy loss {s['later_copy_loss_at_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
