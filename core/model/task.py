"""The repeated-sequence task: a random pattern of L tokens tiled to seq_len.

Per sequence the period L is uniform in [period_min, period_max] and the pattern's tokens are
uniform over the vocabulary (repeats allowed). Token x_t is the *target* predicted at position t-1.
A target at position t is in the first copy if t < L, the second copy if L <= t < 2L and in the
later copies if t >= L (the second copy is part of the later copies).

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, ClassVar

from core.model.tasks import Task

if TYPE_CHECKING:
    import torch

def __getattr__(name: str):
    """copy_masks's public path (it lives in core.model.metrics, read only when asked for)."""
    if name == "copy_masks":
        from core.model.metrics import copy_masks

        return copy_masks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


LOG_SEQS = 32  # a training log measures this many sequences of the trainer's evaluation batch (its first ones)
DEFAULT_PERIOD = 24  # a period to start a page with: the middle of the default range 16-32
MAX_SEQ_LEN = 2048  # attention patterns are [T, T]: longer sequences would exhaust memory, not teach more


KEYS = ("period_min", "period_max", "seq_len")  # a stored entry's integers


@dataclass
class TaskConfig(Task):
    name: ClassVar[str] = "repeat"
    title: ClassVar[str] = "the repeat task"
    train_plots: ClassVar[tuple[str, ...]] = ("loss_first_copy", "loss_later_copies", "acc_second_copy",
                                              "acc_later_copies", "prev_token", "induction")
    corruptions: ClassVar[tuple[str, ...]] = ("first-copy", "resample")  # core.causal.corruptions
    stop_metric: ClassVar[str | None] = "loss_later_copies"

    period_min: int = 16
    period_max: int = 32
    seq_len: int = 96

    def validate(self, vocab_size: int | None = None) -> TaskConfig:
        """Raise ValueError saying what to change if no sequence of this task can be made."""
        if vocab_size is not None and vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2 (got {vocab_size}): one symbol cannot form a pattern.")
        if self.period_min < 1:
            raise ValueError(f"period_min must be at least 1 (got {self.period_min}).")
        if self.period_min > self.period_max:
            raise ValueError(
                f"period_min ({self.period_min}) is above period_max ({self.period_max}): "
                "lower period_min or raise period_max."
            )
        if self.seq_len > MAX_SEQ_LEN:
            raise ValueError(f"seq_len {self.seq_len} is above this lab's limit of {MAX_SEQ_LEN}: lower it.")
        if self.seq_len < 2 * self.period_max:
            raise ValueError(
                f"seq_len {self.seq_len} leaves no complete second copy of a period-{self.period_max} pattern: "
                f"raise seq_len to at least {2 * self.period_max} or lower period_max to at most {self.seq_len // 2}."
            )
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, entry: dict) -> TaskConfig:
        """The task of a stored entry with integer period_min, period_max and seq_len (no "kind")."""
        if any(isinstance(entry.get(k), bool) or not isinstance(entry.get(k), int) for k in KEYS):
            raise ValueError(f"a repeat task entry needs integer {', '.join(KEYS)}.")
        return cls(**{k: entry[k] for k in KEYS}).validate()

    def summary(self) -> str:
        return f"periods {self.period_min}–{self.period_max}, length {self.seq_len}"

    def sample(self, batch_size: int, vocab_size: int, generator: torch.Generator | None = None) -> tuple:
        """(tokens [B, seq_len], periods [B]): sample_batch."""
        return sample_batch(self, batch_size, vocab_size, generator)

    def log_batch(self, tokens: torch.Tensor, extra) -> tuple:
        """The first LOG_SEQS sequences: a log on all 128 cost 12% of a default run to the drop."""
        return tokens[:LOG_SEQS], extra[:LOG_SEQS]

    def evaluate(self, model, tokens: torch.Tensor, extra, edits: dict | None = None,
                 cache: dict | None = None) -> dict:
        """core.model.metrics.log_row: copy metrics plus each head's prev_token, induction and induction_any."""
        from core.model.metrics import log_row

        return log_row(model, tokens, extra, edits)

    def head_scores(self, pattern: torch.Tensor, tokens: torch.Tensor, extra) -> dict:
        """core.reading.heads.head_scores at the batch's periods (extra)."""
        from core.reading.heads import head_scores

        return head_scores(pattern, extra)

    def later_loss(self, per_target: torch.Tensor, tokens: torch.Tensor, extra) -> torch.Tensor:
        """The mean loss over the later copies' targets (t >= L), the one the drop is seen in."""
        import torch

        later = torch.arange(1, tokens.shape[1])[None, :] >= extra[:, None]
        return per_target[later].mean()


def sample_batch(
    task: TaskConfig,
    batch_size: int,
    vocab_size: int,
    generator: torch.Generator | None = None,
    period: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw fresh sequences: tokens [B, seq_len] (long) and periods [B] (long).

    `period` fixes every sequence's period (a probe); it only needs seq_len > period.
    """
    import torch

    task.validate(vocab_size)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    T = task.seq_len
    if period is not None:
        if not 1 <= period < T:
            raise ValueError(f"probe period {period} must be between 1 and seq_len - 1 = {T - 1}.")
        periods = torch.full((batch_size,), period, dtype=torch.long)
    else:
        periods = torch.randint(task.period_min, task.period_max + 1, (batch_size,), generator=generator)
    width = int(periods.max())
    patterns = torch.randint(0, vocab_size, (batch_size, width), generator=generator)
    positions = torch.arange(T)[None, :] % periods[:, None]  # [B, T]
    return patterns.gather(1, positions), periods
