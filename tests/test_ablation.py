"""Ablations on hand-built weights with known answers, and on the shipped 2-block checkpoint."""

import pytest
import torch

from core.model.checkpoints import read_checkpoint
from core.model.metrics import copy_metrics
from core.model.task import TaskConfig
from core.reading.ablation import (
    ablated_logits,
    ablated_metrics,
    ablation_table,
    compare_ablation,
    single_head_ablation,
)
from core.reading.attention import capture, task_sequences
from core.reading.heads import head_score_table

from helpers import shipped as shipped_path
from helpers import tiny_model

TASK = TaskConfig(period_min=4, period_max=8, seq_len=24)


def batch(n=16, seed=0):
    return task_sequences(TASK, 16, n, seed=seed)


def test_head_that_writes_nothing_has_no_effect():
    model = tiny_model(2)
    with torch.no_grad():
        model.blocks[0].W_O[2] = 0.0
    tokens, periods = batch()
    for mode in ("zero", "mean"):
        row = next(r for r in single_head_ablation(model, tokens, periods, mode) if (r["layer"], r["head"]) == (0, 2))
        # the clean run records every block's input (the hooked path), an ablation's later blocks run the
        # fused compiled kernel: equal to float32 rounding, and no target changes its prediction
        assert row["loss_later_delta"] == pytest.approx(0.0, abs=1e-4) and row["acc_later_delta"] == 0.0
    clean = ablated_metrics(model, tokens, periods)
    for mode in ("zero", "mean"):
        # the edit runs the hooked path, the clean run the fused kernel: equal to float32 rounding
        assert ablated_metrics(model, tokens, periods, {(0, 2): mode}) == pytest.approx(clean, rel=1e-5)
    # a head that matters does change the loss, so the test above can fail
    assert any(abs(r["loss_later_delta"]) > 1e-3 for r in single_head_ablation(model, tokens, periods))


def test_mean_ablation_keeps_a_constant_output():
    """A head whose values are its bias alone writes the same vector everywhere: replacing it by its
    mean changes nothing, replacing it by zero does."""
    model = tiny_model(1, bias=True)
    with torch.no_grad():
        model.blocks[0].W_V[1] = 0.0
    tokens, periods = batch()
    clean = ablated_metrics(model, tokens, periods)["loss_later_copies"]
    mean_ablated = ablated_metrics(model, tokens, periods, {(0, 1): "mean"})["loss_later_copies"]
    assert mean_ablated == pytest.approx(clean, abs=1e-5)
    assert abs(ablated_metrics(model, tokens, periods, {(0, 1): "zero"})["loss_later_copies"] - clean) > 1e-3


def reference_logits(model, tokens, heads=None):
    """Ablation by its definition, on the model's explicit per-head path: each block's head outputs
    (A_h v_h) W_O[h] (forward_with_cache), the knocked-out ones set to 0 or to their mean over the batch
    at each position, summed with b_O into the stream the next block reads."""
    heads = heads or {}
    with torch.no_grad():
        h = model.W_E[tokens]
        for layer, block in enumerate(model.blocks):
            head_out = block.forward_with_cache(h)[2].clone()
            for (l, hd), mode in heads.items():
                if l == layer:
                    head_out[:, hd] = 0.0 if mode == "zero" else head_out[:, hd].mean(0, keepdim=True)
            h = h + head_out.sum(1) + (block.b_O if model.cfg.bias else 0.0)
        return h @ model.W_E.T


def reference_metrics(model, tokens, periods, heads=None):
    """Copy metrics of reference_logits: the definition the fast path must match."""
    return copy_metrics(reference_logits(model, tokens, heads), tokens, periods)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablated_logits_equal_the_models_own_ablation(mode):
    model = tiny_model(2, bias=True, dtype=torch.float64)
    tokens, _ = batch()
    heads = {(0, 1): mode, (1, 0): mode, (1, 3): mode}
    with torch.no_grad():
        want = reference_logits(model, tokens, heads)
        assert torch.allclose(ablated_logits(model, tokens, heads), want, atol=1e-9)
        assert torch.allclose(ablated_logits(model, tokens), model(tokens), atol=1e-9)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_fast_single_head_ablation_equals_a_full_ablated_run(mode):
    model = tiny_model(3, dtype=torch.float64)  # losses of this random model are large: compare in float64
    tokens, periods = batch()
    clean = reference_metrics(model, tokens, periods)
    fast = single_head_ablation(model, tokens, periods, mode)
    assert len(fast) == 12
    for r in fast:
        full = reference_metrics(model, tokens, periods, {(r["layer"], r["head"]): mode})
        assert r["loss_later_delta"] == pytest.approx(full["loss_later_copies"] - clean["loss_later_copies"], abs=1e-9)
        assert r["acc_later_delta"] == pytest.approx(full["acc_later_copies"] - clean["acc_later_copies"], abs=1e-9)


def test_permuting_heads_permutes_rows_and_keeps_the_loss():
    model = tiny_model(2, seed=3)
    perm = torch.tensor([2, 0, 3, 1])
    permuted = tiny_model(2, seed=3)
    with torch.no_grad():
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            getattr(permuted.blocks[1], name).copy_(getattr(model.blocks[1], name)[perm])
    tokens, periods = batch()
    a, b = ablated_metrics(model, tokens, periods), ablated_metrics(permuted, tokens, periods)
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-5, abs=1e-5)
    ta = ablation_table(model, tokens, periods).set_index(["layer", "head"])
    tb = ablation_table(permuted, tokens, periods).set_index(["layer", "head"])
    for new, old in enumerate(perm.tolist()):
        delta = "loss_later_delta"
        assert tb.loc[(1, new), delta] == pytest.approx(ta.loc[(1, old), delta], rel=1e-4, abs=1e-4)
        assert tb.loc[(0, new), delta] == pytest.approx(ta.loc[(0, new), delta], rel=1e-4, abs=1e-4)
    sa = head_score_table(capture(model, tokens, periods).pattern, periods).set_index(["layer", "head"])
    sb = head_score_table(capture(permuted, tokens, periods).pattern, periods).set_index(["layer", "head"])
    for new, old in enumerate(perm.tolist()):
        assert sb.loc[(1, new), "induction"] == pytest.approx(sa.loc[(1, old), "induction"], abs=1e-6)


def test_compare_and_bad_heads():
    model = tiny_model(2)
    tokens, periods = batch()
    df = compare_ablation(model, tokens, periods, {(0, 0): "zero", (1, 3): "mean"})
    assert list(df.columns) == ["clean", "ablated", "delta"] and "loss_later_copies" in df.index
    assert (df["ablated"] - df["clean"] - df["delta"]).abs().max() < 1e-12
    with pytest.raises(ValueError, match="no head 1.8 in this model"):
        ablated_metrics(model, tokens, periods, {(0, 7): "zero"})
    with pytest.raises(ValueError, match="zero' or 'mean"):
        ablated_metrics(model, tokens, periods, {(0, 1): "noise"})


# ---------------------------------------------------------------------------------------------
# The shipped 2-block checkpoint: the circuit's parts matter, an unused head does not


@pytest.fixture(scope="module")
def shipped():
    model, info = read_checkpoint(shipped_path())
    tokens, periods = task_sequences(info["task"], model.cfg.vocab_size, 64, seed=1)
    cap = capture(model, tokens, periods)
    return model, tokens, periods, cap, head_score_table(cap.pattern, periods)


def test_shipped_circuit_heads_matter(shipped):
    model, tokens, periods, _, scores = shipped
    block1, block2 = scores[scores.layer == 0], scores[scores.layer == 1]
    prev = int(block1.loc[block1.prev_token.idxmax(), "head"])
    induction = [int(h) for h in block2[block2.induction > 0.3]["head"]]
    assert block1.prev_token.max() > 0.3 and induction, scores  # far above a uniform head (about 0.03)
    clean = ablated_metrics(model, tokens, periods)["loss_later_copies"]
    no_prev = ablated_metrics(model, tokens, periods, {(0, prev): "zero"})["loss_later_copies"]
    no_ind = ablated_metrics(model, tokens, periods, {(1, h): "zero" for h in induction})["loss_later_copies"]
    assert no_prev - clean >= 2.0 and no_ind - clean >= 2.0, (clean, no_prev, no_ind)


def test_shipped_previous_token_head_matters_most_in_block_1(shipped):
    """Of the block-1 heads, knocking out the previous-token head (chosen by its attention score, not
    by ablation) hurts the later copies most, by at least twice as much as any other block-1 head.
    (In this run the other block-1 heads are not idle: two attend to their own position with an
    anti-copying OV circuit, so they matter too, only less.)"""
    model, tokens, periods, _, scores = shipped
    block1 = scores[scores.layer == 0]
    prev = int(block1.loc[block1.prev_token.idxmax(), "head"])
    delta = {r["head"]: r["loss_later_delta"] for r in single_head_ablation(model, tokens, periods) if r["layer"] == 0}
    others = [v for h, v in delta.items() if h != prev]
    assert delta[prev] >= 2 * max(others), (prev, delta)
