"""Smeared keys (Olsson et al. 2022; ModelConfig.smeared_keys): each head's key at j is sigma(a_h) k_j + (1 -
sigma(a_h)) k_{j-1} (k'_0 = k_0), before rotary. Checked against a reference written here from that formula
(values and gradients, float64), a planted one-block model that attends to the position after each earlier copy
of the current token (against a hand count), and strict loading of files with and without the smear."""
from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from core.model import attention
from core.model import tinycharlm as tcl
from core.model.checkpoints import CheckpointError, read_checkpoint, save_checkpoint
from core.model.config import ModelConfig
from core.model.hooks import hook_name, hook_points
from core.model.markov import MarkovTask
from core.model.tinycharlm import TinyCharLM

from helpers import ROOT, random_tokens, tiny_model
from naive import rope_batched


def reference(model: TinyCharLM, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """logits [B, T, V] and per-block patterns [B, H, T, T] from the model's own parameters (so gradients
    reach them), head by head, each smeared key built position by position."""
    cfg = model.cfg
    h = model.W_E[tokens]
    T = tokens.shape[1]
    patterns = []
    for block in model.blocks:
        update, heads = 0.0, []
        for hd in range(cfg.n_heads):
            q, k, v = h @ block.W_Q[hd], h @ block.W_K[hd], h @ block.W_V[hd]
            if cfg.bias:
                q, k, v = q + block.b_Q[hd], k + block.b_K[hd], v + block.b_V[hd]
            if cfg.smeared_keys:
                s = 1 / (1 + torch.exp(-block.smear[hd]))
                k = torch.stack([k[:, 0]] + [s * k[:, j] + (1 - s) * k[:, j - 1] for j in range(1, T)], 1)
            scores = rope_batched(q, cfg.rope_base) @ rope_batched(k, cfg.rope_base).transpose(-1, -2)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            A = (scores / math.sqrt(cfg.d_head)).masked_fill(~causal, float("-inf")).softmax(-1)
            heads.append(A)
            update = update + (A @ v) @ block.W_O[hd]
        h = h + update + (block.b_O if cfg.bias else 0.0)
        patterns.append(torch.stack(heads, 1))
    return h @ model.W_E.T, patterns


def _grads(model: TinyCharLM, run, tokens, weight) -> dict[str, torch.Tensor]:
    model.zero_grad()
    (run(tokens) * weight).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_the_training_and_hooked_forwards_match_the_reference_in_values_and_gradients(n_layers, bias):
    model = tiny_model(n_layers, bias, seed=3, dtype=torch.float64, smeared_keys=True).train()
    tokens = random_tokens(2, 20, seed=4)
    weight = torch.randn(2, 20, model.cfg.vocab_size, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    cached = [hook_name(l, "attn.hook_pattern") for l in range(n_layers)]
    runs = {"training": model, "hooked": lambda t: model.run_with_hooks(t)[0],
            "hooked, patterns formed": lambda t: model.run_with_hooks(t, cache=cached)[0],
            "reference": lambda t: reference(model, t)[0]}
    with torch.no_grad():
        values = {name: run(tokens) for name, run in runs.items()}
        _, cache = model.run_with_hooks(tokens, cache=cached)
        ref_patterns = reference(model, tokens)[1]
    grads = {name: _grads(model, run, tokens, weight) for name, run in runs.items()}
    assert set(grads["reference"]) >= {f"blocks.{l}.smear" for l in range(n_layers)}
    for name in runs:
        assert torch.allclose(values[name], values["reference"], rtol=1e-10, atol=1e-9), name
        for p, g in grads["reference"].items():
            assert torch.allclose(grads[name][p], g, rtol=1e-8, atol=1e-9), (name, p)
    for l in range(n_layers):
        assert torch.allclose(cache[cached[l]], ref_patterns[l], atol=1e-12)
    assert grads["reference"]["blocks.0.smear"].abs().min() > 0  # the smear is trained, not a constant


def test_a_smeared_model_never_takes_the_compiled_kernel(monkeypatch):
    model = tiny_model(1, seed=6, smeared_keys=True)
    monkeypatch.setattr(attention, "compiled_trains", lambda h, n: True)

    def refused(*a, **k):
        raise AssertionError("the compiled kernel has no smeared keys")

    monkeypatch.setattr(tcl, "causal_attention", refused)
    tokens = random_tokens(2, 12, seed=7)
    with torch.no_grad():
        assert torch.allclose(model(tokens), reference(model, tokens)[0], atol=1e-4)


def test_a_smear_weight_of_one_is_exactly_the_plain_model():
    smeared = tiny_model(2, bias=True, seed=8, smeared_keys=True)
    plain = TinyCharLM(ModelConfig(**{**smeared.cfg.to_dict(), "smeared_keys": False}))
    state = {k: v for k, v in smeared.state_dict().items() if not k.endswith("smear")}
    plain.load_state_dict(state)
    with torch.no_grad():
        for block in smeared.blocks:
            block.smear.fill_(1e4)  # sigmoid(1e4) == 1.0 in float32: k' = 1 k + 0 k_prev
    assert torch.sigmoid(smeared.blocks[0].smear).eq(1).all()
    tokens = random_tokens(3, 16, seed=9)
    points = [hook_name(l, "attn.hook_pattern") for l in range(2)]  # both through the hook points' path
    with torch.no_grad():
        a, ca = smeared.run_with_hooks(tokens, cache=points + ["blocks.1.attn.hook_k", "blocks.1.attn.hook_smeared_k"])
        b, cb = plain.run_with_hooks(tokens, cache=points)
    assert torch.equal(a, b) and all(torch.equal(ca[p], cb[p]) for p in points)
    assert torch.equal(ca["blocks.1.attn.hook_k"], ca["blocks.1.attn.hook_smeared_k"])


def test_the_smeared_keys_are_a_hook_point_of_a_smeared_model_only():
    smeared, plain = tiny_model(1, smeared_keys=True), tiny_model(1)
    name = "blocks.0.attn.hook_smeared_k"
    points = hook_points(1, smeared_keys=True)
    assert points.index(name) == points.index("blocks.0.attn.hook_v") + 1 and name not in hook_points(1)
    tokens = random_tokens(1, 10)
    with torch.no_grad():
        _, cache = smeared.run_with_hooks(tokens, cache=[name, "blocks.0.attn.hook_k"])
        k, s = cache["blocks.0.attn.hook_k"], torch.sigmoid(smeared.blocks[0].smear)[:, None, None]
        assert torch.allclose(cache[name][..., 1:, :], s * k[..., 1:, :] + (1 - s) * k[..., :-1, :], atol=1e-6)
        assert torch.equal(cache[name][..., 0, :], k[..., 0, :])
        # an edit there is seen by the attention: undoing the smear gives the plain keys' pattern
        unsmeared, c1 = smeared.run_with_hooks(tokens, edits={name: lambda x: k}, cache=["blocks.0.attn.hook_pattern"])
        plain.load_state_dict({n: v for n, v in smeared.state_dict().items() if n != "blocks.0.smear"})
        _, c2 = plain.run_with_hooks(tokens, cache=["blocks.0.attn.hook_pattern"])
    assert torch.allclose(c1["blocks.0.attn.hook_pattern"], c2["blocks.0.attn.hook_pattern"], atol=1e-6)
    with pytest.raises(ValueError, match="no hook point blocks.0.attn.hook_smeared_k"):
        plain.run_with_hooks(tokens, cache=[name])


def test_the_smear_starts_at_an_even_mix_and_leaves_the_plain_draws_alone():
    g = torch.Generator().manual_seed(0)
    smeared = TinyCharLM(ModelConfig(vocab_size=3, d_model=64, n_heads=2, n_layers=1, smeared_keys=True))
    plain = TinyCharLM(ModelConfig(vocab_size=3, d_model=64, n_heads=2, n_layers=1))
    smeared.reset_parameters(g)
    plain.reset_parameters(torch.Generator().manual_seed(0))
    assert torch.equal(smeared.blocks[0].smear, torch.zeros(2))  # sigma(0) = 0.5
    assert all(torch.equal(v, smeared.state_dict()[k]) for k, v in plain.state_dict().items())


# ---------------------------------------------------------------------------------------------
# A planted one-block model: the smear alone finds the tokens that followed the current one


def planted(V: int = 4) -> TinyCharLM:
    """One block, one head of width 16. Token t is the unit vector e_t; the query of token a and the key of token
    b are one and the same unit vector u_a, u_b (one per token, each the first coordinate of its own slow rotary
    pair), so q.k = c [a = b] cos(angle) at any distance, the angle at most 2e-5 radians over 20 positions
    (rope_base 1e12); the smear puts all of each key on the previous position's (sigma(a) = 0), and v copies
    the key position's own token."""
    cfg = ModelConfig(vocab_size=V, d_model=16, n_heads=1, n_layers=1, rope_base=1e12, smeared_keys=True)
    model = TinyCharLM(cfg).double()
    slow = [4, 5, 6, 7]  # pairs (4, 12) ... (7, 15): angles t 1e-6 ... t 10^-10.5
    c = 40 * math.sqrt(cfg.d_head)  # a match scores 40 above a miss
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.W_E[:, :V] = torch.eye(V)
        block = model.blocks[0]
        for t in range(V):
            block.W_Q[0, t, slow[t]] = c
            block.W_K[0, t, slow[t]] = 1.0
        block.W_V[0, :, :] = torch.eye(16)
        block.W_O[0, :, :] = torch.eye(16)
        block.smear.fill_(-1e4)
    return model.eval()


def hand_count(x: list[int]) -> torch.Tensor:
    """The pattern the planted head should have: row i even over the keys j <= i whose smeared key is x_i's,
    i.e. x_{j-1} = x_i (j >= 1), or x_0 = x_i for j = 0 (k'_0 = k_0); even over every key if none is."""
    T = len(x)
    A = torch.zeros(T, T, dtype=torch.float64)
    for i in range(T):
        keys = [j for j in range(i + 1) if x[max(j - 1, 0)] == x[i]] or list(range(i + 1))
        for j in keys:
            A[i, j] = 1 / len(keys)
    return A


def test_the_planted_smeared_head_attends_after_earlier_copies_of_the_current_token():
    model = planted()
    x = [1, 0, 2, 1, 3, 1, 2, 0, 1, 1, 3, 2, 0, 1, 2, 2, 3, 1, 0, 2]
    tokens = torch.tensor([x])
    with torch.no_grad():
        _, cache = model.run_with_hooks(tokens, cache=["blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z"])
    A = cache["blocks.0.attn.hook_pattern"][0, 0]
    assert torch.allclose(A, hand_count(x), atol=1e-9)
    # what it reads: at i, the counts of the tokens that followed x_i at j - 1 < i, hand-counted, over their number
    for i in range(1, len(x)):
        follows = [x[j] for j in range(1, i + 1) if x[j - 1] == x[i]]
        if follows and x[0] != x[i]:
            want = torch.tensor([follows.count(t) / len(follows) for t in range(4)], dtype=torch.float64)
            assert torch.allclose(cache["blocks.0.attn.hook_z"][0, 0, i, :4], want, atol=1e-9), i
    # the same weights without the smear attend to the earlier copies of the token itself
    with torch.no_grad():
        model.blocks[0].smear.fill_(1e4)
        _, plain = model.run_with_hooks(tokens, cache=["blocks.0.attn.hook_pattern"])
    row = plain["blocks.0.attn.hook_pattern"][0, 0, 9]  # x_9 = 1: keys 0, 3, 5, 8, 9
    assert torch.allclose(row[[0, 3, 5, 8, 9]], torch.full((5,), 0.2, dtype=torch.float64), atol=1e-9)


def test_the_reading_names_the_planted_smeared_head_and_its_smear_weight():
    from core.reading.markov import markov_view, smear_weights

    model = planted().float()
    view = markov_view(model, MarkovTask(n_states=4, seq_len=40))
    assert smear_weights(model) == {"1.1": 0.0}
    assert view.successor_heads == ["1.1"] and view.prev_heads == ["1.1"]
    assert view.scores.set_index("label")["smear"]["1.1"] == 0.0
    assert view.sentence.startswith("Head 1.1 attends to the tokens that followed the current one")
    assert "σ(a) = 0.00" in view.sentence
    with torch.no_grad():
        model.blocks[0].smear.fill_(1e4)  # plain keys again: nothing plays the previous-token part
    view = markov_view(model, MarkovTask(n_states=4, seq_len=40))
    assert view.successor_heads == [] and view.sentence.startswith("No head counts transitions here: no head's")


# ---------------------------------------------------------------------------------------------
# Files


def _payload(model: TinyCharLM) -> dict:
    buf = io.BytesIO()
    save_checkpoint(model, buf)
    return torch.load(io.BytesIO(buf.getvalue()), weights_only=True)


def _bytes(payload: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(payload, buf)
    return buf.getvalue()


def test_a_smeared_file_round_trips_and_strict_loading_refuses_a_missing_or_unexplained_smear():
    model = tiny_model(2, seed=11, smeared_keys=True)
    payload = _payload(model)
    assert payload["config"]["smeared_keys"] is True
    loaded, info = read_checkpoint(_bytes(payload))
    assert info["config"].smeared_keys and torch.equal(loaded.blocks[1].smear, model.blocks[1].smear)
    missing = copy.deepcopy(payload)
    del missing["state_dict"]["blocks.1.smear"]
    with pytest.raises(CheckpointError, match=r"says its keys are smeared .* lacks the smear weights blocks\.1\.smear"):
        read_checkpoint(_bytes(missing))
    unexplained = copy.deepcopy(payload)
    del unexplained["config"]["smeared_keys"]
    with pytest.raises(CheckpointError, match=r"holds smear weights \(blocks\.0\.smear, blocks\.1\.smear\) but its "
                                              "config does not say smeared_keys"):
        read_checkpoint(_bytes(unexplained))
    unexplained["config"]["smeared_keys"] = "yes"
    with pytest.raises(CheckpointError, match="not of the right types"):
        read_checkpoint(_bytes(unexplained))


def test_a_plain_file_keeps_the_config_entries_files_always_had():
    plain = tiny_model(1, seed=12)
    assert "smeared_keys" not in _payload(plain)["config"]
    for path in sorted((ROOT / "checkpoints").glob("*.pt")) + [ROOT / "checkpoints/markov/markov-2block.pt"]:
        stored = torch.load(path, weights_only=True, mmap=True)
        model, info = read_checkpoint(path, mmap=True)
        assert not info["config"].smeared_keys and info["config"].to_dict() == stored["config"], path.name
        assert not any(k.endswith("smear") for k in model.state_dict())
