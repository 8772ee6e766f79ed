"""core.model.attention_cpp (the compiled causal attention) against an independent oracle
(per-head q, k, v unpacked from the fused layout, rotate_half rotary written out here,
F.scaled_dot_product_attention, the held head as z_i = v_{i-1}) and its pattern against the model's
hooked path (core.model.hooks.attend): values and gradients in float32 within float32 tolerance,
gradcheck in float64, on bias on/off, a held head, T in {1, 17, 96, 384}, d_head 16/32/64 and an odd
width (the scalar path), B 1 and 32; the forward's per-row softmax stats from which the backward
recomputes the pattern, and gradients identical run to run and with or without the pattern; the
switch ($ATTENTION_LAB_ATTENTION: auto follows the measured choice, eager and cpp force a kernel), the
choice measured on this machine and recorded beside the build, the build's target for an emulated CPU
kind, and a failed build falling back to the eager path with its reason kept.

The library is built once per session (the module fixture; conftest's fresh $ATTENTION_LAB_CACHE),
about 2-3 CPU-seconds of g++; without a compiler every test that needs it is skipped, saying why.
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from core.model import attention, attention_cpp, cpu, tinycharlm
from core.model.attention import fused_qkv, pair_order
from core.model.config import ModelConfig
from core.model.hooks import HoldPrevious, Hooks
from core.model.rope import rope_cos_sin
from core.model.tinycharlm import AttentionBlock, TinyCharLM

from naive import rope_batched

BASE = 10000.0


@pytest.fixture(scope="module")
def lib():
    if not attention_cpp.available():
        pytest.skip(f"compiled attention unavailable: {attention_cpp.reason()}")
    return attention_cpp


def oracle_rope(x: torch.Tensor) -> torch.Tensor:
    """x [..., T, d] in the standard layout rotated by position (tests/naive.py, at the lab's base)."""
    return rope_batched(x, BASE)


def oracle(qkv: torch.Tensor, H: int, hold: int | None) -> torch.Tensor:
    """z [B, T, H dh] from qkv in causal_attention's layout, through SDPA."""
    B, T, width = qkv.shape
    dh = width // (3 * H)
    x = qkv.view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)  # [3, B, H, T, dh]
    back = torch.argsort(pair_order(dh))  # qkv's column c holds coordinate pair_order[c]
    q, k, v = x[0][..., back], x[1][..., back], x[2]
    z = F.scaled_dot_product_attention(oracle_rope(q), oracle_rope(k), v, is_causal=True)
    if hold is not None:
        prev = torch.clamp(torch.arange(T) - 1, min=0)
        z = torch.cat([z[:, :hold], v[:, hold:hold + 1, prev], z[:, hold + 1:]], 1)
    return z.transpose(1, 2).reshape(B, T, H * dh)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def values_and_grads(fn, qkv: torch.Tensor, dz: torch.Tensor):
    x = qkv.detach().clone().requires_grad_()
    z = fn(x)
    (g,) = torch.autograd.grad(z, x, dz)
    return z.detach(), g


def sharp_qkv(B, T, H, dh, seed=0, dtype=torch.float32):
    """Random qkv with q, k scaled 3x (sharper patterns than at initialisation, as in a trained model)."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(B, T, 3 * H * dh, generator=g, dtype=dtype)
    qkv[..., : 2 * H * dh] *= 3.0
    return qkv, torch.randn(B, T, H * dh, generator=g, dtype=dtype)


CASES = [  # B, T, H, d_head, hold
    (32, 96, 4, 32, None),  # the default training
    (8, 96, 4, 32, 1),
    (1, 1, 4, 32, None),
    (1, 17, 2, 16, 0),
    (2, 17, 4, 64, None),
    (1, 384, 4, 32, 3),
    (2, 384, 2, 16, None),
    (3, 33, 3, 10, 2),  # d_head not a multiple of the vector width: the scalar rotary path
]


def within_float32(new: torch.Tensor, sdpa32: torch.Tensor, exact: torch.Tensor, what: str):
    """new's error against the float64 oracle at most 3x (+1e-6) float32 SDPA's own: as exact as SDPA."""
    err, err_sdpa = rel_err(new, exact), rel_err(sdpa32, exact)
    assert err <= 3 * err_sdpa + 1e-6, f"{what}: error {err:.2e} against float64, SDPA's {err_sdpa:.2e}"


@pytest.mark.parametrize("B,T,H,dh,hold", CASES)
def test_values_and_gradients_match_sdpa(lib, B, T, H, dh, hold):
    qkv, dz = sharp_qkv(B, T, H, dh)
    cos, sin = rope_cos_sin(T, dh, BASE)
    z_c, g_c = values_and_grads(lambda x: lib.causal_attention(x, H, cos, sin, hold), qkv, dz)
    z_o, g_o = values_and_grads(lambda x: oracle(x, H, hold), qkv, dz)
    z_64, g_64 = values_and_grads(lambda x: oracle(x, H, hold), qkv.double(), dz.double())
    within_float32(z_c, z_o, z_64, "z")
    within_float32(g_c, g_o, g_64, "d qkv")
    if hold is not None:  # a held head's q and k get no gradient, its v does
        g = g_c.view(B, T, 3, H, dh)
        assert g[:, :, :2, hold].abs().max() == 0 and g[:, :, 2, hold].abs().max() > 0


@pytest.mark.parametrize("hold", [None, 2])
def test_pattern_is_the_hooked_paths_pattern(lib, hold):
    """The pattern the kernel writes when asked is the one run_with_hooks records (hook_pattern, the hold
    applied), from the same block's weights."""
    torch.manual_seed(3)
    block = AttentionBlock(ModelConfig(d_model=128, n_heads=4, bias=True))
    for p in block.parameters():
        torch.nn.init.normal_(p, 0.0, 0.3)
    h = torch.randn(2, 50, 128)
    hooks = Hooks({} if hold is None else {"attn.hook_pattern": HoldPrevious(hold)}, cache=["attn.hook_pattern"])
    block(h, hooks)
    qkv = fused_qkv(h, block.W_Q, block.W_K, block.W_V, block.b_Q, block.b_K, block.b_V)
    _, P = lib.causal_attention(qkv, 4, *rope_cos_sin(50, 32, BASE), hold, need_pattern=True)
    assert P.shape == hooks.cache["attn.hook_pattern"].shape == (2, 4, 50, 50)
    assert (P - hooks.cache["attn.hook_pattern"]).abs().max() < 4e-6  # a few float32 ulps of weights <= 1
    assert torch.all(P.triu(1) == 0) and torch.allclose(P.sum(-1), torch.ones(2, 4, 50))


@pytest.mark.parametrize("dh,hold", [(16, None), (16, 1), (6, 0)])  # the vector and the scalar rotary path
def test_gradcheck_float64(lib, dh, hold):
    qkv, _ = sharp_qkv(1, 7, 2, dh, seed=5, dtype=torch.float64)
    cos, sin = rope_cos_sin(7, dh, BASE, torch.float64)
    qkv.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: lib.causal_attention(x, 2, cos, sin, hold), (qkv,))


@pytest.mark.parametrize("bias,hold", [(False, None), (True, None), (True, 1)])
def test_model_with_the_switch_on_matches_the_eager_model(lib, monkeypatch, bias, hold):
    """The whole model (fused projection with its biases, two blocks, a held head in block 0)."""
    cfg = ModelConfig(vocab_size=20, d_model=64, n_heads=4, n_layers=2, bias=bias)  # d_head 16
    model = TinyCharLM(cfg)
    g = torch.Generator().manual_seed(1)
    model.reset_parameters(g)
    with torch.no_grad():
        for block in model.blocks:
            block.W_Q.mul_(3.0)
            block.W_K.mul_(3.0)
            if bias:
                for b in (block.b_Q, block.b_K, block.b_V, block.b_O):
                    b.normal_(0.0, 0.5, generator=g)
    model.hold_previous(hold)
    tokens = torch.randint(0, 20, (4, 40), generator=g)
    weight = torch.randn(4, 40, 20, generator=g)
    calls = []
    real = attention_cpp.causal_attention
    monkeypatch.setattr(tinycharlm, "causal_attention", lambda *a, **k: calls.append(1) or real(*a, **k))

    def run(switch: str):
        monkeypatch.setenv(attention_cpp.ENV_SWITCH, switch)
        model.zero_grad()
        logits = model(tokens)
        (logits * weight).sum().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    logits_c, grads_c = run("cpp")
    assert len(calls) == cfg.n_layers
    logits_e, grads_e = run("eager")
    assert len(calls) == cfg.n_layers  # off: the eager path
    assert rel_err(logits_c, logits_e) < 1e-5
    for name, g_e in grads_e.items():
        assert rel_err(grads_c[name], g_e) < 1e-4, name


def test_the_switch_auto_follows_the_measured_choice_and_eager_cpp_force_it(lib, monkeypatch):
    block = TinyCharLM(ModelConfig(d_model=16, n_heads=2, n_layers=1)).blocks[0]
    h = torch.randn(1, 5, 16)
    calls = []
    real = attention_cpp.causal_attention
    monkeypatch.setattr(tinycharlm, "causal_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    for measured in ("compiled", "eager"):
        monkeypatch.setattr(attention, "_CHOICE", attention.KernelChoice(measured, "planted", 2.0, 1.0))
        for switch, compiled in ((None, measured == "compiled"), ("auto", measured == "compiled"),
                                 ("cpp", True), ("eager", False), ("nonsense", measured == "compiled")):
            if switch is None:
                monkeypatch.delenv(attention_cpp.ENV_SWITCH, raising=False)
            else:
                monkeypatch.setenv(attention_cpp.ENV_SWITCH, switch)
            calls.clear()
            assert block(h).shape == (1, 5, 16)
            assert calls == ([1] if compiled else []), (measured, switch)
            calls.clear()
            block(h, Hooks(cache=["attn.hook_z"]))  # a hooked run never takes the compiled path
            assert calls == []


def test_the_choice_is_the_faster_kernel_by_a_measurement_on_this_machine(lib, monkeypatch, tmp_path):
    """The rule (compiled only where measured faster) checked against a real measurement here, and the
    recorded choice read back by a fresh process's kernel_choice."""
    assert attention.choose({"eager": 10.0, "compiled": 4.0}) == "compiled"
    assert attention.choose({"eager": 4.0, "compiled": 10.0}) == "eager"
    assert attention.choose({"eager": 4.0, "compiled": 4.0}) == "eager"  # a tie keeps the eager kernel
    monkeypatch.delenv(attention_cpp.ENV_SWITCH, raising=False)
    monkeypatch.setattr(attention, "_CHOICE", None)
    path = tmp_path / "choice.json"  # not the shared record beside the build: other processes read that one
    monkeypatch.setattr(attention_cpp, "choice_path", lambda: path)
    choice = attention.kernel_choice()  # measures, records
    assert choice.eager_ms > 0 and choice.compiled_ms > 0
    assert choice.kernel == ("compiled" if choice.compiled_ms < choice.eager_ms else "eager")
    assert choice.kernel == attention.kernel_choice().kernel == attention_cpp.recorded_choice()["kernel"]
    assert choice.cpu == cpu.kind() and choice.cpu in choice.why
    # the measurement itself, at the sizes the choice names
    again = attention.measure_kernels(choice.sizes, rounds=2, n=3)
    assert set(again) == {"eager", "compiled"} and all(v > 0 for v in again.values())
    # a recorded choice is read, not measured again; a damaged or foreign record is measured again
    monkeypatch.setattr(attention, "_CHOICE", None)
    monkeypatch.setattr(attention, "measure_kernels", lambda *a, **k: pytest.fail("measured again"))
    assert attention.kernel_choice().kernel == choice.kernel
    foreign = json.dumps({"kernel": "compiled", "torch": "0.0", "version": attention_cpp.CHOICE_VERSION})
    unknown = json.dumps({"kernel": "fastest", "torch": torch.__version__, "version": attention_cpp.CHOICE_VERSION})
    older = json.dumps({"kernel": "compiled", "torch": torch.__version__})  # measured against another eager path
    for bad in ("{not json", foreign, unknown, older):
        path.write_text(bad)
        assert attention_cpp.recorded_choice() is None
        monkeypatch.setattr(attention, "_CHOICE", None)
        monkeypatch.setattr(attention, "measure_kernels", lambda *a, **k: {"eager": 1.0, "compiled": 3.0})
        assert attention.kernel_choice().kernel == "eager"
        path.unlink()
    monkeypatch.setattr(attention, "_CHOICE", None)


def test_the_build_targets_the_emulated_cpu_kind(monkeypatch):
    monkeypatch.delenv(cpu.ENV, raising=False)
    assert "-march=native" in attention_cpp.flags() and cpu.kind() == cpu.native_kind()
    native = attention_cpp.library_path("/usr/bin/g++")
    monkeypatch.setenv(cpu.ENV, "avx2")
    assert {"-march=x86-64-v3", "-mno-avx512f"} <= set(attention_cpp.flags()) and cpu.kind() == "AVX2"
    assert attention_cpp.library_path("/usr/bin/g++") != native  # its own build, its own choice
    assert cpu.emulate("avx2")["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and cpu.emulate("native") == {}
    monkeypatch.setenv(cpu.ENV, "pentium")
    assert cpu.emulated() is None and "-march=native" in attention_cpp.flags()
    with pytest.raises(ValueError, match="no emulation"):
        cpu.emulate("pentium")


@pytest.mark.parametrize("failure", ["no compiler", "build error"])
def test_a_failed_build_falls_back_to_eager_with_its_reason(monkeypatch, tmp_path, failure):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(attention_cpp, "_BUILD", None)
    monkeypatch.setattr(attention_cpp, "_LIB", None)
    if failure == "no compiler":
        monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    else:
        broken = tmp_path / "broken.cpp"
        broken.write_text("this is not C++\n")
        monkeypatch.setattr(attention_cpp, "SOURCE", broken)
    assert not attention_cpp.available()
    assert ("no C++ compiler" if failure == "no compiler" else "failed (exit") in attention_cpp.reason()
    assert not list((tmp_path / "cache").glob("**/*.so*"))  # no half-written library left behind
    monkeypatch.setenv(attention_cpp.ENV_SWITCH, "cpp")
    block = TinyCharLM(ModelConfig(d_model=16, n_heads=2, n_layers=1)).blocks[0]
    h = torch.randn(2, 7, 16)
    assert not attention.compiled_trains(h, 2)
    assert torch.equal(block(h), block._hooked(h, Hooks(), ""))  # the eager path


def test_fused_projection_feeds_the_kernel(lib):
    """fused_qkv's layout (q, k in pair_order, heads inner) is the one the kernel reads."""
    g = torch.Generator().manual_seed(2)
    h = torch.randn(2, 12, 32, generator=g)
    W_Q, W_K, W_V = (torch.randn(4, 32, 8, generator=g) for _ in range(3))
    qkv = fused_qkv(h, W_Q, W_K, W_V)
    cos, sin = rope_cos_sin(12, 8, BASE)
    z = lib.causal_attention(qkv, 4, cos, sin)
    q, k, v = (oracle_rope(torch.einsum("btd,hde->bhte", h, W)) if i < 2 else torch.einsum("btd,hde->bhte", h, W)
               for i, W in enumerate((W_Q, W_K, W_V)))
    z_o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 12, 32)
    assert rel_err(z, z_o) < 2e-6


def test_forward_keeps_each_rows_softmax_stats_for_the_backwards_recompute(lib):
    """With a gradient to compute the forward writes no pattern, only each row's (max score, 1 / sum of
    exp) [B, H, T, 2], from which the backward recomputes the pattern: checked against the float64
    scores (rotary q.k / sqrt(dh), causal) and against the pattern the forward returns."""
    B, T, H, dh = 2, 40, 3, 32
    qkv, _ = sharp_qkv(B, T, H, dh, seed=7)
    cos, sin = rope_cos_sin(T, dh, BASE)
    cs, sn = lib.rotary_tables(cos, sin, torch.float32)
    z = torch.empty(B, T, H * dh)
    P = torch.empty(B, H, T, T)
    stats = torch.empty(B, H, T, 2)
    p = lib._ptr
    lib._LIB.attn_forward_f32(p(qkv), p(cs), p(sn), B, T, H, dh, -1, p(z), p(P), p(stats))
    x = qkv.double().view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
    back = torch.argsort(pair_order(dh))
    q, k = oracle_rope(x[0][..., back]), oracle_rope(x[1][..., back])
    s = (q @ k.transpose(-1, -2) / dh ** 0.5).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    mx = s.amax(-1)
    assert rel_err(stats[..., 0], mx) < 1e-5
    assert rel_err(stats[..., 1], 1 / torch.exp(s - mx[..., None]).sum(-1)) < 1e-5
    expanded = torch.exp(s - stats[..., :1].double()) * stats[..., 1:].double()
    assert (P.double() - expanded).abs().max() < 2e-5  # float32 scores of |s| up to ~30: a few ulps of s
    assert torch.all(P.triu(1) == 0)


@pytest.mark.parametrize("hold", [None, 1])
def test_gradients_are_deterministic_and_need_pattern_changes_nothing(lib, hold):
    """The recomputed pattern: the same floats run to run, and whether or not the pattern was also
    written for the caller."""
    qkv, dz = sharp_qkv(3, 96, 4, 32, seed=9)
    cos, sin = rope_cos_sin(96, 32, BASE)
    runs = [values_and_grads(lambda x: lib.causal_attention(x, 4, cos, sin, hold), qkv, dz) for _ in range(2)]
    runs.append(values_and_grads(lambda x: lib.causal_attention(x, 4, cos, sin, hold, need_pattern=True)[0], qkv, dz))
    for z, g in runs[1:]:
        assert torch.equal(z, runs[0][0]) and torch.equal(g, runs[0][1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hold", [-1, 2])
def test_outputs_aligned_or_not_are_the_same_floats_written_in_place(lib, dtype, hold):
    """z and g starting 64-byte aligned or not: the same floats both ways, and nothing written outside
    the outputs (z and g placed one element into larger buffers filled with a sentinel)."""
    B, T, H, dh = 3, 40, 4, 32
    qkv, dz = sharp_qkv(B, T, H, dh, seed=11)
    qkv, dz = qkv.to(dtype), dz.to(dtype)
    cs, sn = lib.rotary_tables(*rope_cos_sin(T, dh, BASE), dtype)
    fwd, bwd = ((lib._LIB.attn_forward_f32, lib._LIB.attn_backward_f32) if dtype == torch.float32
                else (lib._LIB.attn_forward_f64, lib._LIB.attn_backward_f64))
    p = lib._ptr
    outs = []
    for offset in (0, 1):
        zbuf = torch.full((B * T * H * dh + 2,), 7.0, dtype=dtype)
        gbuf = torch.full((qkv.numel() + 2,), 7.0, dtype=dtype)
        z = zbuf[offset:offset + B * T * H * dh]
        g = gbuf[offset:offset + qkv.numel()]
        assert (z.data_ptr() % 64 == 0) == (offset == 0) and (g.data_ptr() % 64 == 0) == (offset == 0)
        stats = torch.full((B, H, T, 2), 7.0, dtype=dtype)  # the held head's are not written
        fwd(p(qkv), p(cs), p(sn), B, T, H, dh, hold, p(z), None, p(stats))
        bwd(p(qkv), p(cs), p(sn), p(z), p(stats), p(dz), B, T, H, dh, hold, p(g))
        rest = torch.cat([zbuf[:offset], zbuf[offset + z.numel():], gbuf[:offset], gbuf[offset + g.numel():]])
        assert torch.all(rest == 7.0)
        outs.append((z.clone(), stats, g.clone()))
    for a, b in zip(*outs):
        assert torch.equal(a, b)


@pytest.mark.worker
@pytest.mark.parametrize("kind", ["avx2", "sse4"])
def test_the_builds_for_other_cpu_kinds_compute_the_same_attention(lib, monkeypatch, tmp_path, kind):
    """The kernel built for an AVX2 or SSE4 machine (32- and 16-byte vectors; bench/kernel_kinds.py also
    runs the ARM build under qemu) against SDPA, with gradients, on this host (which runs both)."""
    runs_on = {"avx2": ("AVX-512", "AVX2"), "sse4": ("AVX-512", "AVX2", "SSE4")}[kind]
    if cpu.native_kind() not in runs_on:
        pytest.skip(f"this {cpu.native_kind()} host cannot run a {kind} build's instructions")
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path))
    monkeypatch.setenv(cpu.ENV, kind)
    monkeypatch.setattr(attention_cpp, "_BUILD", None)
    monkeypatch.setattr(attention_cpp, "_LIB", None)
    assert attention_cpp.available(), attention_cpp.reason()
    assert f"-march=x86-64-v{3 if kind == 'avx2' else 2}" in attention_cpp.flags()
    for B, T, H, dh, hold in [(4, 96, 4, 32, None), (2, 37, 2, 16, 1), (1, 17, 2, 12, 0)]:
        qkv, dz = sharp_qkv(B, T, H, dh, seed=3)
        cos, sin = rope_cos_sin(T, dh, BASE)
        x = qkv.clone().requires_grad_()
        z = attention_cpp.causal_attention(x, H, cos, sin, hold)
        z.backward(dz)
        y = qkv.clone().requires_grad_()
        ref = oracle(y, H, hold)
        ref.backward(dz)
        assert rel_err(z, ref) < 1e-5 and rel_err(x.grad, y.grad) < 1e-4, (kind, B, T, H, dh, hold)
