"""TinyCharLM against docs/DESIGN.md: shapes, causality, the rotary property, the fused forward against
the per-head forward and an independent naive reference, the zero-block Gram form, and seeded
training."""
from __future__ import annotations

import json
import math

import pytest
import torch

from core.model.config import ModelConfig
from core.model.rope import apply_rope, rope_cos_sin
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.training.config import TrainConfig
from core.training.trainer import Trainer

from helpers import TINY, random_tokens, tiny_model
from naive import naive_forward, naive_rope

# ---------------------------------------------------------------------------------------------
# Shapes


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_layers", range(7))
def test_shapes_for_0_to_6_blocks(n_layers, bias):
    model = tiny_model(n_layers, bias)
    B, T = 3, 11
    V, D, H, dh = TINY["vocab_size"], TINY["d_model"], TINY["n_heads"], TINY["d_model"] // TINY["n_heads"]
    tokens = random_tokens(B, T)
    logits = model(tokens)
    assert logits.shape == (B, T, V)
    logits2, cache = model.run_with_cache(tokens)
    assert logits2.shape == (B, T, V)
    assert len(cache["resid"]) == n_layers + 1 and all(r.shape == (B, T, D) for r in cache["resid"])
    for key, shape in (("pattern", (B, H, T, T)), ("head_out", (B, H, T, D)), ("v", (B, H, T, dh))):
        assert len(cache[key]) == n_layers
        assert all(x.shape == shape for x in cache[key]), key
    for pattern in cache["pattern"]:
        assert torch.allclose(pattern.sum(-1), torch.ones(B, H, T))
        assert torch.all(pattern.triu(1) == 0)
    names = {n for n, _ in model.named_parameters()}
    assert any(n.endswith("b_Q") for n in names) == (bias and n_layers > 0)


@pytest.mark.parametrize("n_layers", [-1, 7])
def test_block_count_outside_0_to_6_is_refused(n_layers):
    with pytest.raises(ValueError, match="n_layers"):
        ModelConfig(n_layers=n_layers)


def test_default_config_matches_design():
    cfg = ModelConfig()
    assert (cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.n_layers, cfg.bias, cfg.rope_base) == \
        (64, 128, 4, 32, 2, False, 10000.0)
    model = TinyCharLM(cfg)
    assert model.blocks[0].W_Q.shape == (4, 128, 32) and model.blocks[0].W_O.shape == (4, 32, 128)
    assert model.W_E.shape == (64, 128)


# ---------------------------------------------------------------------------------------------
# Causality


@pytest.mark.parametrize("n_layers", [0, 1, 2])
def test_changing_a_later_token_never_changes_an_earlier_logit(n_layers):
    model = tiny_model(n_layers, bias=True, seed=1)
    T = 20
    tokens = random_tokens(2, T, seed=2)
    with torch.no_grad():
        base_fused = model(tokens)
        base_cached, _ = model.run_with_cache(tokens)
        for p in (0, 1, 7, 13, T - 1):
            changed = tokens.clone()
            changed[:, p] = (changed[:, p] + 5) % TINY["vocab_size"]
            for forward, base in ((model, base_fused), (lambda x: model.run_with_cache(x)[0], base_cached)):
                logits = forward(changed)
                assert torch.allclose(logits[:, :p], base[:, :p], rtol=0, atol=1e-5), f"position {p}"
                # the change itself is visible from position p on, so the test could see a leak
                assert (logits[:, p] - base[:, p]).abs().max() > 1e-2


# ---------------------------------------------------------------------------------------------
# Rotary embedding


def test_rope_tables_follow_the_design_formula():
    T, dh, base = 50, 8, 10000.0
    cos, sin = rope_cos_sin(T, dh, base)
    assert cos.shape == sin.shape == (T, dh)
    for t in (0, 1, 17, 49):
        for j in range(dh // 2):
            theta = t * base ** (-2 * j / dh)
            for col in (j, j + dh // 2):
                assert cos[t, col].item() == pytest.approx(math.cos(theta), abs=1e-6)
                assert sin[t, col].item() == pytest.approx(math.sin(theta), abs=1e-6)


def test_apply_rope_matches_explicit_rotate_half_and_preserves_norms():
    x = torch.randn(30, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cos, sin = rope_cos_sin(30, 8, 10000.0, torch.float64)
    rotated = apply_rope(x, cos, sin)
    assert torch.allclose(rotated, naive_rope(x, 10000.0), atol=1e-12)
    assert not torch.allclose(rotated, naive_rope(x, 10000.0, pairs="interleaved"), atol=1e-3)
    assert torch.allclose(rotated.norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(rotated[0], x[0])  # position 0 is not rotated


def test_rope_score_depends_only_on_offset():
    """Same q and k content at every position: the score q_i . k_j is a function of i - j alone."""
    T, dh = 100, 8
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(dh, generator=g, dtype=torch.float64), torch.randn(dh, generator=g, dtype=torch.float64)
    cos, sin = rope_cos_sin(T, dh, 10000.0, torch.float64)
    S = apply_rope(q.expand(T, dh), cos, sin) @ apply_rope(k.expand(T, dh), cos, sin).T  # [T, T]
    for offset in (0, 1, 5, 31, 60, -4):
        diag = S.diagonal(-offset)  # entries S[i, i - offset]
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-9), offset
    # ...and it does depend on the offset (otherwise the check above would be empty)
    assert S.diagonal(0)[0] - S.diagonal(-1)[0] != pytest.approx(0, abs=1e-3)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_model_pattern_scores_depend_only_on_offset(n_layers):
    """A sequence of one repeated token gives every position the same content, so in every block
    log A[i, i-k] - log A[i, i] (the score difference between offsets k and 0) is the same for
    every query i: no absolute position enters the scores."""
    model = tiny_model(n_layers, bias=True, seed=4, dtype=torch.float64)
    T = 80
    tokens = torch.full((1, T), 3)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    for pattern in cache["pattern"]:
        logA = pattern[0].log()  # [H, T, T]
        rel = {i: torch.stack([logA[:, i, i - k] - logA[:, i, i] for k in range(40)], -1) for i in (39, 55, 79)}
        assert torch.allclose(rel[39], rel[55], atol=1e-8) and torch.allclose(rel[39], rel[79], atol=1e-8)
        assert rel[39].abs().max() > 1e-2  # scores really vary with the offset


# ---------------------------------------------------------------------------------------------
# One model, three forwards


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_fused_forward_matches_per_head_forward_and_naive_reference(n_layers, bias):
    model = tiny_model(n_layers, bias, seed=5, dtype=torch.float64)
    tokens = random_tokens(2, 24, seed=6)
    with torch.no_grad():
        fused = model(tokens)
        cached, cache = model.run_with_cache(tokens)
    assert torch.allclose(fused, cached, rtol=1e-10, atol=1e-9)
    for b in range(tokens.shape[0]):
        ref_logits, ref_patterns = naive_forward(model.state_dict(), model.cfg.to_dict(), tokens[b])
        assert torch.allclose(fused[b], ref_logits, rtol=1e-9, atol=1e-9)
        for l in range(n_layers):
            assert torch.allclose(cache["pattern"][l][b], ref_patterns[l], atol=1e-10)
    # the heads' outputs add up to the block's update of the stream (plus b_O)
    for l in range(n_layers):
        update = cache["resid"][l + 1] - cache["resid"][l]
        b_O = model.blocks[l].b_O if bias else 0.0
        assert torch.allclose(cache["head_out"][l].sum(1) + b_O, update, atol=1e-9)


def test_reference_is_sensitive_to_the_rotary_convention():
    """The agreement above is not luck: with the interleaved pairing the reference disagrees."""
    model = tiny_model(1, seed=5, dtype=torch.float64)
    tokens = random_tokens(1, 24, seed=6)[0]
    with torch.no_grad():
        fused = model(tokens[None])[0]
    wrong, _ = naive_forward(model.state_dict(), model.cfg.to_dict(), tokens, pairs="interleaved")
    assert (fused - wrong).abs().max() > 1e-3


@pytest.mark.parametrize("bias", [False, True])
def test_float32_forwards_agree(bias):
    model = tiny_model(2, bias, seed=7)
    tokens = random_tokens(4, 40, seed=8)
    with torch.no_grad():
        fused = model(tokens)
        cached, _ = model.run_with_cache(tokens)
    ref = torch.stack([naive_forward(model.state_dict(), model.cfg.to_dict(), tokens[b])[0] for b in range(2)]).float()
    scale = ref.abs().max()  # logits run to a few hundred: compare at float32 precision of that scale
    assert (fused - cached).abs().max() < 1e-5 * scale
    assert (fused[:2] - ref).abs().max() < 1e-5 * scale


def test_zero_blocks_is_exactly_the_gram_form():
    model = tiny_model(0, seed=9)
    tokens = random_tokens(3, 17, seed=10)
    with torch.no_grad():
        expected = model.W_E[tokens] @ model.W_E.T
        assert torch.equal(model(tokens), expected)
        assert torch.equal(model.run_with_cache(tokens)[0], expected)


# ---------------------------------------------------------------------------------------------
# Seeded training


def _tiny_run(seed: int) -> Trainer:
    trainer = Trainer(ModelConfig(**TINY, n_layers=1), TaskConfig(4, 8, 24),
                      TrainConfig(steps=6, batch_size=8, seed=seed, log_every=2, eval_size=16))
    trainer.run(6)
    return trainer


def _history(trainer: Trainer) -> str:
    rows = [{k: v for k, v in row.items() if k != "seconds"} for row in trainer.history]
    return json.dumps(rows, sort_keys=True)  # NaN (no step yet) compares equal as text


def test_training_is_deterministic_for_a_seed_and_differs_between_seeds():
    a, b, c = _tiny_run(11), _tiny_run(11), _tiny_run(12)
    assert a.step == b.step == 6 and len(a.history) == 4
    assert _history(a) == _history(b)
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))
    assert _history(a) != _history(c)
    assert [r["train_loss"] for r in a.history[1:]] != [r["train_loss"] for r in c.history[1:]]
    assert not torch.equal(a.model.W_E, c.model.W_E)


def test_rotary_backward_is_the_inverse_rotation():
    """The hand-written backward of apply_rope agrees with finite differences (float64)."""
    cos, sin = rope_cos_sin(7, 6, 10000.0, torch.float64)
    x = torch.randn(2, 3, 7, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, cos, sin), (x,))


def test_run_with_cache_without_per_head_outputs_gives_the_same_logits_and_patterns():
    """per_head=False (the trainer's logs) skips head_out but changes nothing else."""
    tokens = torch.randint(0, 16, (3, 12), generator=torch.Generator().manual_seed(0))
    for bias in (False, True):
        torch.manual_seed(2)
        model = TinyCharLM(ModelConfig(**TINY, n_layers=2, bias=bias))  # the real init: unsaturated patterns
        full_logits, full = model.run_with_cache(tokens)
        logits, light = model.run_with_cache(tokens, per_head=False)
        assert torch.allclose(logits, full_logits, atol=1e-5) and torch.allclose(logits, model(tokens), atol=1e-5)
        for a, b in zip(full["pattern"], light["pattern"]):
            assert torch.allclose(a, b, atol=1e-6)
        assert light["head_out"] == [None, None]
