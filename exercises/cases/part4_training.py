"""Part 4's checks (training and the drop): each exercise's cases, the lab's answer and the typical
mistakes, each a wrong computation with its sentence."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from exercises.cases.inputs import batch
from exercises.engine import Case, Check, picked

CHECKS: dict[str, Check] = {}  # exercise name -> its check, each one written below the functions it uses


def _train_cases(model, task, label):
    if label.startswith("the planted"):
        return []
    batches = [batch(model, task, n=4, seed=s, seq_len=min(task.seq_len, 64))[0] for s in (0, 1)]
    return [Case(f"{label}, two steps of SGD", {"model": model, "batches": batches})]


def _train_run(fn, model, batches):
    """Two steps with the student's step function on a fresh copy of the model: (loss 1, loss 2, weights)."""
    model = copy.deepcopy(model).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)  # plain SGD: a wrong loss shows in the weights
    losses = tuple(fn(model, opt, b) for b in batches)
    return (*losses, torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


def _lab_step(shift=1, zero=True, step=True, reduction="mean"):
    def one(model, optimizer, tokens):
        logits = model(tokens)
        V = logits.shape[-1]
        pred = logits[:, :-1] if shift else logits
        target = tokens[:, 1:] if shift else tokens
        loss = F.cross_entropy(pred.reshape(-1, V), target.reshape(-1), reduction=reduction)
        if zero:
            optimizer.zero_grad()
        loss.backward()
        if step:
            optimizer.step()
        return loss.item()
    return one


def _train_wrong(**kw):
    return lambda model, batches: _train_run(_lab_step(**kw), model, batches)


CHECKS["train_step"] = Check(_train_cases, _train_wrong(), (), [
    ("Off by one position: the logits at position t - 1 predict x_t, so compare logits[:, :-1] with "
     "tokens[:, 1:]", _train_wrong(shift=0)),
    ("The gradients pile up from step to step: call optimizer.zero_grad() before backward",
     _train_wrong(zero=False)),
    ("The weights did not change: call optimizer.step() after backward", _train_wrong(step=False)),
    ("Not normalised: the loss is the mean cross-entropy over the targets, not their sum",
     _train_wrong(reduction="sum"))], run=lambda fn, model, batches: _train_run(fn, model, batches), grad=True)


def _drop_cases(model, task, label):
    if label.startswith("a small"):
        return []
    if label.startswith("the planted"):
        V = model.cfg.vocab_size  # ln 16 / 2 = 1.386
        curve = [2.77, 2.7, 2.6, 1.5, 1.2, 1.45, 0.9, 0.3, 0.2]
        steps = list(range(0, 10 * len(curve), 10))
        return [Case("a planted curve that falls at step 40", {"steps": steps, "losses": curve, "vocab_size": V}),
                Case("a planted curve that touches ln V / 2 exactly", {
                    "steps": [0, 25, 50, 75], "losses": [2.7, math.log(V) / 2, 1.0, 0.5], "vocab_size": V}),
                Case("a planted curve that never falls", {
                    "steps": [0, 100, 200], "losses": [2.7, 2.5, 2.2], "vocab_size": V})]
    history = picked()["info"].get("history") or []
    rows = [r for r in history if isinstance(r.get("loss_later_copies"), (int, float))
            and not math.isnan(r["loss_later_copies"])] if model is picked()["model"] else []
    if not rows:
        return []
    return [Case(f"{label}'s training history", {"steps": [int(r["step"]) for r in rows],
                                                  "losses": [float(r["loss_later_copies"]) for r in rows],
                                                  "vocab_size": model.cfg.vocab_size})]


def _drop(steps, losses, vocab_size, limit=None, index=False, last=False, strict=True):
    from core.model.drop import drop_step, drop_threshold

    limit = drop_threshold(vocab_size) if limit is None else limit
    below = [i for i, l in enumerate(losses) if (l < limit if strict else l <= limit)]
    if not below:
        return None
    if not (index or last or not strict) and limit == drop_threshold(vocab_size):
        return drop_step(steps, losses, vocab_size)
    i = below[-1] if last else below[0]
    return i if index else steps[i]


CHECKS["find_drop"] = Check(_drop_cases, _drop, (), [
    ("The line is ln V / 2, half the loss of a uniform guess, not ln V",
     lambda steps, losses, vocab_size: _drop(steps, losses, vocab_size, limit=math.log(vocab_size))),
    ("Returned the position in the list, not the logged step", lambda **a: _drop(**a, index=True)),
    ("Returned the last step below the line: the drop step is the first", lambda **a: _drop(**a, last=True)),
    ("A loss exactly at ln V / 2 has not dropped yet: use <, not <=", lambda **a: _drop(**a, strict=False)),
    ("Used log base 2: losses are in nats, so use the natural log (math.log)",
     lambda steps, losses, vocab_size: _drop(steps, losses, vocab_size, limit=math.log2(vocab_size) / 2))])
