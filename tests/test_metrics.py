"""core.causal.metrics: log-probability, logit difference and probability of the right token side by side,
against an independent computation, the linearity that makes the logit difference additive,
and bad inputs."""
import numpy as np
import pytest
import torch

from core.causal import metrics, patching
from core.causal.corruptions import corrupt

from helpers import tiny_model


def _runs(model, L=5, B=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, model.cfg.vocab_size, (B, L), generator=g).repeat(1, 2)
    periods = torch.full((B,), L)
    return patching.prepare(model, clean, corrupt(clean, periods, model.cfg.vocab_size, g), periods)


def test_metric_values_match_a_loop_over_targets():
    model = tiny_model(2)
    runs = _runs(model)
    with torch.no_grad():
        logits = model.run_with_hooks(runs.clean)[0]
    got = metrics.metric_values(logits, runs.clean, runs.corrupted, runs.periods)
    lp, ld, pr = [], [], []
    for b in range(runs.clean.shape[0]):
        L = int(runs.periods[b])
        for t in range(L + 1, 2 * L):
            row = logits[b, t - 1]
            right, wrong = int(runs.clean[b, t]), int(runs.corrupted[b, t - L])
            lp.append(float(row.log_softmax(-1)[right]))
            ld.append(float(row[right] - row[wrong]))
            pr.append(float(row.softmax(-1)[right]))
    assert float(got["logprob"]) == pytest.approx(np.mean(lp), rel=1e-5)
    assert float(got["logprob"]) == pytest.approx(runs.m_clean, rel=1e-6)
    assert float(got["logit_diff"]) == pytest.approx(np.mean(ld), rel=1e-5)
    assert float(got["prob"]) == pytest.approx(np.mean(pr), abs=1e-6)


def test_logit_difference_effects_of_the_last_block_add_up_and_log_prob_ones_need_not():
    """The logit difference is linear in the final stream: patching every last-block head at once moves it
    by the sum of the single-head moves. The log-probability has no such property."""
    model = tiny_model(2, seed=3)
    runs = _runs(model, seed=3)
    df = metrics.head_effects_by_metric(model, runs)
    last = df[df["layer"] == 1].set_index("metric")
    both = patching.patch_heads(model, runs, [(1, h) for h in range(model.cfg.n_heads)])  # M (log-prob) only
    every = runs.corrupted_cache["resid"][2] + (runs.clean_cache["head_out"][1]
                                                - runs.corrupted_cache["head_out"][1]).sum(1)
    logits = model.run_with_hooks(resid=every, start=2)[0].detach()
    ld_all = float(metrics.metric_values(logits, runs.clean, runs.corrupted, runs.periods)["logit_diff"])
    ld = last.loc["logit_diff"]
    assert ld_all - ld["corrupted"].iloc[0] == pytest.approx((ld["patched"] - ld["corrupted"]).sum(), abs=1e-4)
    lp = last.loc["logprob"]
    assert abs((both - lp["corrupted"].iloc[0]) - (lp["patched"] - lp["corrupted"]).sum()) > 1e-3


def test_bad_inputs_are_refused():
    model = tiny_model(1)
    runs = _runs(model)
    logits = model.run_with_hooks(runs.clean)[0]
    with pytest.raises(ValueError, match="must match"):
        metrics.metric_values(logits, runs.clean, runs.corrupted[:, :-1], runs.periods)


def test_on_the_planted_circuit_every_metric_gives_the_known_answer():
    """The planted induction model (exercises/planted.py): the induction head 2.2 is all that reaches the logits
    beside the embedding, so patching it restores all of the gap under every metric, and a head that writes
    nothing moves none of them."""
    from exercises.planted import INDUCTION, PREV, TASK, planted_induction_model

    model = planted_induction_model()
    runs = patching.task_runs(model, TASK, 16, 0)
    df = metrics.head_effects_by_metric(model, runs)
    eff = df.set_index(["layer", "head", "metric"])["patch_effect"]
    for metric in ("logprob", "logit_diff", "prob"):
        assert eff.loc[(*INDUCTION, metric)] == pytest.approx(1, abs=1e-4), metric
        silent = [(l, h) for l in range(2) for h in range(model.cfg.n_heads) if (l, h) not in (PREV, INDUCTION)]
        assert all(abs(eff.loc[(l, h, metric)]) < 1e-6 for l, h in silent), metric
