"""A run trained with a held previous-token head (core.training.interventions)
must hand back the model whose numbers it reports. The hold is part of the kept model: its checkpoint
records it (train.hold), read_checkpoint and snapshot_model restore it, and the history's last
row, the Train page's banner (that row), the command line's closing line and the timeline measure it."""
from __future__ import annotations

import math

import pytest
import torch

from core.model.checkpoints import read_checkpoint
from core.model.config import ModelConfig
from core.model.snapshots import model_at_step
from core.model.task import TaskConfig
from core.pool.worker import final_checkpoint
from core.training.config import TrainConfig
from core.training.interventions import release
from core.training.timeline import timeline
from core.training.train import train_to_file
from core.training.trainer import Trainer, eval_batch, evaluate

from helpers import TINY

TASK = TaskConfig(4, 8, 24)
CFG = ModelConfig(**TINY, n_layers=2)
TRAIN = TrainConfig(steps=30, batch_size=8, log_every=10, eval_size=16, seed=0, hold="1.2")

KEYS = ("loss_first_copy", "loss_later_copies", "acc_later_copies", "prev_token", "induction_any")


@pytest.fixture(scope="module")
def trained():
    t = Trainer(CFG, TASK, TRAIN)
    t.run(TRAIN.steps)
    return t


def _same(row: dict, fresh: dict) -> None:
    for key in KEYS:
        a, b = row[key], fresh[key]
        if isinstance(a, list):
            assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5), key
        else:
            assert a == pytest.approx(b, abs=1e-5), key


def test_the_model_a_held_worker_run_hands_back_is_the_one_its_history_reports(trained):
    model, info = read_checkpoint(final_checkpoint(trained), name="The trained model")
    assert model.held_head == 1 and info["train"]["hold"] == "1.2"
    tokens, periods = eval_batch(info["task"], CFG.vocab_size, TRAIN.eval_size)
    fresh = evaluate(model, tokens, periods)
    _same(info["history"][-1], fresh)  # the banner shows this row
    assert fresh["prev_token"][0][1] == pytest.approx(1.0)
    # without the hold the same weights compute something else: the reported numbers are not theirs
    bare = evaluate(release(model), tokens, periods)
    assert bare["prev_token"][0][1] < 0.9


def test_the_command_line_file_and_its_closing_line_describe_the_same_model(tmp_path):
    out = tmp_path / "held.pt"
    t = train_to_file(CFG, TASK, TRAIN, out)
    model, info = read_checkpoint(out)
    tokens, periods = eval_batch(info["task"], CFG.vocab_size, TRAIN.eval_size)
    _same(t.history[-1], evaluate(model, tokens, periods))


def test_snapshots_and_the_timeline_keep_the_hold(trained):
    model, info = read_checkpoint(final_checkpoint(trained))
    tokens, periods = eval_batch(info["task"], CFG.vocab_size, TRAIN.eval_size)
    by_step = {r["step"]: r for r in info["history"]}
    for snap in info["snapshots"]:
        if snap["step"] in by_step:  # float16 snapshots: close to the row logged at that step
            m = model_at_step(model, info, snap["step"])
            assert m.held_head == 1
            got = evaluate(m, tokens, periods)
            assert got["prev_token"][0][1] == pytest.approx(1.0)
            assert got["loss_later_copies"] == pytest.approx(by_step[snap["step"]]["loss_later_copies"], abs=2e-2)
    tl = timeline(model, info)
    assert tl is not None
    rows = {r["step"]: r["loss_later_copies"] for r in info["history"]}
    # the timeline's last point is the kept model measured on the full evaluation batch of its task
    full = evaluate(model, *eval_batch(info["task"], CFG.vocab_size))
    assert tl["loss_later"][-1] == pytest.approx(full["loss_later_copies"], abs=1e-4)
    assert not math.isnan(rows[TRAIN.steps])
