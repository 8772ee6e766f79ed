"""What the Train page computes: settings -> configs, a chunked live run, history -> tidy frames.

A LiveRun wraps one Trainer and advances it a chunk at a time (about `budget` seconds of work), so
a page can redraw between chunks. Stopping between chunks keeps the model and history of the last
finished step. Nothing here imports streamlit; the page keeps the LiveRun in st.session_state.
"""
from __future__ import annotations

import copy
import math
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import torch

from . import transition
from .checkpoints import checkpoint_bytes
from .interventions import check_interventions, release
from .model import MAX_LAYERS, ModelConfig, TinyCharLM
from .presets import get_preset
from .task import TaskConfig
from .trainer import TrainConfig, Trainer, eval_batch, evaluate

DEFAULT_PRESET = "variable-period-2block"
REFERENCE_PRESET = "variable-period-1block"
UI_MAX_LAYERS = min(4, MAX_LAYERS)
PARTS = {"loss_first_copy": "first copy", "loss_later_copies": "later copies"}
ACCURACY = {"acc_second_copy": "second copy", "acc_later_copies": "later copies"}
MAX_GAP = 5.0  # a longer pause between chunks means the student was elsewhere: not counted as training time
HEAD_SCORES = {"prev_token": "previous-token", "induction": "induction"}


@dataclass(frozen=True)
class TrainSettings:
    """Everything the Train page lets a student choose."""
    n_layers: int
    period_min: int
    period_max: int
    seq_len: int
    bias: bool
    lr: float
    batch_size: int
    steps: int
    seed: int
    shared_embedding: bool = True  # the default init (TrainConfig.embed_scale/embed_shared); False: plain
    hold_prev_head: int = -1  # training experiments (core.interventions), 0-based; -1 = off
    knockout: tuple[int, int] = (-1, -1)  # (layer, head)

    @classmethod
    def defaults(cls, preset: str = DEFAULT_PRESET) -> TrainSettings:
        p = get_preset(preset)
        return cls(p.model.n_layers, p.task.period_min, p.task.period_max, p.task.seq_len, p.model.bias,
                   p.train.lr, p.train.batch_size, p.train.steps, p.train.seed)

    def configs(self, preset: str = DEFAULT_PRESET) -> tuple[ModelConfig, TaskConfig, TrainConfig]:
        """The preset's configs with this page's choices; raises ValueError saying what to change."""
        p = get_preset(preset)
        if not 0 <= self.n_layers <= UI_MAX_LAYERS:
            raise ValueError(f"Depth must be between 0 and {UI_MAX_LAYERS} blocks, got {self.n_layers}.")
        model = replace(p.model, n_layers=self.n_layers, bias=self.bias)
        task = replace(p.task, period_min=self.period_min, period_max=self.period_max,
                       seq_len=self.seq_len).validate(model.vocab_size)
        train = replace(p.train, lr=self.lr, batch_size=self.batch_size, steps=self.steps, seed=self.seed)
        if not self.shared_embedding:
            train = replace(train, embed_scale=1.0, embed_shared=0.0)
        train = replace(train, hold_prev_head=self.hold_prev_head, knockout_layer=self.knockout[0],
                        knockout_head=self.knockout[1])
        check_interventions(model, train)
        if getattr(train, "seq_len", 0):  # the preset trains on shorter sequences: keep that only if it fits
            fits = 2 * task.period_max <= train.seq_len < task.seq_len
            train = replace(train, seq_len=train.seq_len if fits else 0)
        train.validate()
        if self.steps < 1:
            raise ValueError("Train for at least 1 step.")
        return model, task, train

    def problem(self) -> str | None:
        """Why these settings cannot be trained (the configs' own message), or None."""
        try:
            self.configs()
        except ValueError as e:
            return str(e)
        return None

    def label(self) -> str:
        bias = ", bias" if self.bias else ""
        bias += "" if self.shared_embedding else ", plain init"
        bias += f", head 1.{self.hold_prev_head + 1} held" if self.hold_prev_head != -1 else ""
        bias += f", head {self.knockout[0] + 1}.{self.knockout[1] + 1} knocked out" if self.knockout[0] != -1 else ""
        return (f"{self.n_layers} block{'s' if self.n_layers != 1 else ''}{bias}, periods "
                f"{self.period_min}–{self.period_max}, length {self.seq_len}, seed {self.seed}")


def chunk_threads(running: int) -> int | None:
    """Torch threads for one chunk while `running` trainings share this machine: its cores split
    between them (at least 1), or None (torch's own setting) for a lone training. Two trainings with
    two threads each on two cores ran about 5 times slower per step than with one thread each."""
    if running <= 1:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // running)


class LiveRun:
    """One training run advanced in chunks. status: waiting -> running -> finished | stopped | diverged."""

    def __init__(self, settings: TrainSettings):
        self.settings = settings
        self.model_cfg, self.task_cfg, self.train_cfg = settings.configs()
        self.trainer = Trainer(self.model_cfg, self.task_cfg, self.train_cfg)
        self.status = "waiting"
        self.wall = 0.0  # seconds spent inside trainer.run (training and its logging)
        self.between = 0.0  # seconds between chunks while running (the page redrawing), gaps over 5 s left out
        self._last_end: float | None = None
        self._per_step = None  # smoothed wall seconds per step
        self.result: tuple[TinyCharLM, dict, bytes] | None = None
        self.registered_key: str | None = None  # set by the page once the model is in the picker
        # One chunk at a time: Streamlit can start a new run of the page (a click, the fragment's timer)
        # while the previous one is still inside trainer.run; two optimizer steps on one model at once
        # corrupt the backward pass.
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def step(self) -> int:
        return self.trainer.step

    @property
    def total_steps(self) -> int:
        return self.train_cfg.steps

    def chunk_size(self, budget: float) -> int:
        """Steps that fit in about `budget` seconds (2 until the speed is known)."""
        left = self.total_steps - self.step
        if self._per_step is None:
            return min(2, left)
        return max(1, min(left, int(budget / self._per_step)))

    def advance(self, budget: float = 0.4, threads: int | None = None) -> int:
        """Train one chunk of about `budget` seconds; returns steps done. Finishes the run when done.

        threads: torch threads for this chunk (see chunk_threads); the previous setting is restored."""
        if not self._lock.acquire(blocking=False):
            return 0  # another run of the page is training this chunk
        try:
            return self._advance(budget, threads)
        finally:
            self._lock.release()

    def _advance(self, budget: float, threads: int | None) -> int:
        if not self.active:
            return 0
        self.status = "running"
        n = self.chunk_size(budget)
        t0 = time.perf_counter()
        if self._last_end is not None and t0 - self._last_end < MAX_GAP:
            self.between += t0 - self._last_end
        before = torch.get_num_threads()
        if threads and threads != before:
            torch.set_num_threads(threads)
        try:
            done = self.trainer.run(n)
        finally:
            if threads and threads != before:
                torch.set_num_threads(before)
        self._last_end = time.perf_counter()
        dt = self._last_end - t0
        self.wall += dt
        if done:
            rate = dt / done
            self._per_step = rate if self._per_step is None else 0.5 * self._per_step + 0.5 * rate
        last = self.trainer.history[-1]
        if not math.isfinite(last.get("loss_later_copies", 0.0)):
            self.status = "diverged"
        elif self.trainer.done:
            self._finish("finished")
        return done

    def stop(self) -> None:
        """End the run at its last finished step (a run that never trained just ends); waits for a chunk
        in progress to finish first."""
        with self._lock:
            if self.active:
                self._finish("stopped" if self.step > 0 else "cancelled")

    def steps_per_second(self) -> float:
        """Steps per second of wall-clock time while running, page redraws between chunks included."""
        spent = self.wall + self.between
        return self.step / spent if spent > 0 else math.nan

    def seconds_left(self) -> float:
        rate = self.steps_per_second()
        return (self.total_steps - self.step) / rate if rate > 0 else math.nan

    def progress_text(self) -> str:
        """'step s / n' and, while running, the speed and time left; once ended, how it ended."""
        text = f"step {self.step} / {self.total_steps}"
        rate = self.steps_per_second()
        if self.active and math.isfinite(rate):
            return text + f" · {rate:.1f} steps/s · about {_duration(self.seconds_left())} left"
        if not self.active:
            return text + f" · {self.status} after {_duration(self.wall + self.between)} of training"
        return text

    def history(self) -> list[dict]:
        """Logged rows so far, plus (once stopped between logs) a row at the final step."""
        rows = list(self.trainer.history)
        if self.result is not None:
            rows = self.result[1]["history"]
        return rows

    def _finish(self, status: str) -> None:
        self.status = status
        if status == "cancelled":
            return
        model = release(copy.deepcopy(self.trainer.model)).eval()  # a held pattern is for training only
        fields = self.trainer.checkpoint_fields()
        history = list(fields["history"])
        if history[-1]["step"] != self.step:  # stopped between two logged steps: measure the last one
            tokens, periods = eval_batch(self.task_cfg, self.model_cfg.vocab_size, self.train_cfg.eval_size)
            row = {"step": self.step, "train_loss": math.nan, "seconds": round(self.trainer.seconds, 3)}
            row.update(evaluate(model, tokens, periods))
            history.append(row)
        fields["history"] = history
        info = {"config": self.model_cfg, "task": self.task_cfg, "train": fields["train"], "history": history,
                "snapshots": fields["snapshots"]}
        self.result = (model, info, checkpoint_bytes(model, **fields))


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "–"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


# ---------------------------------------------------------------------------------------------
# history rows -> tidy frames for the charts


def _rows(history: list[dict] | None, names: dict[str, str], value: str, run: str) -> pd.DataFrame:
    out = []
    for row in history or []:
        for key, label in names.items():
            v = row.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.append({"step": row["step"], "seconds": row.get("seconds"), "part": label, value: float(v),
                            "run": run})
    return pd.DataFrame(out, columns=["step", "seconds", "part", value, "run"])


def loss_frame(history: list[dict] | None, run: str) -> pd.DataFrame:
    """Columns step, seconds, part ("first copy" | "later copies"), loss (nats), run."""
    return _rows(history, PARTS, "loss", run)


def accuracy_frame(history: list[dict] | None, run: str) -> pd.DataFrame:
    """Columns step, seconds, part ("second copy" | "later copies"), accuracy, run."""
    return _rows(history, ACCURACY, "accuracy", run)


def head_score_frame(history: list[dict] | None) -> pd.DataFrame:
    """Columns step, block, head (both counted from 1, as the UI does), score ("previous-token" |
    "induction"), value."""
    out = []
    for row in history or []:
        for key, label in HEAD_SCORES.items():
            for layer, heads in enumerate(row.get(key) or []):
                for head, v in enumerate(heads):
                    if isinstance(v, (int, float)) and math.isfinite(v):
                        out.append({"step": row["step"], "block": layer + 1, "head": head + 1, "score": label,
                                    "value": float(v)})
    return pd.DataFrame(out, columns=["step", "block", "head", "score", "value"])


def drop_threshold(vocab_size: int) -> float:
    """Half the loss of a uniform guess, ln V / 2: where we say the later-copy loss has dropped."""
    return math.log(vocab_size) / 2


def drop_step(history: list[dict] | None, vocab_size: int) -> int | None:
    """The first logged step whose later-copy loss is below drop_threshold, or None."""
    limit = drop_threshold(vocab_size)
    for row in history or []:
        v = row.get("loss_later_copies")
        if isinstance(v, (int, float)) and v < limit:
            return int(row["step"])
    return None


def run_outcome(name: str, history: list[dict] | None, vocab_size: int) -> str:
    """One line on how a stored run ended: final later-copy loss and when (if) it fell below ln V / 2."""
    last = final_metrics(history)
    if "loss_later_copies" not in last:
        return f"{name}: no training history stored."
    drop = drop_step(history, vocab_size)
    when = f"below ln V / 2 from step {drop}" if drop is not None else "never below ln V / 2"
    return (f"{name}: later-copy loss {last['loss_later_copies']:.2f} nats after {last['step']} steps "
            f"({when}); first copy {last.get('loss_first_copy', math.nan):.2f}.")


def final_metrics(history: list[dict] | None) -> dict:
    """The last logged row's copy metrics (empty without history)."""
    if not history:
        return {}
    last = history[-1]
    return {k: last[k] for k in (*PARTS, *ACCURACY, "step", "seconds") if k in last}


# ---------------------------------------------------------------------------------------------
# the shipped transition study (core.transition, checkpoints/transition_study.csv)


def study_file() -> Path:
    """Where the shipped study lives (core.transition.STUDY_FILE)."""
    return transition.STUDY_FILE


def transition_study(path=None) -> dict | None:
    """The shipped transition study: {"runs", "summary", "command", "high", "low"}, {"error": sentence}
    for an unreadable file, or None while it has not been measured (no file)."""
    path = Path(path) if path else transition.STUDY_FILE
    if not path.is_file():
        return None
    try:
        runs = transition.load_study(path)
        summary = transition.summarize(runs)
        command = transition.study_command(path)
    except (ValueError, OSError, KeyError, pd.errors.ParserError) as e:
        return {"error": f"The transition study file {path.name} could not be read: {e}"}
    return {"runs": runs, "summary": summary, "command": command, "high": transition.HIGH, "low": transition.LOW}


def study_sentence(summary: pd.DataFrame, blocks: int) -> str | None:
    """One sentence on how often and when the drop happened for `blocks`-block runs, or None."""
    row = summary[summary["blocks"] == blocks]
    if row.empty:
        return None
    r = row.iloc[0]
    text = f"{blocks} block{'s' if blocks != 1 else ''}: {int(r['dropped'])} of {int(r['runs'])} seeds dropped"
    if r["dropped"]:
        text += (f" ({int(r['abrupt'])} abruptly), at a median step of {r['drop_step_median']:.0f} (range "
                 f"{r['drop_step_min']:.0f}–{r['drop_step_max']:.0f}); the fall took a median of "
                 f"{r['width_median']:.0f} steps")
    if blocks >= 2 and "sharp_prev_token" in r and r["sharp_prev_token"] == r["sharp_prev_token"]:
        text += (f". At the end, {int(r['sharp_prev_token'])} of {int(r['runs'])} had a block-1 head with prev_token "
                 f"at least {transition.SHARP_PREV_TOKEN}, and {int(r['two_induction_heads'])} had two or more "
                 f"last-block heads with induction_any at least {transition.INDUCTION_HEAD}")
    return text + "."
