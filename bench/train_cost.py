"""A training's CPU-seconds to the drop against the one-thread matmul bound.

    nice -n 5 python bench/train_cost.py [--seeds 3] [--json]

Per seed (0..N-1), the default Train-page settings (RunConfig.of(), seed replaced):
- pool: the page's own path. A RunPool(capacity=1) worker process (one torch thread, as the page's)
  trains until its logged rows show the drop (core.training.live.drop_step: the first logged
  later-copy loss below ln V / 2, when the page puts the drop note up); the worker's CPU-seconds from
  its start (/proc/<pid>/stat: imports, Trainer, every log, frame and message included) are read then.
- bare: the same Trainer in this process, one step at a time, to the same drop: process CPU-seconds of
  the steps and of the logs apart.
The bound is the drop step times the step's floating-point work in the model's plain formulation
(bench/time_to_induction.step_flops, forward and backward) at the best one-thread 1024^2 float32 matmul
rate (time_to_induction.matmul_peak), measured just before and just after each run (the better of the
two). The training does a quarter less work than that formulation (block 0's projection taken over the
vocabulary); the bound of the work it does is reported beside. A step is then split into matrix
products, attention, optimizer and the rest, each replayed alone at the step's shapes (step_breakdown).
The machine is shared: CPU time (not wall) is what it counts, and the medians are the figures to quote.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import as_cpu  # noqa: E402

CPU_KIND = as_cpu() if __name__ == "__main__" else None
import torch  # noqa: E402
from time_to_induction import matmul_peak, step_flops  # noqa: E402

from core.pool.runs import RunPool  # noqa: E402
from core.training.heap import keep_freed_memory  # noqa: E402
from core.training.live import drop_step  # noqa: E402
from core.training.run_config import RunConfig  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402

CAP = 800  # the default run's length: a seed without a drop by then counts as failed


def proc_cpu(pid: int) -> float:
    """utime + stime of a live process, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pool_run(settings: RunConfig, vocab: int) -> dict:
    """The page's path: CPU-seconds of the worker process until its rows show the drop."""
    pool = RunPool(capacity=1)
    try:
        run = pool.start(settings, owner="bench", private=True)
        t0 = time.perf_counter()
        cpu, step = None, None
        while time.perf_counter() - t0 < 600.0:
            pid = run.pid
            step = drop_step(run.history(), vocab)
            if pid and step is not None:
                cpu = proc_cpu(pid)
                break
            if not run.active and run.result is not None:
                break
            time.sleep(0.02)
        pool.stop(run)
        return {"drop_step": step, "cpu": cpu, "wall": time.perf_counter() - t0}
    finally:
        pool.shutdown()


def bare_run(settings: RunConfig) -> dict:
    """The same training in this process, one step at a time: CPU-seconds of steps and of logs. The
    heap is kept between steps as in the pool's workers (core.training.heap)."""
    keep_freed_memory()
    model_cfg, task_cfg, train_cfg = settings.configs()
    c0 = time.process_time()
    trainer = Trainer(model_cfg, task_cfg, train_cfg)
    log_cpu = [time.process_time() - c0]  # the Trainer's start includes the step-0 log
    log = trainer._log

    def timed_log():
        t = time.process_time()
        row = log()
        log_cpu.append(time.process_time() - t)
        return row

    trainer._log = timed_log
    step = None
    while not trainer.done:
        trainer.run(1)
        step = drop_step(trainer.history, model_cfg.vocab_size)
        if step is not None:
            break
    total = time.process_time() - c0
    return {"drop_step": step, "cpu": total, "logs_cpu": sum(log_cpu), "logs": len(log_cpu),
            "ms_per_log": 1000 * statistics.median(log_cpu[1:] or log_cpu)}


def _median_ms(fn) -> float:
    """Median CPU ms of 15 calls of fn, after one."""
    fn()
    times = []
    for _ in range(15):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return 1000 * statistics.median(times)


def step_breakdown(settings: RunConfig) -> dict:
    """ms of CPU per training step by part, each part replayed alone at the step's shapes (median of 15;
    a profiler's per-op overhead would swamp the small ops): matrix products (every mm/addmm of a step,
    listed once by torch.profiler), attention (the kernel this process trains with, forward + backward,
    core.model.attention.measure_kernels), optimizer (AdamW step + zero_grad); "other" is the step less
    these (loss, embedding, residual adds, layout copies, autograd bookkeeping)."""
    from torch.profiler import profile

    from core.model.attention import kernel_choice, measure_kernels

    model_cfg, task_cfg, train_cfg = settings.configs()
    trainer = Trainer(model_cfg, task_cfg, train_cfg)
    for _ in range(3):
        trainer.train_step()
    step = _median_ms(trainer.train_step)
    with profile(record_shapes=True) as prof:
        trainer.train_step()
    shapes = [e.input_shapes for e in prof.events() if e.name in ("aten::mm", "aten::addmm")]
    mats = []
    for s in shapes:
        a, b = (s[1], s[2]) if len(s) == 3 else (s[0], s[1])  # addmm(bias, a, b)
        mats.append((torch.randn(a), torch.randn(b)))
    products = _median_ms(lambda: [x @ y for x, y in mats])
    B, T = train_cfg.batch_size, train_cfg.train_task(task_cfg).seq_len
    H, dh, L = model_cfg.n_heads, model_cfg.d_head, model_cfg.n_layers
    kernels = measure_kernels((B, T, H, dh), rounds=3, n=5)
    parts = {"matrix products": products, "attention": L * kernels[kernel_choice().kernel]}
    opt = trainer.optimizer

    def optimizer():
        opt.step()
        for p in trainer.model.parameters():
            p.grad = torch.zeros_like(p) if p.grad is None else p.grad
    parts["optimizer"] = _median_ms(optimizer) if opt is not None else 0.0
    parts["other"] = step - sum(parts.values())
    parts["step"] = step
    return {k: round(v, 2) for k, v in parts.items()}


def summary(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cpu", default="native", choices=("native", "avx2", "sse4"),
                    help="emulate this CPU kind (core.model.cpu; AVX-512 hosts can emulate AVX2 and SSE4)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    base = RunConfig.of()
    vocab = base.configs()[0].vocab_size
    flops, done = step_flops(), step_flops(done=True)
    rates = [matmul_peak()]
    rows = []
    for seed in range(args.seeds):
        s = base.with_settings(seed=seed, steps=CAP)
        pool = pool_run(s, vocab)
        rates.append(matmul_peak())
        bare = bare_run(s)
        rates.append(matmul_peak())
        # each run against the better of the rates measured just before and just after it
        pool["rate"], bare["rate"] = max(rates[-3:-1]), max(rates[-2:])
        rows.append({"seed": seed, "pool": pool, "bare": bare})
        if not args.json:
            print(f"seed {seed}: drop at step {pool['drop_step']} (pool) / {bare['drop_step']} (bare); "
                  f"pool worker {pool['cpu']:.2f} CPU-s, bare loop {bare['cpu']:.2f} CPU-s "
                  f"(logs {bare['logs_cpu']:.2f} s over {bare['logs']}, {bare['ms_per_log']:.1f} ms each); "
                  f"bound {(pool['drop_step'] or 0) * flops / pool['rate'] / 1e9:.2f} s at {pool['rate']:.0f} GFLOP/s",
                  flush=True)
    breakdown = step_breakdown(base.with_settings(steps=CAP))
    rates.append(matmul_peak())
    from core.model.attention import kernel_choice

    out = {"cpu": CPU_KIND, "kernel": kernel_choice().kernel,
           "matmul_gflops_1thread": [round(r, 1) for r in rates], "step_gflop": round(flops / 1e9, 3),
           "step_gflop_done": round(done / 1e9, 3),
           "seeds": rows, "step_ms_breakdown": breakdown,
           "breakdown_rate": round(max(rates[-2:]), 1)}
    for path in ("pool", "bare"):
        ratios = [r[path]["cpu"] / (r[path]["drop_step"] * flops / r[path]["rate"] / 1e9) for r in rows
                  if r[path]["cpu"] is not None and r[path]["drop_step"]]
        out[f"{path}_cpu_seconds"] = summary([r[path]["cpu"] for r in rows])
        out[f"{path}_over_bound"] = summary(ratios)
        out[f"{path}_over_done_bound"] = summary([r * flops / done for r in ratios])
    out["logs_share_of_bare"] = summary([r["bare"]["logs_cpu"] / r["bare"]["cpu"] for r in rows])
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"CPU {CPU_KIND}, attention kernel {out['kernel']} ({kernel_choice().why}); "
          f"one-thread 1024^2 matmul, GFLOP/s, before and after each run: {out['matmul_gflops_1thread']}; "
          f"a step is {flops / 1e9:.2f} GFLOP in the plain formulation, {done / 1e9:.2f} as the training does it")
    for path in ("pool", "bare"):
        cs, rs = out[f"{path}_cpu_seconds"], out[f"{path}_over_bound"]
        print(f"{path}: CPU-seconds to the drop median {cs['median']} (range {cs['min']}-{cs['max']}); "
              f"{rs['median']}x the bound (range {rs['min']}-{rs['max']}); "
              f"{out[f'{path}_over_done_bound']['median']}x the bound of the work done")
    ls = out["logs_share_of_bare"]
    print(f"logs: {ls['median']:.1%} of the bare run (range {ls['min']:.1%}-{ls['max']:.1%})")
    print(f"one step, CPU ms by part (each replayed alone; matmul {out['breakdown_rate']} GFLOP/s, bound "
          f"{flops / max(rates[-2:]) / 1e6:.1f} ms):", json.dumps(breakdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
