"""A training's floats as one short hash: train the default settings for --steps steps at one torch thread
and print the sha256 (first 16 hex digits) of every parameter's bytes in model.parameters() order.

    python bench/param_hash.py [--steps 300] [--full]

A change that must not move a training's numbers (an optimizer rewritten, an allocator setting) gives the
same hash before and after; run it on both trees (e.g. `git archive` of the old commit) on one machine.
By default the run is RunConfig.of() (800 steps planned, so the last 300 decay) stopped after
--steps; --full trains a run of exactly --steps steps instead (its schedule decays over those).
The run takes the kernel the lab trains with (core.model.attention.kernel_choice; ATTENTION_LAB_ATTENTION=eager
or cpp forces one), and the hash depends on it and on the CPU's model (the compiled kernel is built
-march=native, MKL picks its code path by the model): compare hashes from one machine. bench/README.md
("Reproducible floats") holds the ones measured, with their host.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--full", action="store_true", help="a run of exactly --steps steps (its own schedule)")
    args = ap.parse_args(argv)
    import torch

    from core.training.run_config import RunConfig
    from core.training.trainer import Trainer

    torch.set_num_threads(1)
    settings = RunConfig.of()
    if args.full:
        settings = settings.with_settings(steps=args.steps)
    trainer = Trainer(*settings.configs())
    trainer.run(args.steps)
    data = b"".join(p.detach().contiguous().numpy().tobytes() for p in trainer.model.parameters())
    print(hashlib.sha256(data).hexdigest()[:16], f"({trainer.step} steps, {type(trainer.optimizer).__module__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
