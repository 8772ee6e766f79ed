"""A worker's checkpoint as one short hash: core.pool.worker.train runs the default settings in this process
(one torch thread, its messages read on a thread of their own, as the pool reads them) and this prints the
sha256 of the "done" message's checkpoint bytes, the torch.save output the server receives. The trainer's
clock is replaced by one that ticks 50 ms a reading, so the history's "seconds" do not differ between runs.

    python bench/checkpoint_hash.py [--steps 800] [--budget MB] [--root TREE]

A change to how a worker holds its snapshots must not change these bytes: run it on both trees (--root:
another checkout, e.g. /work/main) on one machine (bench/README.md, "Reproducible floats"). --budget
lowers the live snapshot budget (core.model.snapshots.MEMORY_BUDGET) so a short run thins its snapshots
while it trains, as a long one does at the default 30 MB. Prints the CPU-seconds of the run and the
one-thread 1024² matmul rate beside them.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import threading
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=800, help="the run's length (TrainConfig.steps)")
    ap.add_argument("--budget", type=float, help="live snapshot budget in MB (default: the tree's own)")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent), help="the tree to run")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.root)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import multiprocessing as mp

    import torch
    from machine import matmul_rate

    import core.model.snapshots as snapshots
    import core.training.trainer as trainer_module
    from core.pool import worker
    from core.training.run_config import RunConfig

    class Clock:  # the history's "seconds" are wall time: a clock that ticks 50 ms a reading makes them repeatable
        now = 0.0

        @classmethod
        def perf_counter(cls) -> float:
            cls.now += 0.05
            return cls.now

    trainer_module.time = Clock
    if args.budget is not None:
        init = snapshots.SnapshotRecorder.__init__
        init.__defaults__ = (int(args.budget * 2**20), *init.__defaults__[1:])
    settings = RunConfig.of(steps=args.steps)
    ours, theirs = mp.Pipe(duplex=True)
    done = {}

    def read():
        while True:
            try:
                message = ours.recv()
            except EOFError:
                return
            if message[0] in ("done", "error"):
                done["message"] = message

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cpu = time.process_time()
    worker.train(theirs, settings, 1)
    cpu = time.process_time() - cpu
    reader.join(timeout=30)
    message = done.get("message")
    if message is None or message[0] != "done" or message[-1] is None:
        print("no checkpoint:", message)
        return 1
    data = message[-1]
    print(f"{hashlib.sha256(data).hexdigest()[:16]}  {len(data)} bytes, {message[2]} steps, {message[1]}; "
          f"{cpu:.1f} CPU-s (with the reader); matmul {matmul_rate():.1f} GFLOP/s; tree {args.root}; "
          f"torch {torch.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
