"""Small planted models whose answers are known, for the exercise checks (exercises/checks.py).

- `planted_induction_model()`: a hand-built two-block induction circuit (V = 16, d_model 128, 4 heads).
  Stream layout: dims 0..15 hold the token (one-hot), dim 16 a direction shared by every token, dims
  32..47 the previous token. Head 1.1 (layer 0, head 0) is a previous-token head: its query and key
  read only the shared direction, with the key rotated one position ahead, so every query scores
  offset 1 highest; it copies the token it attends to into dims 32..47. Head 2.2 (layer 1, head 1)
  is an induction head: its query reads the current token, its key the previous-token slot, so it
  attends to the position after an earlier occurrence of the current token and copies that token
  to the logits (its OV copying matrix is the identity). Every other head writes nothing (W_O = 0).
  Known answers: prev_token of 1.1 and induction of 2.2 near 1; ov_diag_top1 of 2.2 is 1; patching
  2.2 restores most of M; head 1.1 K-composes with 2.2.
- `random_model()`: a small random TinyCharLM (V = 16, d_model 32, 2 heads, 2 blocks), where every
  head writes something: a mistake that the planted circuit hides shows here.
The lab's own tests use the same models (tests/test_patching.py); exercises/ needs nothing from tests/.
"""
from __future__ import annotations

import torch

from core.model.config import ModelConfig
from core.model.rope import rope_cos_sin
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM

V, D, H = 16, 128, 4
SLOT = 32  # first dim of the previous-token slot
SHARED = 16
PREV, INDUCTION = (0, 0), (1, 1)
SHARP, MATCH, COPY = 12.0, 30.0, 12.0  # previous-token query scale, induction query scale, induction output scale
TASK = TaskConfig(period_min=6, period_max=10, seq_len=30)


def planted_induction_model() -> TinyCharLM:
    cfg = ModelConfig(vocab_size=V, d_model=D, n_heads=H, n_layers=2)
    model = TinyCharLM(cfg).eval()
    dh = cfg.d_head
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for block in model.blocks:
            for W in (block.W_Q, block.W_K, block.W_V):
                W.copy_(torch.randn(W.shape, generator=g) * D ** -0.5)
            block.W_O.zero_()
        E = torch.zeros(V, D)
        E[:, :V] = torch.eye(V)
        E[:, SHARED] = 1.0
        model.W_E.copy_(E)
        b0 = model.blocks[0]  # previous-token head: q = u from the shared direction, k = u rotated by one
        for W in (b0.W_Q, b0.W_K, b0.W_V):
            W[0].zero_()
        u = torch.zeros(dh)
        u[list(range(6))] = SHARP  # the six fastest rotary pairs (j, j + dh/2)
        cos, sin = rope_cos_sin(2, dh, cfg.rope_base)
        half = dh // 2
        rot = torch.cat([-u[half:], u[:half]])
        b0.W_Q[0, SHARED] = u
        b0.W_K[0, SHARED] = u * cos[1] + rot * sin[1]
        b0.W_V[0, :V, :V] = torch.eye(V)
        b0.W_O[0, :V, SLOT:SLOT + V] = torch.eye(V)
        b1 = model.blocks[1]  # induction head: token -> slow rotary dims, previous-token slot -> the same dims
        for W in (b1.W_Q, b1.W_K, b1.W_V):
            W[1].zero_()
        slow = [j for j in range(half // 2, half)] + [j + half for j in range(half // 2, half)]
        for a in range(V):
            b1.W_Q[1, a, slow[a]] = MATCH
            b1.W_K[1, SLOT + a, slow[a]] = 1.0
        b1.W_V[1, :V, :V] = torch.eye(V)
        b1.W_O[1, :V, :V] = torch.eye(V) * COPY
    return model


def random_model(seed: int = 0) -> TinyCharLM:
    """A small random two-block model: every head reads and writes something."""
    g = torch.Generator().manual_seed(seed)
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=2)).eval()
    with torch.no_grad():
        model.reset_parameters(generator=g)
        for block in model.blocks:
            block.W_O.mul_(6.0)  # heads that matter, so that every patch and ablation moves the loss
    return model
