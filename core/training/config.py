"""TrainConfig: how one run trains (steps, batch, optimizer, schedule, seed, logging, initial
embedding and training experiments). docs/DESIGN.md "Training" gives the defaults' reasons."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from core.model.task import LOG_SEQS, TaskConfig  # noqa: F401 -- LOG_SEQS: its public path

SCHEDULES = ("linear_decay", "cosine")
OLD_SCHEDULE_NAMES = {"constant": "linear_decay"}  # what checkpoints written before the rename store


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 800
    batch_size: int = 32
    lr: float = 1e-2
    warmup_steps: int = 0
    schedule: str = "linear_decay"  # lr held, then the last decay_steps fall linearly to 10% of lr; or "cosine"
    decay_steps: int = 300  # "linear_decay" only (0: lr constant throughout)
    weight_decay: float = 0.1  # AdamW's decoupled decay; slows the one-block offset mixture most
    seed: int = 0
    log_every: int = 25
    eval_size: int = 128
    seq_len: int = 0  # training sequence length; 0 = the task's own (evaluation always uses the task's)
    beta2: float = 0.98
    check_every: int = 25  # steps between stop checks (with stop_at_loss)
    check_margin: float = 0.1  # also check when the training batch's later-copy loss is this close
    check_gap: int = 5  # ... but at most once per check_gap steps (a loss hovering near X checked every step)
    embed_scale: float = 3.0  # W_E's initial std, in units of 1/sqrt(d_model) (see core.training.initial)
    embed_shared: float = 3.0  # norm of one random direction added to every row of W_E at the start
    # Training experiments (core.training.interventions): -1 = off. 0-based indices.
    hold_prev_head: int = -1  # this block-1 head's pattern is held on the previous position for the run
    clamp_induction_head: int = -1  # this block-2 head's pattern is clamped to the ideal induction pattern
    knockout_layer: int = -1  # with knockout_head: this head's W_O is zero and frozen for the run
    knockout_head: int = -1

    def __post_init__(self):
        if self.schedule in OLD_SCHEDULE_NAMES:  # old checkpoints stay loadable
            object.__setattr__(self, "schedule", OLD_SCHEDULE_NAMES[self.schedule])

    def validate(self) -> TrainConfig:
        if self.steps < 0:
            raise ValueError(f"steps must be 0 or more, got {self.steps}.")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive number, got {self.lr}.")
        if self.warmup_steps < 0 or self.decay_steps < 0:
            raise ValueError(f"warmup_steps and decay_steps must be 0 or more, "
                             f"got {self.warmup_steps}, {self.decay_steps}.")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be 'linear_decay' or 'cosine', got {self.schedule!r}.")
        if self.log_every < 1 or self.eval_size < 1 or self.check_every < 1 or self.check_gap < 1:
            raise ValueError("log_every, check_every, check_gap and eval_size must be at least 1.")
        if self.seq_len < 0:
            raise ValueError(f"seq_len must be 0 (the task's) or a length, got {self.seq_len}.")
        if not 0 <= self.beta2 < 1:
            raise ValueError(f"beta2 must be in [0, 1), got {self.beta2}.")
        if not (self.embed_scale > 0 and math.isfinite(self.embed_scale)):
            raise ValueError(f"embed_scale must be a positive number, got {self.embed_scale}.")
        if not (self.embed_shared >= 0 and math.isfinite(self.embed_shared)):
            raise ValueError(f"embed_shared must be 0 or more, got {self.embed_shared}.")
        return self

    def train_task(self, task: TaskConfig) -> TaskConfig:
        """The task the training batches are drawn from: `task`, at length seq_len when set.

        A shorter training length must still hold a whole second copy of the longest period.
        """
        if not self.seq_len or self.seq_len == task.seq_len:
            return task
        if not isinstance(task, TaskConfig):  # the Markov task trains at its own length
            raise ValueError(f"training seq_len {self.seq_len} differs from the Markov task's length {task.seq_len}: "
                             "a Markov-chain run trains on the task's own length (set seq_len 0).")
        if self.seq_len > task.seq_len:
            raise ValueError(f"training seq_len {self.seq_len} is above the task's length {task.seq_len}.")
        return TaskConfig(task.period_min, task.period_max, self.seq_len).validate()

    def lr_at(self, step: int) -> float:
        """The learning rate of `step` (0-based): warm-up, then constant or decaying (cosine or linear) to a tenth."""
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "cosine" and self.steps > self.warmup_steps:
            frac = (step - self.warmup_steps) / (self.steps - self.warmup_steps)
            return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        start = max(self.steps - self.decay_steps, self.warmup_steps)
        if self.decay_steps and step >= start and self.steps > start:
            return self.lr * (1.0 - 0.9 * min((step - start) / (self.steps - start), 1.0))
        return self.lr

    def to_dict(self) -> dict:
        return asdict(self)
