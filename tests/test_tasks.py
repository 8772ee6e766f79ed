"""A task is one concept (core.model.tasks): the repeat and Markov tasks implement one interface, one registry finds a
task by name and from a stored entry, and a third task is one module plus one registration. The planted copy
task below (registered in these tests only) trains, round-trips through a checkpoint, and walks every page: the
pages it does not get say why in the shell's one place, the others run without error."""
from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import ClassVar

import pytest
import torch

from core.model import tasks
from core.model.markov import MarkovTask
from core.model.task import TaskConfig

NOT_COPY = "which copied halves do not have."


@dataclass
class CopyTask(tasks.Task):
    """The planted third task: a random first half, then the same tokens again."""

    name: ClassVar[str] = "copy"
    title: ClassVar[str] = "the planted copy task"
    train_plots: ClassVar[tuple[str, ...]] = ("loss_copy",)
    not_offered: ClassVar[dict[str, str]] = {
        page: f"This page reads a repeat at a period, {NOT_COPY}"
        for page in ("attention", "circuits", "depth", "icl", "causal", "head archetypes")
    } | {"overview": "this overview measures copying at a period"}

    seq_len: int = 16

    def validate(self, vocab_size: int | None = None) -> CopyTask:
        if self.seq_len < 2 or self.seq_len % 2:
            raise ValueError(f"seq_len must be even and at least 2, got {self.seq_len}.")
        return self

    def to_dict(self) -> dict:
        return {"kind": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, entry: dict) -> CopyTask:
        return cls(seq_len=entry["seq_len"]).validate()

    def summary(self) -> str:
        return f"copied halves, length {self.seq_len}"

    def sample(self, batch_size, vocab_size, generator=None):
        half = torch.randint(0, vocab_size, (batch_size, self.seq_len // 2), generator=generator)
        return torch.cat([half, half], 1), None

    @torch.no_grad()
    def evaluate(self, model, tokens, extra, edits=None, cache=None):
        logits = model.run_with_hooks(tokens, edits=edits)[0]
        h = self.seq_len // 2
        loss = torch.nn.functional.cross_entropy(logits[:, h - 1:-1].flatten(0, 1), tokens[:, h:].flatten())
        return {"loss_copy": float(loss)}

    def head_scores(self, pattern, tokens, extra):
        return {"prev_token": pattern.diagonal(-1, -2, -1).mean((0, 2))}


@pytest.fixture
def copy_task():
    tasks.register(CopyTask)
    yield CopyTask
    tasks.unregister(CopyTask.name)


def test_both_tasks_implement_the_interface_and_the_registry_finds_them_by_name_and_entry():
    assert tasks.task_class("repeat") is TaskConfig and tasks.task_class("markov") is MarkovTask
    for task in (TaskConfig(4, 8, 24), MarkovTask(n_states=3, seq_len=20)):
        assert tasks.task_of(task) is type(task)
        assert tasks.task_from_dict(task.to_dict()) == task  # a stored entry reads back as the same task
        tokens, extra = task.sample(5, 8, torch.Generator().manual_seed(0))
        assert tokens.shape == (5, task.seq_len) and tokens.dtype == torch.long
        pattern = torch.softmax(torch.randn(5, 2, task.seq_len, task.seq_len), -1).tril()
        scores = task.head_scores(pattern, tokens, extra)
        assert scores["prev_token"].shape == (2,)
    assert TaskConfig().offers("circuits") and not MarkovTask().offers("circuits")
    assert MarkovTask().why_not("icl").endswith("which Markov-chain sequences do not have.")
    assert MarkovTask(prior="doubly_stochastic").eval_task().prior == "dirichlet"  # evaluated on the full prior
    with pytest.raises(ValueError, match="task must be one of repeat, markov"):
        tasks.task_from_dict({"kind": "copy", "seq_len": 16})


def test_a_planted_third_task_trains_and_round_trips_through_a_checkpoint(copy_task):
    from core.model.checkpoints import read_checkpoint, save_checkpoint
    from core.model.config import ModelConfig
    from core.training.config import TrainConfig
    from core.training.trainer import Trainer

    trainer = Trainer(ModelConfig(vocab_size=8, n_layers=1, n_heads=2, d_model=16), CopyTask(),
                      TrainConfig(steps=6, batch_size=8, log_every=3, eval_size=16))
    assert trainer.run(6) == 6
    assert [r["step"] for r in trainer.history] == [0, 3, 6]
    assert all(r["loss_copy"] > 0 for r in trainer.history)
    with pytest.raises(ValueError, match="the planted copy task has no drop"):
        trainer.run(1, stop_at_loss=1.0)
    buf = io.BytesIO()
    save_checkpoint(trainer.model, buf, **trainer.checkpoint_fields())
    model, info = read_checkpoint(buf.getvalue(), name="copy.pt")
    assert info["task"] == CopyTask() and isinstance(info["task"], CopyTask)


@pytest.mark.app
def test_a_planted_third_task_walks_every_page_and_the_shell_says_which_do_not_apply(copy_task):
    from streamlit.testing.v1 import AppTest

    from core.model.config import ModelConfig
    from core.training.config import TrainConfig
    from core.training.trainer import Trainer
    from ui.pages import ALL_PAGES
    from ui.state import LabModel

    from helpers import ROOT

    trainer = Trainer(ModelConfig(vocab_size=8, n_layers=1, n_heads=2, d_model=16), CopyTask(),
                      TrainConfig(steps=3, batch_size=8, log_every=3, eval_size=16))
    trainer.run(3)
    fields = trainer.checkpoint_fields()
    entry = LabModel("session:copy", "copy-model", trainer.model,
                     {"config": trainer.model_cfg, **fields, "snapshots": []}, "trained")
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=300)
    at.session_state["lab_models"] = {entry.key: entry}
    at.session_state["pending_pick"] = entry.key
    at.run()
    assert at.session_state["picked_model"] == entry.key
    shown = {}
    for page in ALL_PAGES:
        at.switch_page(page.file)
        at.run()
        assert not at.exception, (page.name, [e.value for e in at.exception])
        shown[page.name] = [x.value for x in at.info]
    note = f"**copy-model** was trained on the planted copy task. This page reads a repeat at a period, {NOT_COPY}"
    for page in ALL_PAGES:
        said = any(x.startswith(note) for x in shown[page.name])
        assert said == (page.name in CopyTask.not_offered or page.name == "archetypes"), page.name
    assert any("copied halves, length 16" in c.value for c in at.sidebar.caption)  # the task's own summary
    assert "**copy-model** was trained on the planted copy task: this overview measures copying at a period." \
        in shown["home"]
