"""Part 4: training and the drop (page: Train).

Your file: write each function below, then check it with

    python -m pytest exercises/test_part4_training.py

from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).
Hints and solutions: the Exercises page of the app, or exercises/solutions/part4_training.py.
"""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401


def train_step(model, optimizer: torch.optim.Optimizer, tokens: torch.Tensor) -> float:
    """One training step of TinyCharLM.

    model: a TinyCharLM in training mode; optimizer: e.g. torch.optim.AdamW(model.parameters());
    tokens [B, T]. The loss is the mean cross-entropy over every target t = 1..T-1, the logits at
    position t - 1 predicting x_t. Clear the old gradients, backpropagate, take one optimizer step.
    Return the loss before the step, as a float.
    """
    raise NotImplementedError("not written yet")


def find_drop(steps: list[int], losses: list[float], vocab_size: int) -> int | None:
    """The drop step of a training run.

    steps and losses: the logged steps and the later-copy loss (nats) at each, in order. The drop step
    is the first logged step whose loss is below ln V / 2, half the loss of a uniform guess over the V
    tokens. Return that step, or None when the loss never gets there.
    """
    raise NotImplementedError("not written yet")
