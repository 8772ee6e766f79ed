"""Training TinyCharLM on the repeated-sequence task, a chunk of steps at a time.

A Trainer owns one model, its optimizer, its data generator and its history. `run(n)` does up to n
whole steps and returns, so a page can redraw between chunks; stopping between chunks leaves the
model at its last finished step. Seeded runs are deterministic on the CPU.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from .heads import head_scores
from .metrics import copy_metrics
from .model import ModelConfig, TinyCharLM
from .task import TaskConfig, sample_batch

EVAL_SEED = 1234  # the fixed evaluation batch is the same for every run of a task


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1500
    batch_size: int = 32
    lr: float = 1e-2
    warmup_steps: int = 0
    schedule: str = "constant"  # "constant" or "cosine" (decays to 10% of lr at `steps`)
    weight_decay: float = 0.0
    seed: int = 0
    log_every: int = 25
    eval_size: int = 128

    def validate(self) -> "TrainConfig":
        if self.steps < 0:
            raise ValueError(f"steps must be 0 or more, got {self.steps}.")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive number, got {self.lr}.")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be 0 or more, got {self.warmup_steps}.")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}.")
        if self.log_every < 1 or self.eval_size < 1:
            raise ValueError("log_every and eval_size must be at least 1.")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


def eval_batch(task: TaskConfig, vocab_size: int, n_seqs: int = 128, seed: int = EVAL_SEED,
               period: int | None = None):
    """A fixed evaluation batch: (tokens [n, T], periods [n])."""
    g = torch.Generator().manual_seed(seed)
    return sample_batch(task, n_seqs, vocab_size, generator=g, period=period)


@torch.no_grad()
def evaluate(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor) -> dict:
    """Copy metrics plus each head's prev_token and induction score ([layer][head] lists)."""
    was_training = model.training
    model.eval()
    logits, cache = model.run_with_cache(tokens)
    model.train(was_training)
    row = copy_metrics(logits, tokens, periods)
    scores = [head_scores(p, periods) for p in cache["pattern"]]
    row["prev_token"] = [s["prev_token"].tolist() for s in scores]
    row["induction"] = [s["induction"].tolist() for s in scores]
    return row


class Trainer:
    """Holds one training run. history: one dict per logged step (see `evaluate`, plus step,
    train_loss and seconds of training so far)."""

    def __init__(self, model_cfg: ModelConfig, task_cfg: TaskConfig, train_cfg: TrainConfig):
        self.model_cfg, self.task_cfg, self.cfg = model_cfg, task_cfg.validate(model_cfg.vocab_size), train_cfg.validate()
        torch.manual_seed(train_cfg.seed)
        self.model = TinyCharLM(model_cfg)
        self.model.reset_parameters(torch.Generator().manual_seed(train_cfg.seed))
        self.model.train()
        params = list(self.model.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=train_cfg.lr, weight_decay=train_cfg.weight_decay,
                                           betas=(0.9, 0.98)) if params else None
        self.data_gen = torch.Generator().manual_seed(train_cfg.seed + 1)
        self.eval_tokens, self.eval_periods = eval_batch(task_cfg, model_cfg.vocab_size, train_cfg.eval_size)
        self.step = 0
        self.seconds = 0.0
        self.history: list[dict] = []
        self.last_loss = math.nan
        self._log()

    @property
    def done(self) -> bool:
        return self.step >= self.cfg.steps

    def lr_at(self, step: int) -> float:
        c = self.cfg
        if c.warmup_steps and step < c.warmup_steps:
            return c.lr * (step + 1) / c.warmup_steps
        if c.schedule == "cosine" and c.steps > c.warmup_steps:
            frac = (step - c.warmup_steps) / (c.steps - c.warmup_steps)
            return c.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        return c.lr

    def train_step(self) -> float:
        """One optimizer step on a fresh batch; returns its mean training loss (nats)."""
        tokens, _ = sample_batch(self.task_cfg, self.cfg.batch_size, self.model_cfg.vocab_size, self.data_gen)
        logits = self.model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        if self.optimizer is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.step)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        self.step += 1
        return loss.item()

    def _log(self) -> dict:
        row = {"step": self.step, "train_loss": self.last_loss, "seconds": round(self.seconds, 3)}
        row.update(evaluate(self.model, self.eval_tokens, self.eval_periods))
        self.history.append(row)
        return row

    def run(self, n_steps: int, stop_at_loss: float | None = None) -> int:
        """Train up to n_steps more whole steps (never past cfg.steps); log every cfg.log_every steps.

        Stops early once a logged loss_later_copies is below stop_at_loss. Returns steps done.
        """
        done = 0
        while done < n_steps and not self.done:
            t0 = time.perf_counter()
            self.last_loss = self.train_step()
            self.seconds += time.perf_counter() - t0
            done += 1
            if self.step % self.cfg.log_every == 0 or self.done:
                row = self._log()
                if stop_at_loss is not None and row["loss_later_copies"] < stop_at_loss:
                    self.stopped_early = True
                    break
        return done

    def reached(self, loss: float) -> bool:
        """Whether the last logged loss_later_copies is below `loss`."""
        return bool(self.history) and self.history[-1]["loss_later_copies"] < loss

    def checkpoint_fields(self) -> dict:
        """The task, train and history entries for save_checkpoint."""
        train = self.cfg.to_dict() | {"steps_done": self.step, "seconds": round(self.seconds, 3)}
        return {"task": self.task_cfg, "train": train, "history": self.history}
