"""core.reading.attribution and core.causal.attribution against what they promise, checked through other ways
of computing the same numbers: the model's own logits, knocking a last-block head out (its term is exactly what
the logit loses then), run_with_hooks's recorded q and k, and core.reading.paths's path expansion."""
from __future__ import annotations

import pytest
import torch

from core.causal.attribution import logit_diff_attribution
from core.causal.corruptions import corrupt
from core.causal.metrics import metric_values
from core.model.hooks import hook_name
from core.model.symbols import head_label
from core.model.task import TaskConfig, sample_batch
from core.reading.ablation import ablated_logits
from core.reading.attribution import composed_ov_circuit, direct_logit_attribution, full_k_circuit, part_labels
from core.reading.paths import stream_paths

from helpers import tiny_model


@pytest.fixture(autouse=True)
def no_grad():
    with torch.no_grad():
        yield

TASK = TaskConfig(period_min=4, period_max=7, seq_len=16)


def _batch(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(TASK, 6, model.cfg.vocab_size, generator=g)
    return tokens, periods, corrupt(tokens, periods, model.cfg.vocab_size, g)


def _right(logits, tokens):
    return logits[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0].double()


@pytest.mark.parametrize("bias", [False, True])
def test_the_terms_sum_to_the_right_tokens_logit(bias):
    model = tiny_model(2, bias=bias)
    tokens, _, _ = _batch(model)
    dla = direct_logit_attribution(model, tokens)
    labels = part_labels(model)
    assert dla.shape == (len(labels), *tokens[:, 1:].shape)
    assert labels[:3] == ["embedding", "1.1", "1.2"] and (labels[-1] == "b_O block 2") == bias
    assert torch.allclose(dla.double().sum(0), _right(model(tokens), tokens), atol=1e-3, rtol=1e-4)


def test_a_last_block_heads_term_is_what_knocking_it_out_costs():
    model = tiny_model(2)
    tokens, _, _ = _batch(model, 1)
    dla = direct_logit_attribution(model, tokens)
    full = _right(model(tokens), tokens)
    for h in range(model.cfg.n_heads):
        lost = full - _right(ablated_logits(model, tokens, {(1, h): "zero"}), tokens)
        assert torch.allclose(dla[1 + model.cfg.n_heads + h].double(), lost, atol=1e-3, rtol=1e-4)
    assert torch.allclose(dla[0], (model.W_E[tokens[:, :-1]] * model.W_E[tokens[:, 1:]]).sum(-1))


@pytest.mark.parametrize("bias", [False, True])
def test_the_logit_difference_terms_sum_to_the_metric(bias):
    model = tiny_model(2, bias=bias, seed=3)
    tokens, periods, corrupted = _batch(model, 2)
    terms = logit_diff_attribution(model, tokens, corrupted, periods)
    want = metric_values(model(tokens), tokens, corrupted, periods)["logit_diff"]
    assert terms.shape == (len(part_labels(model)),)
    assert float(terms.sum()) == pytest.approx(float(want), abs=1e-3, rel=1e-4)
    one = tiny_model(1, seed=4)  # one block: a head's term is what zero-ablating it costs the metric
    tokens, periods, corrupted = _batch(one, 5)
    terms = logit_diff_attribution(one, tokens, corrupted, periods)
    base = float(metric_values(one(tokens), tokens, corrupted, periods)["logit_diff"])
    for h in range(one.cfg.n_heads):
        knocked = metric_values(ablated_logits(one, tokens, {(0, h): "zero"}), tokens, corrupted, periods)
        assert float(terms[1 + h]) == pytest.approx(base - float(knocked["logit_diff"]), abs=1e-3, rel=1e-4)


def test_the_composed_ov_circuit_is_the_path_expansions_composed_term():
    """Every position attending to itself: the path 1.h -> 2.k at token a is W_E[a] W_OV^1h W_OV^2k."""
    model = tiny_model(2, seed=6)
    V, H = model.cfg.vocab_size, model.cfg.n_heads
    tokens = torch.arange(V)[None]
    eye = [torch.eye(V).expand(1, H, V, V)] * 2
    paths = stream_paths(model, tokens, eye)
    for w, r in [(0, 1), (2, 3), (1, 1)]:
        path = paths[f"{head_label(0, w)}→{head_label(1, r)}"][0]
        assert torch.allclose(composed_ov_circuit(model, (0, w), (1, r)), path @ model.W_E.T, atol=1e-3, rtol=1e-4)
    with pytest.raises(ValueError):
        composed_ov_circuit(model, (1, 0), (1, 1))


def test_the_full_k_circuit_is_the_readers_q_dot_k_on_written_streams():
    """Block 2 run on two streams: each token's embedding (queries) and the writer's output for each token
    (keys); q k^T before rotary, read from run_with_hooks, is the full K-composition circuit."""
    model = tiny_model(2, seed=7)
    V = model.cfg.vocab_size
    b0 = model.blocks[0]
    for w, r in [(0, 2), (3, 1)]:
        keys_stream = model.W_E @ b0.W_V[w] @ b0.W_O[w]
        names = [hook_name(1, "attn.hook_q"), hook_name(1, "attn.hook_k")]
        with torch.no_grad():
            _, qc = model.run_with_hooks(resid=model.W_E[None], start=1, cache=names)
            _, kc = model.run_with_hooks(resid=keys_stream[None], start=1, cache=names)
        want = qc[names[0]][0, r] @ kc[names[1]][0, r].T
        assert want.shape == (V, V)
        assert torch.allclose(full_k_circuit(model, (0, w), (1, r)), want, atol=1e-3, rtol=1e-4)
