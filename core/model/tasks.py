"""What a task is, and the tasks there are.

A task is a config dataclass that says how to draw its sequences and what to measure on them. Every task
implements `Task`: its name; sampling and the evaluation batch; one log row of a training (what the Train
page plots); the head scores that apply; the corruptions that fit; which readings and pages apply, with one
sentence each for those that do not. The repeat task (core.model.task.TaskConfig) and the Markov-chain task
(core.model.markov.MarkovTask) implement it; pages ask the picked model's task, never which task it is.

The registry: `TASKS` names each task's class by its module (imported on first use: a page that reads shipped
views imports no torch, and core.model imports nothing from here at import time); `register` adds one at run
time. A task's stored entry (a checkpoint's "task") names it by "kind"; an entry without one is the repeat
task's, as every file written before there were two tasks.

Adding a task: one module with its config dataclass (subclass of Task), and one line in TASKS.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

PAGES = ("home", "train", "attention", "circuits", "depth", "icl", "archetypes", "causal", "laws", "exercises")
READINGS = {  # a reading that is a section of a page, not the whole page: its page's name first
    "overview": "home",  # the picked model's copy metrics and heads, on the home page
    "head archetypes": "archetypes",  # matching the model's heads to the archetypes
}


class Task:
    """The interface of a task's config (a dataclass). Class attributes say what the task is; the methods
    draw and measure its sequences. A batch is (tokens [B, seq_len] long, extra): extra is what the task's
    scores need beside the tokens (the repeat task's periods [B]; None when they need nothing)."""

    name: ClassVar[str]  # the registry's key, the stored entry's "kind", the Train form's choice
    title: ClassVar[str]  # "the repeat task": how a sentence names it
    train_plots: ClassVar[tuple[str, ...]]  # the history columns the Train page plots for a run of this task
    corruptions: ClassVar[tuple[str, ...]] = ()  # the corrupted runs activation patching may compare with
    not_offered: ClassVar[dict[str, str]] = {}  # page or reading name -> why it does not apply, one sentence
    stop_metric: ClassVar[str | None] = None  # the log column a run may stop on (its drop), or None
    seq_len: int

    def validate(self, vocab_size: int | None = None) -> Task:
        """Raise ValueError saying what to change if no sequence of this task can be made."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """The stored entry (a checkpoint's "task"); it names the task by "kind" unless it is the repeat task."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, entry: dict) -> Task:
        """The task a stored entry describes; ValueError saying what is wrong."""
        raise NotImplementedError

    def summary(self) -> str:
        """The task in a few words, for the model picker ("periods 16–32, length 96")."""
        raise NotImplementedError

    def sample(self, batch_size: int, vocab_size: int, generator: torch.Generator | None = None) -> tuple:
        """A fresh batch (tokens, extra) drawn from `generator`."""
        raise NotImplementedError

    def eval_task(self) -> Task:
        """The task the fixed evaluation batch is drawn from (this one, unless the task measures its runs on
        another distribution than it trains on)."""
        return self

    def log_batch(self, tokens: torch.Tensor, extra) -> tuple:
        """The part of the fixed evaluation batch a training log measures (the whole batch, unless the task
        says otherwise)."""
        return tokens, extra

    def evaluate(self, model, tokens: torch.Tensor, extra, edits: dict | None = None,
                 cache: dict | None = None) -> dict:
        """One log row's measurements of `model` on the batch (edits: run_with_hooks's, a training's clamp).
        cache: a dict the task may keep what it computes from a fixed batch in, between logs of one run."""
        raise NotImplementedError

    def head_scores(self, pattern: torch.Tensor, tokens: torch.Tensor, extra) -> dict[str, torch.Tensor]:
        """Per-head scores of one block: pattern [B, H, T, T] on the batch (tokens, extra) -> {name: [H]}."""
        raise NotImplementedError

    def later_loss(self, per_target: torch.Tensor, tokens: torch.Tensor, extra) -> torch.Tensor:
        """The training batch's loss that the run's stop check watches, from the loss per target [B, T - 1]:
        the mean of every target, unless the task says otherwise."""
        return per_target.mean()

    def offers(self, page: str) -> bool:
        """Whether the page or reading `page` applies to this task (why_not says why when not)."""
        return page not in self.not_offered

    def why_not(self, page: str) -> str | None:
        """The one sentence saying why `page` does not apply to this task, or None when it does."""
        return self.not_offered.get(page)


TASKS: dict[str, str] = {  # name -> "module:Class", imported on first use
    "repeat": "core.model.task:TaskConfig",
    "markov": "core.model.markov:MarkovTask",
}
_LOADED: dict[str, type[Task]] = {}
DEFAULT = "repeat"  # the task of a stored entry that names none


def register(cls: type[Task]) -> type[Task]:
    """Add a task class to the registry under cls.name (a class decorator)."""
    TASKS[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
    _LOADED[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Take a task out of the registry (a test's planted task)."""
    TASKS.pop(name, None)
    _LOADED.pop(name, None)


def task_class(name: str) -> type[Task]:
    """The task class registered as `name`; ValueError naming the tasks there are."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {name!r}.")
    if name not in _LOADED:
        module, _, qualname = TASKS[name].partition(":")
        _LOADED[name] = getattr(importlib.import_module(module), qualname)
    return _LOADED[name]


def names() -> tuple[str, ...]:
    return tuple(TASKS)


def task_from_dict(entry: dict) -> Task:
    """The task a stored entry describes (its "kind", the repeat task without one); ValueError saying what
    is wrong."""
    if not isinstance(entry, dict):
        raise ValueError("a task entry is a dict.")
    return task_class(entry.get("kind", DEFAULT)).from_dict(entry)


def task_of(task) -> type[Task]:
    """The registered class of a task config; ValueError for anything else."""
    for name in TASKS:
        cls = task_class(name)
        if isinstance(task, cls):
            return cls
    raise ValueError(f"{type(task).__name__} is not a registered task ({', '.join(TASKS)}).")
