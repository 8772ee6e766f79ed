"""Part 4: training and the drop (page: Train). Solutions."""
import math

import torch
import torch.nn.functional as F


def train_step(model, optimizer: torch.optim.Optimizer, tokens: torch.Tensor) -> float:
    """One training step of TinyCharLM.

    model: a TinyCharLM in training mode; optimizer: e.g. torch.optim.AdamW(model.parameters());
    tokens [B, T]. The loss is the mean cross-entropy over every target t = 1..T-1, the logits at
    position t - 1 predicting x_t. Clear the old gradients, backpropagate, take one optimizer step.
    Return the loss before the step, as a float.
    """
    logits = model(tokens)
    V = logits.shape[-1]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def find_drop(steps: list[int], losses: list[float], vocab_size: int) -> int | None:
    """The drop step of a training run.

    steps and losses: the logged steps and the later-copy loss (nats) at each, in order. The drop step
    is the first logged step whose loss is below ln V / 2, half the loss of a uniform guess over the V
    tokens. Return that step, or None when the loss never gets there.
    """
    limit = math.log(vocab_size) / 2
    for step, loss in zip(steps, losses):
        if loss < limit:
            return step
    return None
