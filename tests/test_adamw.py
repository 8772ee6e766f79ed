"""core.training.adamw: the Trainer's AdamW gives torch.optim.AdamW(..., foreach=True)'s parameters bit for
bit, and a training imports neither torch.optim's machinery (torch._dynamo, sympy) nor pandas."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.training.adamw import AdamW
from core.training.config import TrainConfig
from core.training.trainer import Trainer

from helpers import ROOT

MODEL = ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=2, bias=True)
TASK = TaskConfig(period_min=4, period_max=7, seq_len=20)


def _torch_twin(model_cfg, task_cfg, train_cfg) -> Trainer:
    """A Trainer of the same settings whose optimizer is torch's own, as the Trainer built it before."""
    trainer = Trainer(model_cfg, task_cfg, train_cfg)
    trainer.optimizer = torch.optim.AdamW(list(trainer.model.parameters()), lr=train_cfg.lr,
                                          weight_decay=train_cfg.weight_decay, betas=(0.9, train_cfg.beta2),
                                          foreach=True)
    return trainer


@pytest.mark.parametrize("train_cfg", [
    # linear decay over the last 60 steps after a warm-up, weight decay, a frozen W_O head (a gradient mask)
    TrainConfig(steps=180, batch_size=8, lr=2e-2, warmup_steps=20, decay_steps=60, weight_decay=0.1,
                log_every=100, eval_size=16, knockout="2.1", seed=3),
    # cosine schedule, another beta2, no weight decay, a held block-1 head
    TrainConfig(steps=200, batch_size=8, lr=1e-2, schedule="cosine", warmup_steps=10, weight_decay=0.0,
                beta2=0.95, log_every=100, eval_size=16, hold="1.2", seed=5),
], ids=["decay-mask", "cosine-hold"])
def test_the_trainers_adamw_gives_torchs_parameters_bit_for_bit(train_cfg):
    """Two Trainers of the same settings, one with torch.optim.AdamW(foreach=True), step by step: every
    parameter torch.equal after every step; W_E has no gradient for a stretch of steps (requires_grad off:
    its grad is None, both skip it, its step count falls behind the others) and block 0's b_O none before step 40
    (its state starts late)."""
    ours, theirs = Trainer(MODEL, TASK, train_cfg), _torch_twin(MODEL, TASK, train_cfg)
    assert isinstance(ours.optimizer, AdamW)
    for step in range(train_cfg.steps):
        for trainer in (ours, theirs):
            trainer.model.W_E.requires_grad_(not 100 <= step < 130)
            trainer.model.blocks[0].b_O.requires_grad_(step >= 40)
            trainer.run(1)
        for (name, a), b in zip(ours.model.named_parameters(), theirs.model.parameters()):
            assert torch.equal(a, b), (step, name)
        assert ours.last_loss == theirs.last_loss
    assert ours.history == [dict(row, seconds=mine["seconds"]) for row, mine in zip(theirs.history, ours.history)]
    for p, q in zip(ours.model.parameters(), theirs.model.parameters()):
        mine, torchs = ours.optimizer.state[p], theirs.optimizer.state[q]
        assert set(mine) == set(torchs)
        assert all(torch.equal(mine[k], torchs[k]) for k in mine)
    assert float(ours.optimizer.state[ours.model.W_E]["step"]) == train_cfg.steps - 30
    assert float(ours.optimizer.state[ours.model.blocks[0].b_O]["step"]) == train_cfg.steps - 40


def test_zero_grad_and_the_interface_the_trainer_uses():
    """param_groups' lr is read at each step; zero_grad(set_to_none=False) zeroes, True drops the grads;
    an empty parameter list is refused (the Trainer of a model without parameters keeps no optimizer)."""
    p = torch.nn.Parameter(torch.ones(3))
    opt = AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = torch.ones(3)
    opt.param_groups[0]["lr"] = 0.0
    opt.step()
    assert torch.equal(p.detach(), torch.ones(3))  # lr 0: no move, though the moments did
    opt.zero_grad(set_to_none=False)
    assert torch.equal(p.grad, torch.zeros(3))
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no grad: nothing moves, the step count stays
    assert float(opt.state[p]["step"]) == 1.0
    with pytest.raises(ValueError):
        AdamW([], lr=0.1)


@pytest.mark.slow
def test_a_training_imports_no_dynamo_nor_sympy():
    """A worker's whole path (the pool's worker module, a Trainer, a checkpoint) in a fresh interpreter
    leaves torch._dynamo, torch._inductor, sympy, mpmath and pandas out of sys.modules (the forkserver
    preloads what a worker imports, and every worker shares half of it in its PSS)."""
    code = """
import sys
from dataclasses import replace
from core.pool import worker
from core.training.run_config import RunConfig
from core.training.trainer import Trainer
settings = RunConfig.of(steps=30, batch_size=4)
trainer = Trainer(*settings.configs())
trainer.run(30)
worker.saved_checkpoint(trainer)
print(sorted(m for m in sys.modules if m.split('.')[0] in ('sympy', 'mpmath', 'pandas', 'pyarrow')
             or m.startswith(('torch._dynamo', 'torch._inductor'))))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
