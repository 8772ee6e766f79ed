"""The weights a seeded training run starts from: reset_parameters, then the reshaped embedding.

Both draw from the run's own generator (seeded with TrainConfig.seed), never torch's global one.
"""
from __future__ import annotations

import torch

from core.model.config import ModelConfig
from core.model.tinycharlm import TinyCharLM
from core.training.config import TrainConfig


@torch.no_grad()
def init_embedding(model: TinyCharLM, scale: float, shared: float, generator: torch.Generator) -> None:
    """Reshape W_E [V, D] after model.reset_parameters: multiply it by `scale`, then add one random
    direction of norm `shared` to every row.

    What it does, measured (bench/init_plateau.py, bench/README.md): the plateau before the induction
    drop is about three times shorter than from the plain start (scale 1, shared 0). The
    previous-token head does not form at once: in the shipped 2-block run block 1's best prev_token
    starts rising 25 to 50 steps before the drop's start, ahead of the induction heads, and crosses 0.5
    during the drop (core.training.onset; tests/test_claims.py). With a
    tied unembedding the shared direction s is not free at the output: logit b gains e_a.s (the same
    for every b: ignored by the softmax) and s.e_b, a per-token bias with a spread of about 0.8 nats at
    the start (core.training.overview.initial_logit_bias). Why the plateau is shorter is not established here.
    """
    if scale != 1.0:
        model.W_E.mul_(scale)
    if shared:
        direction = torch.randn(model.W_E.shape[1], generator=generator)
        model.W_E.add_(shared * direction / direction.norm())


def initial_model(model_cfg: ModelConfig, train_cfg: TrainConfig) -> TinyCharLM:
    """The model a seeded Trainer starts from (reset_parameters, then init_embedding)."""
    model = TinyCharLM(model_cfg)  # weights drawn below from the run's own generator, not torch's global one
    generator = torch.Generator().manual_seed(train_cfg.seed)
    model.reset_parameters(generator)
    init_embedding(model, train_cfg.embed_scale, train_cfg.embed_shared, generator)
    return model
