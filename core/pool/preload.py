"""What the forkserver imports before it forks a worker (core.pool.launch.context preloads this
module): the worker's code, and everything a training touches only once it runs, so that every
worker shares one copy instead of making its own.

Measured (bench/README.md, "A training process's memory"): the first forward and backward set up about 20 MB. So this
module trains a tiny model for one step, once, here. (The Trainer's optimizer is core.training.adamw,
not torch.optim.AdamW, whose first construction imported about 830 modules, torch._dynamo, sympy and
mpmath, 72 MB that this warm-up used to load for the workers; and no module a training imports loads
pandas: bench/README.md, "A training process's memory".) Then it freezes the garbage collector's view of every object
made so far (gc.freeze): a worker's collections never walk them, so they are never written to and
never copied into the worker (fork shares memory until a page is written; a collection writes to
every object it walks). That saves about 40 MB more per worker. Last, the warm-up's freed heap goes
back to the system: a worker maps every page the forkserver holds, and PSS charges it half of each
while they share it.

Importing this module has these effects on purpose; only the forkserver imports it. Nothing here
draws from the global random generator a training uses: the tiny Trainer seeds its own.
"""
from __future__ import annotations

import gc

import torch

from core.pool import worker  # noqa: F401 -- the worker's code, imported once for every fork
from core.training.heap import hand_back_free_memory
from core.training.run_config import RunConfig
from core.training.trainer import Trainer


def warm() -> None:
    """One step of a tiny training at one torch thread (no OpenMP team exists before a fork)."""
    torch.set_num_threads(1)
    tiny = RunConfig.of(n_layers=1, period_min=4, period_max=8, seq_len=24, batch_size=4, steps=2)
    trainer = Trainer(*tiny.configs())
    trainer.run(1)
    worker.saved_checkpoint(trainer)


warm()
gc.collect()
gc.freeze()
hand_back_free_memory()
