"""The training forward (core.model.tinycharlm, on each kernel core.model.attention can choose) against an
independent oracle:
per-head q, k, v from the stored weights, rotate_half rotary written out here, and
F.scaled_dot_product_attention; the held head as A = one-hot on i-1. Values and gradients of every
parameter, in float64 (gradcheck) and float32 (the precision the lab trains in), on the configurations
the lab trains: biases on and off, a held head on and off, 0-6 blocks, the presets' shapes, T up to 384.
Every test runs twice: with the eager kernel (ATTENTION_LAB_ATTENTION=eager) and with the compiled one
(the default where it builds; skipped, saying why, where it does not).
"""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from core.model.attention import pair_order
from core.model.config import MAX_LAYERS, ModelConfig
from core.model.hooks import HoldPrevious, Hooks
from core.model.task import sample_batch
from core.model.tinycharlm import AttentionBlock, TinyCharLM
from core.training.presets import PRESETS

from naive import rope_batched as oracle_rope


@pytest.fixture(autouse=True, params=["eager", "cpp"])
def kernel(request, monkeypatch):
    """Which kernel the model's training forward runs in this test."""
    from core.model import attention_cpp

    if request.param == "cpp" and not attention_cpp.available():
        pytest.skip(f"compiled attention unavailable: {attention_cpp.reason()}")
    monkeypatch.setenv(attention_cpp.ENV_SWITCH, request.param)
    return request.param


def oracle_forward(model: TinyCharLM, tokens: torch.Tensor) -> torch.Tensor:
    """The model's logits computed head by head with SDPA (no core.model.attention)."""
    c = model.cfg
    h = model.W_E[tokens]
    T = tokens.shape[1]
    for layer, block in enumerate(model.blocks):
        q, k, v = (torch.einsum("btd,hde->bhte", h, W) for W in (block.W_Q, block.W_K, block.W_V))
        if c.bias:
            q, k, v = q + block.b_Q[:, None], k + block.b_K[:, None], v + block.b_V[:, None]
        z = F.scaled_dot_product_attention(oracle_rope(q, c.rope_base), oracle_rope(k, c.rope_base), v,
                                           is_causal=True)
        if layer == 0 and model.held_head is not None:
            hd = model.held_head
            held = torch.cat([v[:, hd, :1], v[:, hd, :T - 1]], 1)  # query i reads value i-1 (0 reads 0)
            z = torch.cat([z[:, :hd], held[:, None], z[:, hd + 1:]], 1)
        h = h + torch.einsum("bhte,hed->btd", z, block.W_O) + (block.b_O if c.bias else 0.0)
    return h @ model.W_E.T


def random_model(cfg: ModelConfig, hold: int | None, dtype=torch.float32, seed: int = 0) -> TinyCharLM:
    model = TinyCharLM(cfg)
    g = torch.Generator().manual_seed(seed)
    model.reset_parameters(g)
    with torch.no_grad():
        for block in model.blocks:
            for W in (block.W_Q, block.W_K):
                W.mul_(3.0)  # sharper patterns than at initialisation, as in a trained model
            if cfg.bias:
                for b in (block.b_Q, block.b_K, block.b_V, block.b_O):
                    b.normal_(0.0, 0.5, generator=g)
    if hold is not None and cfg.n_layers:
        model.hold_previous(hold)
    return model.to(dtype)


def grads_of(model: TinyCharLM, logits: torch.Tensor, seed: int = 1) -> dict[str, torch.Tensor]:
    weight = torch.randn(logits.shape, generator=torch.Generator().manual_seed(seed), dtype=logits.dtype)
    model.zero_grad()
    (logits * weight).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| over the largest |b|."""
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def assert_close(a: torch.Tensor, b: torch.Tensor, rtol: float, what: str):
    err = rel_err(a, b)
    assert err < rtol, f"{what}: max error {err:.2e} of the largest entry (allowed {rtol:.0e})"


def agree(model: TinyCharLM, tokens: torch.Tensor, rtol: float | None = None):
    """The model's logits and gradients against the oracle's. rtol None (a float32 model): the error
    against the float64 oracle must be within 3x (+1e-6) the float32 oracle's own error, i.e. the
    kernel is as exact as SDPA in float32; else a fixed relative tolerance."""
    logits = model(tokens)
    g_new = grads_of(model, logits)
    ref = oracle_forward(model, tokens)
    g_ref = grads_of(model, ref)
    if rtol is not None:
        assert_close(logits, ref, rtol, "logits")
        for name in g_ref:
            assert_close(g_new[name], g_ref[name], rtol, f"gradient of {name}")
        return
    exact = copy.deepcopy(model).double()
    ref64 = oracle_forward(exact, tokens)
    g64 = grads_of(exact, ref64)
    for what, new, r32, r64 in [("logits", logits, ref, ref64)] + [
            (f"gradient of {n}", g_new[n], g_ref[n], g64[n]) for n in g64]:
        err, err_sdpa = rel_err(new, r64), rel_err(r32, r64)
        assert err <= 3 * err_sdpa + 1e-6, f"{what}: error {err:.2e} against float64, SDPA's {err_sdpa:.2e}"


@pytest.mark.parametrize("bias,hold", [(False, None), (True, 1)])
def test_gradcheck_float64(bias, hold):
    """One block's training forward, gradients of the stream and of every weight."""
    torch.manual_seed(0)
    block = AttentionBlock(ModelConfig(d_model=12, n_heads=3, bias=bias)).double()
    for p in block.parameters():
        torch.nn.init.normal_(p, 0.0, 0.5)
    hooks = Hooks({} if hold is None else {"attn.hook_pattern": HoldPrevious(hold)})
    h = torch.randn(2, 7, 12, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, *_: block(x, hooks), (h, *block.parameters()))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("hold", [None, 2])
def test_float64_matches_the_sdpa_oracle_to_rounding(bias, hold):
    model = random_model(ModelConfig(n_layers=2, bias=bias), hold, torch.float64)
    tokens = torch.randint(0, 64, (3, 40), generator=torch.Generator().manual_seed(2))
    agree(model, tokens, 1e-12)


@pytest.mark.parametrize("n_layers", range(MAX_LAYERS + 1))
@pytest.mark.parametrize("bias,hold", [(False, None), (True, None), (False, 1), (True, 3)])
def test_float32_agrees_with_sdpa_for_every_block_count(n_layers, bias, hold):
    model = random_model(ModelConfig(n_layers=n_layers, bias=bias), hold, seed=n_layers)
    tokens = torch.randint(0, 64, (4, 96), generator=torch.Generator().manual_seed(n_layers))
    agree(model, tokens)


@pytest.mark.parametrize("name", list(PRESETS))
def test_float32_agrees_on_each_preset_at_its_training_shape(name):
    p = PRESETS[name]
    model = random_model(p.model, None)
    task = p.train.train_task(p.task)
    tokens, _ = sample_batch(task, p.train.batch_size, p.model.vocab_size, torch.Generator().manual_seed(0))
    agree(model, tokens)


@pytest.mark.parametrize("bias,hold", [(False, None), (True, 0)])
def test_float32_agrees_at_the_longest_sequence(bias, hold):
    model = random_model(ModelConfig(n_layers=2, bias=bias), hold)
    tokens = torch.randint(0, 64, (2, 384), generator=torch.Generator().manual_seed(3))
    agree(model, tokens)


def test_other_head_widths_agree():
    model = random_model(ModelConfig(d_model=96, n_heads=6, n_layers=2, bias=True), 5)
    tokens = torch.randint(0, 64, (3, 50), generator=torch.Generator().manual_seed(4))
    agree(model, tokens)


def test_pair_order_puts_each_rotary_pair_side_by_side():
    order = pair_order(8).tolist()
    assert order == [0, 4, 1, 5, 2, 6, 3, 7]
    assert sorted(order) == list(range(8))


def test_a_held_head_gives_its_q_and_k_no_gradient():
    model = random_model(ModelConfig(n_layers=1), 2)
    tokens = torch.randint(0, 64, (2, 30), generator=torch.Generator().manual_seed(6))
    grads = grads_of(model, model(tokens))
    assert float(grads["blocks.0.W_Q"][2].abs().max()) == 0.0
    assert float(grads["blocks.0.W_K"][2].abs().max()) == 0.0
    assert float(grads["blocks.0.W_V"][2].abs().max()) > 0.0
    assert float(grads["blocks.0.W_Q"][1].abs().max()) > 0.0


def test_the_oracle_tells_a_wrong_scale_apart():
    """The agreement tests can fail: the oracle with scores scaled by 1/d_head instead of 1/sqrt(d_head)
    disagrees with the model far beyond the tolerance."""
    model = random_model(ModelConfig(n_layers=1), None)
    tokens = torch.randint(0, 64, (2, 40), generator=torch.Generator().manual_seed(7))
    dh = model.cfg.d_head
    with torch.no_grad():
        good = oracle_forward(model, tokens)
        model.blocks[0].W_Q.mul_(1 / math.sqrt(dh))
        wrong = oracle_forward(model, tokens)
        model.blocks[0].W_Q.mul_(math.sqrt(dh))
        logits = model(tokens)
    assert float((logits - good).abs().max()) < 1e-4
    assert float((logits - wrong).abs().max()) > 1e-3


@pytest.mark.parametrize("shape", [(4, 128, 32), (3, 10), (2, 5, 64)])
def test_in_pair_order_is_indexing_by_pair_order_with_the_same_gradient(shape):
    from core.model.attention import in_pair_order

    x = torch.randn(*shape, requires_grad=True)
    y = torch.randn(*shape)
    assert torch.equal(in_pair_order(x), x[..., pair_order(shape[-1])])
    (g_view,) = torch.autograd.grad((in_pair_order(x) * y).sum(), x)
    (g_index,) = torch.autograd.grad((x[..., pair_order(shape[-1])] * y).sum(), x)
    assert torch.equal(g_view, g_index)
