"""Three metrics for the same patching experiment side by side (Heimersheim & Nanda, 2024, "How to use and
interpret activation patching"): on the second-copy targets L+1 <= t < 2L of core.causal.patching,

- logprob:    the right token's log-probability (the page's M);
- logit_diff: the right token's logit minus the logit of the token the corrupted run's first copy puts
              there (corrupted[t - L], what copying from the corrupted context would give);
- prob:       the right token's probability.

Why prefer one: the logit difference is linear in the final residual stream, so the effects of heads that
write straight to the logits add up, and it measures the right answer against the wrong one the
corruption offers. The log-probability also moves when other tokens' logits move; the probability
saturates near 0 and 1, so a patch can matter yet barely move it (or the other way round).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.causal.patching import CHUNK_POSITIONS, PatchRuns, target_mask
from core.model.symbols import with_labels
from core.model.tinycharlm import TinyCharLM

METRICS = ("logprob", "logit_diff", "prob")


def metric_values(logits: torch.Tensor, clean: torch.Tensor, corrupted: torch.Tensor,
                  periods: torch.Tensor) -> dict[str, torch.Tensor]:
    """logits [..., B, T, V] -> {metric: [...]}, each the mean over every second-copy target of every
    sequence. ValueError when the token batches' shapes differ."""
    if clean.shape != corrupted.shape or logits.shape[-3:-1] != clean.shape:
        raise ValueError(f"tokens {tuple(clean.shape)} and {tuple(corrupted.shape)} must match the logits' "
                         f"[B, T] {tuple(logits.shape[-3:-1])}.")
    mask = target_mask(periods, clean.shape[1])
    b, i = mask.nonzero(as_tuple=True)  # target t = i + 1, predicted at position i
    picked = logits[..., b, i, :]  # [..., N, V]
    right = clean[b, i + 1].expand(*picked.shape[:-1])[..., None]
    wrong = corrupted[b, i + 1 - periods[b]].expand(*picked.shape[:-1])[..., None]
    logp = picked.log_softmax(-1).gather(-1, right)[..., 0]
    diff = (picked.gather(-1, right) - picked.gather(-1, wrong))[..., 0]
    return {"logprob": logp.mean(-1), "logit_diff": diff.mean(-1), "prob": logp.exp().mean(-1)}


def patched_head_values(model: TinyCharLM, clean_cache: dict, corrupted_cache: dict, measure) -> list[dict]:
    """The one head-patching loop: each head's clean output at every position added into the corrupted run
    (the corrupted stream above its block plus clean minus corrupted head output), the blocks above rerun.
    measure(logits [G, B, T, V]) -> {metric: [G]}. Returns one {"layer", "head", metric: value ...} per head."""
    B, T = clean_cache["resid"][0].shape[:2]
    per = max(1, CHUNK_POSITIONS // (B * T))
    rows = []
    for layer in range(model.cfg.n_layers):
        delta = (clean_cache["head_out"][layer] - corrupted_cache["head_out"][layer]).transpose(0, 1)
        streams = corrupted_cache["resid"][layer + 1][None] + delta  # [H, B, T, D]
        vals: dict[str, list] = {}
        for lo in range(0, streams.shape[0], per):
            for k, v in measure(model.run_with_hooks(resid=streams[lo:lo + per], start=layer + 1)[0]).items():
                vals.setdefault(k, []).append(v)
        got = {k: torch.cat(v).tolist() for k, v in vals.items()}
        rows += [{"layer": layer, "head": h, **{k: got[k][h] for k in got}} for h in range(streams.shape[0])]
    return rows


def effect_frame(model: TinyCharLM, clean_cache: dict, corrupted_cache: dict, base: dict, corr: dict, measure,
                 names) -> pd.DataFrame:
    """patched_head_values as rows label, layer, head, metric, clean, corrupted, patched, patch_effect
    ((patched - corrupted) / (clean - corrupted), NaN where the two runs do not differ); base and corr:
    {metric: value} of the clean and corrupted runs."""
    rows = []
    values = patched_head_values(model, clean_cache, corrupted_cache, measure)
    for k in names:
        gap = base[k] - corr[k]
        rows += [{"layer": r["layer"], "head": r["head"], "metric": k, "clean": base[k], "corrupted": corr[k],
                  "patched": r[k], "patch_effect": (r[k] - corr[k]) / gap if gap else np.nan} for r in values]
    cols = ["layer", "head", "metric", "clean", "corrupted", "patched", "patch_effect"]
    return with_labels(pd.DataFrame(rows, columns=cols))


@torch.no_grad()
def head_effects_by_metric(model: TinyCharLM, runs: PatchRuns) -> pd.DataFrame:
    """Patching (1), each head's clean output at every position into the corrupted run, measured with each
    metric (effect_frame's rows)."""
    def measure(logits):
        return metric_values(logits, runs.clean, runs.corrupted, runs.periods)

    def measured(tokens):
        return {k: float(v) for k, v in measure(model.run_with_hooks(tokens)[0]).items()}

    return effect_frame(model, runs.clean_cache, runs.corrupted_cache, measured(runs.clean),
                        measured(runs.corrupted), measure, METRICS)


# The Markov-chain task (core.model.markov): the clean sequence's bigram strategy is the right answer.
MARKOV_METRICS = ("neg_kl_bigram", "logprob")


def markov_metric_values(logits: torch.Tensor, clean: torch.Tensor, bigram: torch.Tensor,
                         n_states: int) -> dict[str, torch.Tensor]:
    """logits [..., B, T, V] -> {metric: [...]} over every target 1..T-1 of every clean sequence [B, T]:
    neg_kl_bigram = minus KL(bigram strategy of the clean context || model), 0 for a perfect counter;
    logprob = the clean next token's log-probability. bigram: strategy_probs(clean)["bigram"], [B, T, k].
    Only the first n_states logits count (core.model.markov.strategy_kl)."""
    from core.model.markov import kl_to

    if logits.shape[-3:-1] != clean.shape or bigram.shape[:2] != clean.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and the bigram strategy {tuple(bigram.shape)} must match "
                         f"the tokens' [B, T] {tuple(clean.shape)}.")
    log_q = logits[..., :-1, :n_states].double().log_softmax(-1)
    right = clean[:, 1:].expand(*log_q.shape[:-1])[..., None]
    return {"neg_kl_bigram": -kl_to(bigram[:, :-1], log_q).mean((-2, -1)),
            "logprob": log_q.gather(-1, right)[..., 0].mean((-2, -1))}
