"""A hand-built two-block induction circuit with known answers (used by tests/test_patching.py).

Stream layout (d_model 128, 4 heads of 32, V = 16): dims 0..15 hold the token (one-hot), dim 16 a
direction shared by every token (it adds the same to every logit, so it changes no prediction),
dims 32..47 the previous token. Only two heads write anything:
- head 1.1 (layer 0, head 0), the previous-token head: its query and key read only the shared
  direction, with the key rotated one position ahead, so every query scores offset 1 highest; it
  copies the token it attends to into dims 32..47.
- head 2.2 (layer 1, head 1), the induction head: its query reads the current token, its key the
  previous-token slot (through rotary pairs so slow that they hardly turn over a sequence), so it
  attends to the position after an earlier occurrence of the current token; it copies that
  position's token to the logits.
Every other head has W_O = 0 (its other weights are random): it writes exactly nothing.
"""
from __future__ import annotations

import torch

from core.model.task import TaskConfig
from core.model.tinycharlm import ModelConfig, TinyCharLM, rope_cos_sin

V, D, H = 16, 128, 4
SLOT = 32  # first dim of the previous-token slot
SHARED = 16
PREV, INDUCTION = (0, 0), (1, 1)
TASK = TaskConfig(period_min=6, period_max=10, seq_len=30)


def planted_induction_model(sharp: float = 12.0, match: float = 30.0, copy: float = 12.0) -> TinyCharLM:
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
        # previous-token head: q = u from the shared direction, k = u rotated by one position
        b0 = model.blocks[0]
        for W in (b0.W_Q, b0.W_K, b0.W_V):
            W[0].zero_()
        fast = list(range(6))  # the six fastest rotary pairs (j, j + dh/2)
        u = torch.zeros(dh)
        u[fast] = sharp
        cos, sin = rope_cos_sin(2, dh, cfg.rope_base)
        half = dh // 2
        rot = torch.cat([-u[half:], u[:half]])
        b0.W_Q[0, SHARED] = u
        b0.W_K[0, SHARED] = u * cos[1] + rot * sin[1]
        b0.W_V[0, :V, :V] = torch.eye(V)
        b0.W_O[0, :V, SLOT:SLOT + V] = torch.eye(V)
        # induction head: token -> slow rotary dims, previous-token slot -> the same dims
        b1 = model.blocks[1]
        for W in (b1.W_Q, b1.W_K, b1.W_V):
            W[1].zero_()
        slow = [j for j in range(half // 2, half)] + [j + half for j in range(half // 2, half)]  # 16 dims
        for a in range(V):
            b1.W_Q[1, a, slow[a]] = match
            b1.W_K[1, SLOT + a, slow[a]] = 1.0
        b1.W_V[1, :V, :V] = torch.eye(V)
        b1.W_O[1, :V, :V] = torch.eye(V) * copy
    return model
