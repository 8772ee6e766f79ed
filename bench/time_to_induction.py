"""Time to induction: how long the default live training takes to get the later copies right.

    python bench/time_to_induction.py [--seeds 5] [--cap 3000] [--threshold 0.5] [--threads N] [--json]

Per seed (0..N-1) it trains the default settings (core.training.presets.DEFAULT_PRESET, which is what the
Train page starts with) with the same Trainer, its logs every 25 steps included, and records the
first stop check (core.training.trainer.Trainer.run with stop_at_loss) whose loss_later_copies on the fixed
evaluation batch (default task, length 96) is below the threshold: the step count, and the wall
seconds from the start of training to that step *including* every log, head-score evaluation and
stop check on the way (model construction and imports not included). A seed that has not got there
by --cap steps counts as failed.

What differs from the page: the page's training runs in a worker process (core.pool.worker), one step at
a time with no stop checks, and shows the drop when a logged row (every 25 steps) is below ln V / 2;
bench/load.py times that, in a browser. This script times the training alone, stopping at the first
stop check below the threshold.

It also measures the machine: the best float32 matrix-multiply rate of torch at this thread count
(a 1024x1024 by 1024x1024 product, best of several), the floating-point work of one training step
of the default model in its plain formulation (step_flops) and so the least
time a step could take; ms per step is then reported as a share of that bound.
Timings on a shared machine are noisy: the medians are the figures to quote.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import as_cpu  # noqa: E402

CPU_KIND = as_cpu() if __name__ == "__main__" else None
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from core.model.task import sample_batch  # noqa: E402
from core.training.presets import DEFAULT_PRESET, get_preset  # noqa: E402
from core.training.trainer import Trainer  # noqa: E402


def matmul_peak() -> float:
    """Best observed float32 GFLOP/s of a 1024 x 1024 by 1024 x 1024 product at torch's thread count, of 12."""
    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(12):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def step_flops(done: bool = False) -> float:
    """Floating-point operations of one training step (forward + backward) at the default preset's settings.

    The bound's yardstick is the model's plain formulation (done=False): every projection over the
    B T rows of its stream, as run_with_hooks computes it. The training forward does less (done=True):
    block 0 reads the embedding and takes its projection over the vocabulary (core.model.attention.project).
    FlopCounterMode counts the matrix products other than the attention's; the attention's are always
    counted by hand, on the whole T x T (what the bound has always assumed, whether a kernel skips the
    masked half or not): per block 2 B H T^2 d_head each for q k^T and A v in the forward pass, twice
    that in the backward pass.
    """
    from torch.utils.flop_counter import FlopCounterMode

    p = get_preset(DEFAULT_PRESET)
    trainer = Trainer(p.model, p.task, p.train)
    tokens, _ = sample_batch(trainer.train_task, p.train.batch_size, p.model.vocab_size,
                             torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        logits = trainer.model(tokens) if done else trainer.model.run_with_hooks(tokens)[0]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
    counts = counter.get_flop_counts().get("Global", {})
    total = float(sum(n for op, n in counts.items() if "bmm" not in str(op) and "scaled_dot_product" not in str(op)))
    B, T = tokens.shape
    H, dh = p.model.n_heads, p.model.d_head
    total += p.model.n_layers * 3 * 2 * (2 * B * H * T * T * dh)
    return total


def time_seed(seed: int, threshold: float, cap: int) -> dict:
    """Train one seed of the default preset to the threshold in chunks of 25 steps; steps, wall seconds, ms per
    step."""
    p = get_preset(DEFAULT_PRESET)
    import dataclasses

    train = dataclasses.replace(p.train, seed=seed, steps=max(cap, 1))
    trainer = Trainer(p.model, p.task, train)
    t0 = time.perf_counter()
    while not trainer.done and not trainer.stopped_early:
        trainer.run(25, stop_at_loss=threshold)
    wall = time.perf_counter() - t0
    reached = trainer.stopped_early
    return {
        "seed": seed,
        "reached": reached,
        "steps": trainer.step if reached else None,
        "seconds": round(wall, 2) if reached else None,
        "steps_run": trainer.step,
        "wall_seconds": round(wall, 2),
        "train_seconds": round(trainer.seconds, 2),
        "ms_per_step": round(1000 * trainer.seconds / max(trainer.step, 1), 2),
        "ms_per_step_wall": round(1000 * wall / max(trainer.step, 1), 2),
        "stop_checks": len(trainer.stop_checks),
        "logs": len(trainer.history),
        "final_loss_later_copies": round(trainer.history[-1]["loss_later_copies"], 4),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    ap.add_argument("--cap", type=int, default=3000, help="give up on a seed after this many steps")
    ap.add_argument("--threshold", type=float, default=0.5, help="loss_later_copies to reach (nats)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    ap.add_argument("--budget", type=float, default=12.0, help="seconds the median should stay within")
    ap.add_argument("--cpu", default="native", choices=("native", "avx2", "sse4"),
                    help="emulate this CPU kind (core.model.cpu; AVX-512 hosts can emulate AVX2 and SSE4)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    peak = matmul_peak()
    flops = step_flops()
    floor_ms = 1000 * flops / (peak * 1e9)
    runs = []
    for seed in range(args.seeds):
        runs.append(time_seed(seed, args.threshold, args.cap))
        if not args.json:
            r = runs[-1]
            print(f"seed {seed}: " + (f"{r['steps']} steps, {r['seconds']:.2f} s" if r["reached"] else
                                      f"not below {args.threshold} in {args.cap} steps") +
                  f"  ({r['ms_per_step']:.1f} ms/step training, {r['ms_per_step_wall']:.1f} ms/step with "
                  f"evaluation; {r['logs']} logs, {r['stop_checks']} stop checks)", flush=True)
    reached = [r for r in runs if r["reached"]]
    ms = statistics.median(r["ms_per_step"] for r in runs)
    ms_wall = statistics.median(r["ms_per_step_wall"] for r in runs)
    out = {
        "cpu": CPU_KIND,
        "preset": DEFAULT_PRESET,
        "settings": get_preset(DEFAULT_PRESET).train.to_dict(),
        "threshold": args.threshold,
        "cap": args.cap,
        "threads": torch.get_num_threads(),
        "seeds": args.seeds,
        "reached": len(reached),
        "all_reached": len(reached) == len(runs),
        "median_seconds": statistics.median(r["seconds"] for r in reached) if len(reached) == len(runs) else None,
        "median_steps": statistics.median(r["steps"] for r in reached) if len(reached) == len(runs) else None,
        "within_budget": None,
        "ms_per_step": ms,
        "ms_per_step_wall": ms_wall,
        "matmul_peak_gflops": round(peak, 1),
        "step_gflop": round(flops / 1e9, 3),
        "step_floor_ms": round(floor_ms, 2),
        "share_of_peak": round(floor_ms / ms, 3),
        "runs": runs,
    }
    if out["median_seconds"] is not None:
        out["within_budget"] = out["median_seconds"] <= args.budget
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        med = (f"median {out['median_seconds']:.2f} s, {out['median_steps']} steps" if out["median_seconds"] is not None
               else "median undefined (a seed failed)")
        print(f"{len(reached)}/{len(runs)} seeds below {args.threshold} within {args.cap} steps; {med} "
              f"(budget {args.budget:.0f} s: {'met' if out['within_budget'] else 'not met'})")
        print(f"step: {out['step_gflop']:.2f} GFLOP; matmul peak {peak:.0f} GFLOP/s at {out['threads']} threads "
              f"-> floor {floor_ms:.1f} ms; measured {ms:.1f} ms/step training ({ms_wall:.1f} with evaluation) "
              f"= {100 * out['share_of_peak']:.0f}% of peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
