"""Training TinyCharLM on the repeated-sequence task or the Markov-chain task (core.model.markov), a
chunk of steps at a time.

A Trainer owns one model, its optimizer, its data generator and its history. `run(n)` does up to n
whole steps and returns, so a page can redraw between chunks; stopping between chunks leaves the
model at its last finished step. Seeded runs are deterministic on the CPU, and chunking does not
change them: run(7) then run(13) gives exactly the model and history of run(20).

Two kinds of evaluation, both on the fixed evaluation batch of the default task:
- a *log* every `log_every` steps: the copy metrics plus each head's prev_token, induction and
  induction_any score (`evaluate`), one history row, on the batch's first LOG_SEQS sequences (a log
  on all 128 cost 12% of a default run to the drop; docs/DESIGN.md "What a log measures");
- a *stop check* (only with `run(..., stop_at_loss=X)`): loss_later_copies alone, from the fused
  forward pass. It runs every `check_every` steps, and on a step whose training batch already has
  a later-copy loss within `check_margin` nats of X (that loss comes free with the step), at most once
  per `check_gap` steps.

On the Markov-chain task a log measures, instead of the copy metrics, the loss on every target and the KL
of the model's predictions to each strategy of the task (core.model.markov.strategy_kl; "kl_<strategy>",
one number each, and on every POSITIONS_EVERY-th log and the last "kl_positions": {strategy: [T - 1]}),
plus each head's prev_token and induction score (core.model.markov.head_scores); it has no stop check
(stop_at_loss is for the repeat task's drop).
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from core.model.config import ModelConfig
from core.model.markov import log_row as evaluate_markov  # noqa: F401 -- the public names
from core.model.metrics import log_row as evaluate  # noqa: F401
from core.model.snapshots import SnapshotRecorder
from core.model.task import copy_masks
from core.model.tasks import Task
from core.model.tinycharlm import TinyCharLM
from core.training.adamw import AdamW
from core.training.config import TrainConfig
from core.training.initial import initial_model
from core.training.interventions import apply_interventions, check_interventions, clamp_edits

EVAL_SEED = 1234  # the fixed evaluation batch is the same for every run of a task
POSITIONS_EVERY = 5  # a Markov run's logs keep their KL by position every this many logs (and at the end)


def eval_batch(task: Task, vocab_size: int, n_seqs: int = 128):
    """A fixed evaluation batch (tokens [n, T], extra): drawn from task.eval_task() (core.model.tasks) with EVAL_SEED,
    the same for every run of the task."""
    g = torch.Generator().manual_seed(EVAL_SEED)
    return task.eval_task().sample(n_seqs, vocab_size, g)


def training_batches(task: Task, vocab_size: int, train: TrainConfig | dict):
    """The exact stream of training batches a Trainer with these settings draws, step after step:
    yields the task's batches (tokens [batch_size, T_train], extra). T_train is train.train_task(task).seq_len."""
    cfg = train if isinstance(train, TrainConfig) else TrainConfig.from_dict(train)
    task = cfg.train_task(task)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    task.validate(vocab_size)
    while True:
        yield task.sample(cfg.batch_size, vocab_size, g)


class LaterCopyLoss:
    """loss_later_copies of a model on one fixed batch, from the fused forward pass (no patterns). `model` is
    any tokens -> logits callable: the Trainer passes its `logits`, which applies a clamp."""

    def __init__(self, tokens: torch.Tensor, periods: torch.Tensor):
        self.tokens, self.targets = tokens, tokens[:, 1:]
        self.mask = copy_masks(periods, tokens.shape[1])["later"]
        self.n = int(self.mask.sum())

    @torch.no_grad()
    def __call__(self, model: TinyCharLM) -> float:
        logits = model(self.tokens)[:, :-1]
        loss = F.cross_entropy(logits[self.mask], self.targets[self.mask], reduction="sum")
        return float(loss) / max(self.n, 1)


class Trainer:
    """Holds one training run. history: one dict per logged step (see `evaluate`, plus step,
    train_loss and seconds of training so far)."""

    def __init__(self, model_cfg: ModelConfig, task_cfg: Task, train_cfg: TrainConfig):
        self.model_cfg, self.cfg = model_cfg, train_cfg.validate()
        self.task_cfg = task_cfg.validate(model_cfg.vocab_size)
        self.train_task = train_cfg.train_task(task_cfg)
        check_interventions(model_cfg, train_cfg)
        self.model = initial_model(model_cfg, train_cfg)
        self._frozen = apply_interventions(self.model, train_cfg)
        self.model.train()
        params = list(self.model.parameters())
        # torch.optim.AdamW(..., foreach=True)'s floats without torch.optim's imports (core.training.adamw)
        self.optimizer = AdamW(params, lr=train_cfg.lr, weight_decay=train_cfg.weight_decay,
                               betas=(0.9, train_cfg.beta2)) if params else None
        self.batches = training_batches(task_cfg, model_cfg.vocab_size, train_cfg)
        self.eval_tokens, self.eval_periods = eval_batch(task_cfg, model_cfg.vocab_size, train_cfg.eval_size)
        self._stop_loss = (LaterCopyLoss(self.eval_tokens, self.eval_periods)
                           if task_cfg.stop_metric == "loss_later_copies" else None)
        self.log_tokens, self.log_periods = task_cfg.log_batch(self.eval_tokens, self.eval_periods)
        self._log_cache: dict = {}  # what a task keeps between logs of its fixed batch (core.model.tasks.Task.evaluate)
        self.step = 0
        self.seconds = 0.0
        self.history: list[dict] = []
        self.last_loss = math.nan
        self.last_later_loss = math.nan  # the last training batch's later-copy loss
        self.stop_checks: list[tuple[int, float]] = []  # (step, loss_later_copies) of each stop check
        self.stopped_early = False
        self.snapshots = SnapshotRecorder()  # weights every 10 steps, thinned (core.model.snapshots); no RNG
        self._log()
        self.snapshots.offer(0, self.model, math.nan)

    @property
    def done(self) -> bool:
        return self.step >= self.cfg.steps

    def lr_at(self, step: int) -> float:
        return self.cfg.lr_at(step)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, V] of the model as this run trains and measures it: with the induction clamp on
        (core.training.interventions), through run_with_hooks with the clamp's edit; else the fused forward."""
        edits = clamp_edits(self.cfg, tokens)
        return self.model.run_with_hooks(tokens, edits=edits)[0] if edits else self.model(tokens)

    def evaluate(self, tokens: torch.Tensor, extra) -> dict:
        """The task's log measurements (core.model.tasks.Task.evaluate) of this run's model as it trains (its clamp,
        if any, applied)."""
        return self.task_cfg.evaluate(self.model, tokens, extra, clamp_edits(self.cfg, tokens),
                                      self._log_cache if tokens is self.log_tokens else None)

    def train_step(self) -> float:
        """One optimizer step on a fresh batch; returns its mean training loss (nats).

        Also sets last_later_loss, the batch's mean loss over later-copy targets (before the update).
        Denormal floats are flushed to zero on this thread: a sharp pattern's far-off weights underflow
        to denormals, which made the attention's forward and backward 3 times slower (bench/README.md,
        "Training speed"); no float32 number the lab shows is that small."""
        torch.set_flush_denormal(True)
        tokens, periods = next(self.batches)
        logits = self.logits(tokens)
        V = logits.shape[-1]
        # every position's logits, the last one's target ignored: slicing the logits first copied them and
        # their gradient (about 0.3 ms of a default step), for the same floats
        targets = F.pad(tokens[:, 1:], (0, 1), value=-100)
        per_target = F.cross_entropy(logits.view(-1, V), targets.view(-1), reduction="none").view(tokens.shape)[:, :-1]
        loss = per_target.mean()
        if self.optimizer is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_at(self.step)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for param, mask in self._frozen:
                param.grad.mul_(mask)
            self.optimizer.step()
        with torch.no_grad():
            self.last_later_loss = float(self.task_cfg.later_loss(per_target, tokens, periods))
        self.step += 1
        return loss.item()

    def _log(self) -> dict:
        row = {"step": self.step, "train_loss": self.last_loss, "seconds": round(self.seconds, 3)}
        row.update(self.evaluate(self.log_tokens, self.log_periods))
        if "kl_positions" in row and self.step % (POSITIONS_EVERY * self.cfg.log_every) and not self.done:
            del row["kl_positions"]  # 3 x (T - 1) numbers: every POSITIONS_EVERY-th log keeps them, and the last
        self.history.append(row)
        return row

    def check_loss(self) -> float:
        """loss_later_copies on the fixed evaluation batch now (fused forward, no head scores)."""
        was_training = self.model.training
        self.model.eval()
        value = self._stop_loss(self.logits)
        self.model.train(was_training)
        self.stop_checks.append((self.step, value))
        return value

    def run(self, n_steps: int, stop_at_loss: float | None = None) -> int:
        """Train up to n_steps more whole steps (never past cfg.steps); log every cfg.log_every steps.

        With stop_at_loss, stops as soon as a stop check or a log finds loss_later_copies below it
        (and logs that step). Returns steps done.
        """
        if stop_at_loss is not None and self._stop_loss is None:
            raise ValueError(f"stop_at_loss stops a repeat-task run at its drop; {self.task_cfg.title} has no drop "
                             "to stop at.")
        done = 0
        while done < n_steps and not self.done:
            t0 = time.perf_counter()
            self.last_loss = self.train_step()
            self.seconds += time.perf_counter() - t0
            self.snapshots.offer(self.step, self.model, self.last_later_loss)
            done += 1
            logged = self.step % self.cfg.log_every == 0 or self.done
            if stop_at_loss is not None and not logged and (
                    self.step % self.cfg.check_every == 0 or self._near(stop_at_loss)):
                if self.check_loss() < stop_at_loss:
                    self._log()
                    self.stopped_early = True
                    break
            if logged:
                row = self._log()
                if stop_at_loss is not None and row["loss_later_copies"] < stop_at_loss:
                    self.stopped_early = True
                    break
        return done

    def _near(self, stop_at_loss: float) -> bool:
        """The last training batch's later-copy loss is within check_margin of the target, and the
        last stop check is at least check_gap steps back."""
        since = self.step - (self.stop_checks[-1][0] if self.stop_checks else 0)
        return self.last_later_loss < stop_at_loss + self.cfg.check_margin and since >= self.cfg.check_gap

    def reached(self, loss: float) -> bool:
        """Whether the last logged loss_later_copies is below `loss`."""
        return bool(self.history) and self.history[-1].get("loss_later_copies", math.inf) < loss

    def checkpoint_fields(self) -> dict:
        """The task, train, history and snapshots entries for save_checkpoint."""
        train = self.cfg.to_dict() | {"steps_done": self.step, "seconds": round(self.seconds, 3)}
        return {"task": self.task_cfg, "train": train, "history": self.history,
                "snapshots": self.snapshots.export(final_step=self.step)}
