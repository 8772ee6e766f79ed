"""The intervention point (TinyCharLM.run_with_hooks): every hook point with its shape, edits that
reach everything downstream, the leading patch dim, start and stop, the held head as a pattern edit
(one hold, fused and per head, with gradients), and that attention is computed in core/model only:
every analysis goes through core.model.tinycharlm.attend and no other module forms a pattern."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from core.causal import logit_lens, noising, patching, path_patching
from core.model import tinycharlm
from core.model.hooks import hook_name, hook_points, previous_token_pattern
from core.model.task import TaskConfig
from core.reading import ablation, analysis

from helpers import TINY, random_tokens, tiny_model

ROOT = Path(__file__).resolve().parent.parent
B, T = 3, 10


@pytest.fixture(params=[False, True], ids=["no-bias", "bias"])
def model(request):
    return tiny_model(2, request.param, seed=1, dtype=torch.float64)  # sharp attention: compare in float64


def test_every_hook_point_is_recorded_with_its_shape_over_leading_dims(model):
    G = 2
    V, D, H = TINY["vocab_size"], TINY["d_model"], TINY["n_heads"]
    dh = D // H
    tokens = torch.stack([random_tokens(B, T, seed=s) for s in range(G)])  # [G, B, T]
    logits, cache = model.run_with_hooks(tokens, cache=hook_points(2))
    per_head = {"attn.hook_q": dh, "attn.hook_k": dh, "attn.hook_v": dh, "attn.hook_rot_q": dh, "attn.hook_rot_k": dh,
                "attn.hook_pattern": T, "attn.hook_z": dh, "attn.hook_result": D}
    stream = {"hook_embed": D, "hook_resid_pre": D, "hook_resid_post": D, "hook_resid_final": D, "hook_logits": V}
    for name in hook_points(2):
        point = name.split(".", 2)[-1] if name.startswith("blocks.") else name
        expected = (G, B, H, T, per_head[point]) if point in per_head else (G, B, T, stream[point])
        assert cache[name].shape == expected, name
    assert torch.allclose(logits, cache["hook_logits"]) and logits.shape == (G, B, T, V)
    for g in range(G):
        assert torch.allclose(logits[g], model(tokens[g]), atol=1e-9)
    assert torch.equal(cache[hook_name(1, "hook_resid_pre")], cache[hook_name(0, "hook_resid_post")])
    # the pieces add up: the stream after a block is the stream before plus the heads' results (and b_O)
    post = cache[hook_name(0, "hook_resid_pre")] + cache[hook_name(0, "attn.hook_result")].sum(-3)
    if model.cfg.bias:
        post = post + model.blocks[0].b_O
    assert torch.allclose(post, cache[hook_name(0, "hook_resid_post")], atol=1e-9)


def test_identity_edits_everywhere_change_nothing(model):
    tokens = random_tokens(B, T)
    edits = {name: (lambda x: x.clone()) for name in hook_points(2)}
    logits, _ = model.run_with_hooks(tokens, edits=edits)
    assert torch.allclose(logits, model(tokens), atol=1e-9)


def test_an_edit_reaches_everything_downstream_and_nothing_upstream(model):
    tokens = random_tokens(B, T)
    names = [hook_name(0, "attn.hook_z"), hook_name(1, "attn.hook_z"), "hook_logits"]
    _, base = model.run_with_hooks(tokens, cache=names)
    edit = {hook_name(0, "attn.hook_result"): lambda r: r * 2.0}
    _, out = model.run_with_hooks(tokens, edits=edit, cache=names)
    assert torch.equal(out[names[0]], base[names[0]])
    assert not torch.allclose(out[names[1]], base[names[1]]) and not torch.allclose(out[names[2]], base[names[2]])


def test_knocking_a_head_out_at_z_or_at_its_result_is_the_same(model):
    tokens = random_tokens(B, T)

    def zero_head(x):
        x = x.clone()
        x[:, 1] = 0.0
        return x
    at_z, _ = model.run_with_hooks(tokens, edits={hook_name(0, "attn.hook_z"): zero_head})
    at_result, _ = model.run_with_hooks(tokens, edits={hook_name(0, "attn.hook_result"): zero_head})
    assert torch.allclose(at_z, at_result, atol=1e-9)
    assert not torch.allclose(at_z, model(tokens), atol=1e-3)


def test_a_mean_ablation_over_a_patch_dim_takes_each_patch_s_own_batch_mean(model):
    """Edits see the leading dims: the batch mean of ablation_edits is over B within each patch."""
    tokens = torch.stack([random_tokens(B, T, seed=s) for s in range(2)])  # [G, B, T]
    edits = ablation.ablation_edits({(0, 1): "mean", (1, 0): "zero"})
    both, _ = model.run_with_hooks(tokens, edits=edits)
    for g in range(2):
        alone = ablation.ablated_logits(model, tokens[g], {(0, 1): "mean", (1, 0): "zero"})
        assert torch.allclose(both[g], alone, atol=1e-9)
    assert not torch.allclose(both[0], model(tokens[0]), atol=1e-3)


def test_q_k_v_edits_come_before_rotary_and_carry_the_stream_linearly(model):
    """Shifting q, k and v of every head by delta @ W (path patching's edit) is running the last block
    on the stream + delta, less the delta its residual carries: the hooks sit before rotary, bias in."""
    tokens = random_tokens(B, T)
    _, cache = model.run_with_hooks(tokens, cache=[hook_name(1, "hook_resid_pre")])
    h = cache[hook_name(1, "hook_resid_pre")]
    delta = torch.randn(2, *h.shape, generator=torch.Generator().manual_seed(0), dtype=h.dtype)  # G = 2 patches
    heads = range(model.cfg.n_heads)
    edits = {}
    for path in "qkv":
        edits.update(path_patching.receiver_edits(model, 1, heads, path, delta))
    edited, _ = model.run_with_hooks(resid=h.expand(2, -1, -1, -1), start=1, edits=edits)
    direct, _ = model.run_with_hooks(resid=h[None] + delta, start=1)
    assert torch.allclose(edited + delta @ model.W_E.T, direct, atol=1e-9)
    assert not torch.allclose(edited, model.run_with_hooks(resid=h, start=1)[0][None], atol=1e-3)


def test_start_and_stop_split_the_forward(model):
    tokens = random_tokens(B, T)
    logits, cache = model.run_with_hooks(tokens, cache=[hook_name(1, "hook_resid_pre")])
    upto, _ = model.run_with_hooks(tokens, stop=1)
    assert torch.equal(upto, cache[hook_name(1, "hook_resid_pre")])
    rest, _ = model.run_with_hooks(resid=upto, start=1)
    assert torch.allclose(rest, logits, atol=1e-9)
    whole, _ = model.run_with_hooks(tokens, stop=2)  # stop = n_layers: the final stream, not the logits
    assert torch.allclose(whole @ model.W_E.T, logits, atol=1e-9)
    final, _ = model.run_with_hooks(resid=torch.zeros(B, T, model.cfg.d_model, dtype=torch.float64), start=2)
    assert torch.equal(final, torch.zeros(B, T, model.cfg.vocab_size, dtype=torch.float64))


@pytest.mark.parametrize("call, message", [
    (lambda m, x: m.run_with_hooks(x, cache=["blocks.2.hook_resid_pre"]), "no hook point"),
    (lambda m, x: m.run_with_hooks(x, edits={"blocks.0.attn.hook_scores": None}), "no hook point"),
    (lambda m, x: m.run_with_hooks(x, start=1), "resid"),
    (lambda m, x: m.run_with_hooks(resid=m.W_E[x], start=1, stop=0), "start <= stop"),
])
def test_wrong_requests_are_refused(model, call, message):
    with pytest.raises(ValueError, match=message):
        call(model, random_tokens(B, T))


def test_the_hold_is_the_previous_token_pattern_edit_fused_and_per_head_with_gradients():
    tokens = random_tokens(B, T)
    free = tiny_model(2, True, seed=2, dtype=torch.float64)
    held = tiny_model(2, True, seed=2, dtype=torch.float64)
    held.hold_previous(1)

    def hold_by_hand(A):
        A = A.clone()
        A[:, 1] = previous_token_pattern(T)
        return A
    by_edit, _ = free.run_with_hooks(tokens, edits={hook_name(0, "attn.hook_pattern"): hold_by_hand})
    per_head, cache = held.run_with_cache(tokens)
    assert torch.allclose(per_head, by_edit, atol=1e-9) and torch.allclose(held(tokens), by_edit, atol=1e-9)
    assert not torch.allclose(free(tokens), by_edit, atol=1e-3)
    assert torch.equal(cache["pattern"][0][:, 1], previous_token_pattern(T).double().expand(B, T, T))

    grads = []
    for forward in (held, lambda x: held.run_with_cache(x)[0]):  # fused (z form), per head (pattern form)
        held.zero_grad()
        forward(tokens).logsumexp(-1).mean().backward()
        grads.append({n: p.grad.clone() for n, p in held.named_parameters()})
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-9), n
    b0 = held.blocks[0]
    assert torch.all(b0.W_Q.grad[1] == 0) and torch.all(b0.W_K.grad[1] == 0) and b0.W_V.grad[1].abs().sum() > 0


def test_a_run_edit_on_a_held_models_pattern_starts_from_the_held_pattern():
    tokens = random_tokens(B, T)
    held = tiny_model(2, True, seed=2, dtype=torch.float64)
    held.hold_previous(1)
    seen = []
    held.run_with_hooks(tokens, edits={hook_name(0, "attn.hook_pattern"): lambda A: seen.append(A) or A})
    assert torch.equal(seen[0][:, 1], previous_token_pattern(T).double().expand(B, T, T))
    assert not torch.equal(seen[0][:, 0], previous_token_pattern(T).double().expand(B, T, T))
    held.hold_previous(None)
    assert held.held_head is None and not held.standing
    with pytest.raises(ValueError, match="no head 7 in block 0"):
        held.hold_previous(7)


# ---------------------------------------------------------------------------------------------
# Attention is computed in core/model only


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = tinycharlm.attend

    def attend(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(tinycharlm, "attend", attend)
    kernel = tinycharlm.causal_attention  # the fused path's (core.model.attention)

    def causal_attention(*args, **kwargs):
        calls.append(1)
        return kernel(*args, **kwargs)
    monkeypatch.setattr(tinycharlm, "causal_attention", causal_attention)
    return calls


TASK = TaskConfig(period_min=3, period_max=5, seq_len=12)


def _analyses(model, runs, tokens, periods):
    return {
        "patch_heads": lambda: patching.patch_heads(model, runs, [(0, 1), (1, 0)]),
        "head_patch_effects": lambda: patching.head_patch_effects(model, runs),
        "resid_patch_effects": lambda: patching.resid_patch_effects(model, runs),
        "head_position_effects": lambda: patching.head_position_effects(model, runs),
        "resid_positions_effect": lambda: patching.resid_positions_effect(model, runs, 1, [2, 3]),
        "path_patch": lambda: path_patching.path_patch(model, runs, [(0, 0), (0, 1)], (1, None), "k", "noising"),
        "head_noise_effects": lambda: noising.head_noise_effects(model, runs),
        "attribution": lambda: noising.attribution_head_positions(model, runs),
        "ablated_logits": lambda: ablation.ablated_logits(model, tokens, {(0, 1): "mean"}),
        "single_head_ablation": lambda: ablation.single_head_ablation(model, tokens, periods),
        "logit_lens": lambda: logit_lens.lens(model, tokens),
        "head_circuit_view": lambda: analysis.head_circuit_view(model, TASK, 1, 0),
    }


def test_every_analysis_computes_attention_through_the_model(counted):
    model = tiny_model(2, True, seed=3).eval()
    runs = patching.task_runs(model, TASK, 4, seed=0)
    tokens, periods = runs.clean, runs.periods
    for name, run in _analyses(model, runs, tokens, periods).items():
        counted.clear()
        run()
        assert counted, f"{name} computed no attention through the model (attend or causal_attention)"


# What forms attention or runs blocks by hand: SDPA, a causal -inf mask, the blocks' own internals.
FORWARD_PATTERNS = [r"scaled_dot_product_attention", r"masked_fill_?\([^)]*-inf", r"forward_with_cache",
                    r"\._qkv\(", r"\._project\(", r"\._hooked\(", r"\bblock\((?!s\))", r"blocks\[[^\]]*\]\(",
                    r"\.forward\("]
# The allowed exceptions: an archetype's drawn pattern (core.archetypes.catalogue) is built from rules
# over tokens, not computed by a model; the causal_pattern exercise's reference answer and its wrong
# variants (exercises/cases/part1_attention.py) form a pattern from given q and k, as the student does.
ALLOWED = {("core/archetypes/catalogue.py", r"masked_fill_?\([^)]*-inf"),
           ("exercises/cases/part1_attention.py", r"masked_fill_?\([^)]*-inf")}


def forward_writers(root: Path = ROOT) -> list[str]:
    files = [p for p in (root / "core").rglob("*.py") if (root / "core" / "model") not in p.parents]
    files.append(root / "exercises" / "planted.py")
    files += [root / "exercises" / "engine.py", *sorted((root / "exercises" / "cases").glob("*.py"))]
    found = []
    files = [p for p in files if p.exists()]
    for path in files:
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        found += [f"{rel}: {pat}" for pat in FORWARD_PATTERNS if (rel, pat) not in ALLOWED and re.search(pat, text)]
    return found


def test_no_module_outside_core_model_computes_attention_or_runs_blocks():
    assert forward_writers() == []


def test_the_scan_finds_a_hand_written_forward(tmp_path):
    """The scan above is not vacuous: a patching module with a partial forward of its own is caught."""
    (tmp_path / "core" / "causal").mkdir(parents=True)
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "planted.py").write_text("")
    (tmp_path / "core" / "causal" / "patching.py").write_text(
        "def forward_from(model, h, start):\n    for block in model.blocks[start:]:\n        h = block(h)\n"
        "    z = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n")
    assert forward_writers(tmp_path) == ["core/causal/patching.py: scaled_dot_product_attention",
                                         "core/causal/patching.py: \\bblock\\((?!s\\))"]
