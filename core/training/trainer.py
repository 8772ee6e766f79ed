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

import dataclasses
import math
import time

import torch
import torch.nn.functional as F

from core.model import markov
from core.model.config import ModelConfig
from core.model.hooks import hook_name
from core.model.metrics import copy_metrics
from core.model.snapshots import SnapshotRecorder
from core.model.task import TaskConfig, copy_masks, sample_batch
from core.model.tinycharlm import TinyCharLM
from core.reading.heads import head_scores
from core.training.adamw import AdamW
from core.training.config import LOG_SEQS, TrainConfig
from core.training.initial import initial_model
from core.training.interventions import apply_interventions, check_interventions, clamp_edits

EVAL_SEED = 1234  # the fixed evaluation batch is the same for every run of a task
POSITIONS_EVERY = 5  # a Markov run's logs keep their KL by position every this many logs (and at the end)


def eval_batch(task: TaskConfig | markov.MarkovTask, vocab_size: int, n_seqs: int = 128, seed: int = EVAL_SEED,
               period: int | None = None):
    """A fixed evaluation batch: (tokens [n, T], periods [n]); on the Markov task (tokens [n, T], None), always
    drawn from the Dirichlet prior (core.model.markov): a run trained on doubly stochastic or partly
    unigram-optimal chains is measured on the full distribution, as Edelman et al. (2024) evaluate theirs, and
    there its strategies are the Bayes-optimal ones."""
    g = torch.Generator().manual_seed(seed)
    if markov.is_markov(task):
        full = dataclasses.replace(task, prior="dirichlet", unigram_share=0.0)
        return markov.sample_markov(full.validate(vocab_size), n_seqs, g)[0], None
    return sample_batch(task, n_seqs, vocab_size, generator=g, period=period)


def training_batches(task: TaskConfig | markov.MarkovTask, vocab_size: int, train: TrainConfig | dict):
    """The exact stream of training batches a Trainer with these settings draws, step after step:
    yields (tokens [batch_size, T_train], periods [batch_size]) (periods None on the Markov task).
    T_train is train.train_task(task).seq_len."""
    cfg = train if isinstance(train, TrainConfig) else TrainConfig(
        **{k: v for k, v in train.items() if k in TrainConfig.__dataclass_fields__})
    task = cfg.train_task(task)
    g = torch.Generator().manual_seed(cfg.seed + 1)
    if markov.is_markov(task):
        task.validate(vocab_size)
        while True:
            yield markov.sample_markov(task, cfg.batch_size, g)[0], None
    while True:
        yield sample_batch(task, cfg.batch_size, vocab_size, g)


@torch.no_grad()
def evaluate(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor, edits: dict | None = None) -> dict:
    """Copy metrics plus each head's prev_token, induction and induction_any score ([layer][head] lists).
    edits: run_with_hooks's, e.g. a clamp's (Trainer.evaluate passes the run's own)."""
    was_training = model.training
    model.eval()
    names = [hook_name(layer, "attn.hook_pattern") for layer in range(model.cfg.n_layers)]
    logits, cache = model.run_with_hooks(tokens, edits=edits, cache=names)
    model.train(was_training)
    row = copy_metrics(logits, tokens, periods)
    scores = [head_scores(cache[n], periods) for n in names]
    row["prev_token"] = [s["prev_token"].tolist() for s in scores]
    row["induction"] = [s["induction"].tolist() for s in scores]
    row["induction_any"] = [s["induction_any"].tolist() for s in scores]
    return row


@torch.no_grad()
def evaluate_markov(model: TinyCharLM, tokens: torch.Tensor, task: markov.MarkovTask, edits: dict | None = None,
                    strategies: dict | None = None) -> dict:
    """A Markov-task log row's measurements: "loss" (mean cross-entropy on targets 1..T-1), "loss_optimal"
    (the chain's Bayes-optimal strategy's, the floor), "kl_<strategy>" for each strategy, "kl_positions"
    ({strategy: [T - 1] list}) and each head's prev_token and induction score ([layer][head] lists).
    strategies: markov.strategy_probs(tokens, task), when already computed."""
    was_training = model.training
    model.eval()
    names = [hook_name(layer, "attn.hook_pattern") for layer in range(model.cfg.n_layers)]
    logits, cache = model.run_with_hooks(tokens, edits=edits, cache=names)
    model.train(was_training)
    probs = strategies if strategies is not None else markov.strategy_probs(tokens, task)
    targets = tokens[:, 1:]
    best = probs[task.strategies[-1]][:, :-1].gather(-1, targets[..., None]).squeeze(-1)
    row = {"loss": float(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1))),
           "loss_optimal": float(-best.log().mean())}
    kl = markov.strategy_kl(logits, tokens, task, probs)
    row.update({f"kl_{name}": value["mean"] for name, value in kl.items()})
    row["kl_positions"] = {name: [round(float(v), 5) for v in value["per_position"]] for name, value in kl.items()}
    scores = [markov.head_scores(cache[n], tokens) for n in names]
    row["prev_token"] = [s["prev_token"].tolist() for s in scores]
    row["induction"] = [s["induction"].tolist() for s in scores]
    return row


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

    def __init__(self, model_cfg: ModelConfig, task_cfg: TaskConfig, train_cfg: TrainConfig):
        self.model_cfg, self.cfg = model_cfg, train_cfg.validate()
        self.task_cfg = task_cfg.validate(model_cfg.vocab_size)
        self.markov = markov.is_markov(task_cfg)
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
        if self.markov:  # every log measures the whole evaluation batch: 3 states x 100 tokens are cheap
            self._stop_loss = None
            self.log_tokens, self.log_periods = self.eval_tokens, None
            self._log_strategies = markov.strategy_probs(self.log_tokens, task_cfg)  # fixed batch: once
        else:
            self._stop_loss = LaterCopyLoss(self.eval_tokens, self.eval_periods)
            self.log_tokens, self.log_periods = self.eval_tokens[:LOG_SEQS], self.eval_periods[:LOG_SEQS]
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

    def evaluate(self, tokens: torch.Tensor, periods: torch.Tensor | None) -> dict:
        """`evaluate` (or on the Markov task `evaluate_markov`) of this run's model as it trains (its clamp,
        if any, applied)."""
        if self.markov:
            same = tokens is self.log_tokens
            return evaluate_markov(self.model, tokens, self.task_cfg, clamp_edits(self.cfg, tokens),
                                   self._log_strategies if same else None)
        return evaluate(self.model, tokens, periods, clamp_edits(self.cfg, tokens))

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
            if periods is None:  # the Markov task: every target counts
                self.last_later_loss = float(loss)
            else:
                later = torch.arange(1, tokens.shape[1])[None, :] >= periods[:, None]
                self.last_later_loss = float(per_target[later].mean())
        self.step += 1
        return loss.item()

    def _log(self) -> dict:
        row = {"step": self.step, "train_loss": self.last_loss, "seconds": round(self.seconds, 3)}
        row.update(self.evaluate(self.log_tokens, self.log_periods))
        if self.markov and self.step % (POSITIONS_EVERY * self.cfg.log_every) and not self.done:
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
        if stop_at_loss is not None and self.markov:
            raise ValueError("stop_at_loss stops a repeat-task run at its drop; "
                             "the Markov task has no drop to stop at.")
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
