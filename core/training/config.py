"""TrainConfig: how one run trains (steps, batch, optimizer, schedule, seed, logging, initial
embedding and training experiments). docs/DESIGN.md "Training" gives the defaults' reasons."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from core.model.symbols import block_label, head_label, parse_head_label
from core.model.task import LOG_SEQS, TaskConfig  # noqa: F401 -- LOG_SEQS: its public path

SCHEDULES = ("linear_decay", "cosine")
OLD_SCHEDULE_NAMES = {"constant": "linear_decay"}  # what checkpoints written before the rename store
HEAD_FIELDS = {"hold": 0, "clamp": 1, "knockout": None}  # a head field -> the block its head must be in (None: any)
EXAMPLE = {"hold": "1.2", "clamp": "2.1", "knockout": "2.1"}
OFF = (None, "", "none")  # what a head field may say for "no head" (tables and old files write "none")


def head_or_none(value, field: str) -> str | None:
    """A head field's value as the pages write it: "1.2" (block 1, head 2, both counted from 1) or None (off).
    Takes the forms old files and tables hold too ("none", ""); ValueError naming the field otherwise."""
    if value in OFF:
        return None
    try:
        layer, head = parse_head_label(str(value))
    except ValueError:
        raise ValueError(f"{field} takes a head as block.head, e.g. 1.2, got {value!r}.") from None
    if layer < 0 or head < 0:
        raise ValueError(f"{field} counts blocks and heads from 1, got {value!r}.")
    return head_label(layer, head)


def _old_heads(entry: dict) -> dict:
    """The head fields of a train entry written before they were labels: hold_prev_head (a block-1 head,
    0-based, -1 off), clamp_induction_head (a block-2 head) and knockout_layer/knockout_head."""
    out = {}
    if entry.get("hold_prev_head", -1) not in (-1, None):
        out["hold"] = head_label(0, entry["hold_prev_head"])
    if entry.get("clamp_induction_head", -1) not in (-1, None):
        out["clamp"] = head_label(1, entry["clamp_induction_head"])
    if entry.get("knockout_layer", -1) not in (-1, None):
        out["knockout"] = head_label(entry["knockout_layer"], entry["knockout_head"])
    return out


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
    # Training experiments (core.training.interventions): a head label as the pages write it ("1.2": block 1,
    # head 2, both counted from 1), or None (off)
    hold: str | None = None  # this block-1 head's pattern is held on the previous position for the run
    clamp: str | None = None  # this block-2 head's pattern is clamped to the ideal induction pattern
    knockout: str | None = None  # this head's W_O is zero and frozen for the run

    def __post_init__(self):
        for name in HEAD_FIELDS:  # "2.01" -> "2.1", "none" -> None: one way to write a head
            object.__setattr__(self, name, head_or_none(getattr(self, name), name))

    @classmethod
    def from_dict(cls, entry: dict) -> TrainConfig:
        """The TrainConfig of a stored train entry (a checkpoint's "train", a worker's settings): its fields, the
        old schedule name and the old integer head fields read as they were meant; other keys (steps_done,
        seconds, preset, ...) are left out."""
        entry = {**entry, **_old_heads(entry)}
        if entry.get("schedule") in OLD_SCHEDULE_NAMES:
            entry["schedule"] = OLD_SCHEDULE_NAMES[entry["schedule"]]
        return cls(**{f.name: entry[f.name] for f in fields(cls) if f.name in entry})

    def head(self, name: str) -> tuple[int, int] | None:
        """Head field `name` as 0-based (layer, head), or None when off."""
        label = getattr(self, name)
        return None if label is None else parse_head_label(label)

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
        for name, block in HEAD_FIELDS.items():
            where = self.head(name)
            if block is not None and where is not None and where[0] != block:
                raise ValueError(f"{name} takes a head of {block_label(block)}, e.g. {EXAMPLE[name]}, "
                                 f"got {getattr(self, name)!r}.")
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


def with_settings(changes: dict, model, task, train) -> tuple:
    """(model, task, train) with each setting in `changes` given to the first of the three configs that has a
    field of its name (so "seq_len" is the task's; TrainConfig's own is the training length): how
    core.training.run_config.RunConfig.of, which every caller builds its run with, sets an option by its field's
    name. ValueError naming a setting none of them has."""
    parts = [model, task, train]
    names = [{f.name for f in fields(part)} for part in parts]
    out: list[dict] = [{}, {}, {}]
    for name, value in changes.items():
        where = next((i for i, have in enumerate(names) if name in have), None)
        if where is None:
            raise ValueError(f"no model, task or training setting is called {name!r}.")
        out[where][name] = value
    return tuple(replace(part, **change) if change else part for part, change in zip(parts, out))
