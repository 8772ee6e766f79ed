"""Activation patching, path patching and the logit lens (DESIGN.md "Causal experiments").

Two kinds of oracle: a naive per-sequence, per-head loop written from DESIGN.md's definitions (float64,
full-length sequences, nothing from core/ but the weights), which the fast batched code must match to
1e-5; and a planted two-block induction circuit (exercises/planted.py) whose answers are known by
construction."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core.causal import logit_lens as LL
from core.causal import patching as P
from core.causal import path_patching as PP
from core.causal.corruptions import corrupt
from core.model.task import TaskConfig
from exercises.planted import INDUCTION, PREV, TASK, planted_induction_model

from helpers import tiny_model

# ---------------------------------------------------------------------------------------------
# The naive reference


def naive_rotations(T: int, d: int, base: float) -> torch.Tensor:
    """R[t] [d, d]: the rotation of position t, pairs (j, j + d/2) turned by t * base^(-2j/d)."""
    R = torch.zeros(T, d, d, dtype=torch.float64)
    for t in range(T):
        R[t] = torch.eye(d, dtype=torch.float64)
        for j in range(d // 2):
            a, b, th = j, j + d // 2, t * base ** (-2 * j / d)
            R[t, a, a], R[t, a, b], R[t, b, a], R[t, b, b] = math.cos(th), -math.sin(th), math.sin(th), math.cos(th)
    return R


def naive_run(model, x, head_patch=None, resid_patch=None, path=None):
    """One sequence x [T] through the model, explicitly, in float64.

    head_patch = (layer, head, out [T, D], positions): that head's z W_O replaced at those positions.
    resid_patch = (layer, position, vector [D]): the stream entering `layer` replaced at one position.
    path = (layer, head, "q"|"k"|"v", delta [T, D]): that head's chosen input reads stream + delta.
    Returns (logits [T, V], resid list, head outputs {(layer, head): [T, D]})."""
    cfg = model.cfg
    P_ = {k: v.detach().double() for k, v in model.state_dict().items()}
    T, dh = len(x), cfg.d_head
    R = naive_rotations(T, dh, cfg.rope_base)
    h = P_["W_E"][x]
    resid, outs = [], {}
    for l in range(cfg.n_layers):
        if resid_patch is not None and resid_patch[0] == l:
            h = h.clone()
            h[resid_patch[1]] = resid_patch[2]
        resid.append(h)
        update = torch.zeros_like(h)
        for hd in range(cfg.n_heads):
            inp = {"q": h, "k": h, "v": h}
            if path is not None and path[0] == l and path[1] in (hd, None):  # None: every head of the block
                inp[path[2]] = h + path[3]
            qkv = {}
            for n in "qkv":
                y = inp[n] @ P_[f"blocks.{l}.W_{n.upper()}"][hd]
                if cfg.bias:
                    y = y + P_[f"blocks.{l}.b_{n.upper()}"][hd]
                qkv[n] = torch.stack([R[t] @ y[t] for t in range(T)]) if n != "v" else y
            out = torch.zeros_like(h)
            for i in range(T):
                scores = torch.stack([qkv["q"][i] @ qkv["k"][j] for j in range(i + 1)]) / math.sqrt(dh)
                out[i] = (torch.softmax(scores, 0) @ qkv["v"][: i + 1]) @ P_[f"blocks.{l}.W_O"][hd]
            if head_patch is not None and head_patch[:2] == (l, hd):
                out = out.clone()
                out[head_patch[3]] = head_patch[2][head_patch[3]]
            outs[(l, hd)] = out
            update = update + out
        h = h + update + (P_[f"blocks.{l}.b_O"] if cfg.bias else 0.0)
    resid.append(h)
    return h @ P_["W_E"].T, resid, outs


def naive_M(logits_per_seq, tokens, periods) -> float:
    """Mean log-prob of the right token over every target L+1 <= t < 2L of every sequence."""
    vals = []
    for b, logits in enumerate(logits_per_seq):
        L = int(periods[b])
        for t in range(L + 1, 2 * L):
            vals.append(torch.log_softmax(logits[t - 1], 0)[tokens[b, t]].item())
    return sum(vals) / len(vals)


class Naive:
    """Clean and corrupted naive runs of a batch and the patch effect of any intervention."""

    def __init__(self, model, clean, corrupted, periods):
        self.model, self.clean, self.corrupted, self.periods = model, clean, corrupted, periods
        self.c = [naive_run(model, x) for x in clean]
        self.k = [naive_run(model, x) for x in corrupted]
        self.m_clean = naive_M([r[0] for r in self.c], clean, periods)
        self.m_corr = naive_M([r[0] for r in self.k], clean, periods)

    def effect(self, logits_per_seq) -> float:
        return (naive_M(logits_per_seq, self.clean, self.periods) - self.m_corr) / (self.m_clean - self.m_corr)

    def head(self, l, hd, positions):
        return self.effect([naive_run(self.model, x, head_patch=(l, hd, self.c[b][2][(l, hd)], positions))[0]
                            for b, x in enumerate(self.corrupted)])

    def resid(self, l, p):
        return self.effect([naive_run(self.model, x, resid_patch=(l, p, self.c[b][1][l][p]))[0]
                            for b, x in enumerate(self.corrupted)])

    def path(self, sender, receiver, which, direction):
        base, donor, xs = (self.c, self.k, self.clean) if direction == "noising" else (self.k, self.c, self.corrupted)
        return self.effect([naive_run(self.model, x,
                                      path=(*receiver, which, donor[b][2][sender] - base[b][2][sender]))[0]
                            for b, x in enumerate(xs)])


@pytest.fixture(scope="module", params=[False, True], ids=["no-bias", "bias"])
def pair(request):
    """A random 2-block model (float64), 3 short task sequences and their corruptions; full length 16."""
    model = tiny_model(2, bias=request.param, seed=5, dtype=torch.float64)
    task = TaskConfig(period_min=4, period_max=6, seq_len=16)
    g = torch.Generator().manual_seed(3)
    from core.model.task import sample_batch
    clean, periods = sample_batch(task, 3, model.cfg.vocab_size, generator=g)
    corrupted = corrupt(clean, periods, model.cfg.vocab_size, g)
    return model, P.prepare(model, clean, corrupted, periods), Naive(model, clean, corrupted, periods)


# ---------------------------------------------------------------------------------------------
# The fast code against the naive loops


def test_corruption_replaces_exactly_the_first_copy():
    clean = torch.arange(40).reshape(2, 20) % 7
    periods = torch.tensor([5, 9])
    bad = corrupt(clean, periods, 64, torch.Generator().manual_seed(0))
    for b, L in enumerate(periods.tolist()):
        assert torch.equal(bad[b, L:], clean[b, L:])
        assert not torch.equal(bad[b, :L], clean[b, :L])  # 64 symbols: a fresh pattern differs


@pytest.mark.slow
def test_metric_and_both_runs_match_the_naive_loop(pair):
    model, runs, naive = pair
    assert abs(runs.m_clean - naive.m_clean) < 1e-9 and abs(runs.m_corrupted - naive.m_corr) < 1e-9
    assert runs.m_clean != runs.m_corrupted


@pytest.mark.slow
def test_head_patching_matches_the_naive_loop(pair):
    model, runs, naive = pair
    df = P.head_patch_effects(model, runs)
    T = naive.clean.shape[1]
    for r in df.itertuples():
        assert abs(r.patch_effect - naive.head(r.layer, r.head, list(range(T)))) < 1e-5, (r.layer, r.head)
        assert abs(runs.effect(P.patch_heads(model, runs, [(r.layer, r.head)])) - r.patch_effect) < 1e-9


@pytest.mark.slow
def test_residual_patching_by_position_matches_the_naive_loop(pair):
    model, runs, naive = pair
    grid = P.resid_patch_effects(model, runs)
    T_full, T = naive.clean.shape[1], runs.clean.shape[1]
    assert grid.shape == (2, T) and T == 2 * int(naive.periods.max()) < T_full
    for l in range(2):
        for p in range(T_full):  # positions cut off by the fast code cannot change M: the naive gives 0
            want = naive.resid(l, p)
            assert abs((grid[l, p] if p < T else 0.0) - want) < 1e-5, (l, p)


@pytest.mark.slow
def test_head_patching_by_position_matches_the_naive_loop(pair):
    model, runs, naive = pair
    grid = P.head_position_effects(model, runs)
    assert grid.shape == (2, 4, runs.clean.shape[1])
    for l in range(2):
        for hd in range(4):
            for p in range(runs.clean.shape[1]):
                assert abs(grid[l, hd, p] - naive.head(l, hd, [p])) < 1e-5, (l, hd, p)


@pytest.mark.slow
def test_path_patching_matches_the_naive_loop(pair):
    model, runs, naive = pair
    df = PP.path_patch_table(model, runs)
    single = df[df.receiver_head >= 0]
    assert len(single) == 2 * 3 * 4 * 4  # directions x paths x senders x receivers
    for r in single.itertuples():
        want = naive.path((r.sender_layer, r.sender_head), (r.receiver_layer, r.receiver_head), r.path, r.direction)
        assert abs(r.patch_effect - want) < 1e-5, r


@pytest.mark.slow
def test_path_into_a_whole_block_matches_the_naive_loop(pair):
    model, runs, naive = pair
    df = PP.path_patch_table(model, runs)
    joint = df[df.receiver_head < 0]
    assert len(joint) == 2 * 3 * 4  # directions x paths x senders, receiver = all of block 2
    for r in joint.itertuples():
        want = naive.path((r.sender_layer, r.sender_head), (1, None), r.path, r.direction)
        assert abs(r.patch_effect - want) < 1e-5, r


@pytest.mark.slow
def test_logit_lens_matches_the_naive_streams(pair):
    model, runs, naive = pair
    prob, rank = LL.lens(model, naive.clean)
    for b in range(naive.clean.shape[0]):
        for s, h in enumerate(naive.c[b][1]):
            logits = h @ model.W_E.detach().double().T
            for i in range(naive.clean.shape[1] - 1):
                target = naive.clean[b, i + 1]
                p = torch.softmax(logits[i], 0)[target].item()
                assert abs(prob[s, b, i].item() - p) < 1e-9
                assert rank[s, b, i].item() == 1 + int((logits[i] > logits[i, target]).sum())
    df = LL.lens_by_copy(model, naive.clean, naive.periods)
    assert list(df["copy"][:3]) == ["first", "second", "later"] and len(df) == 3 * 3
    last = model(naive.clean).softmax(-1)[:, :-1].gather(-1, naive.clean[:, 1:, None])[..., 0]
    assert torch.allclose(prob[-1], last)  # no final LayerNorm: the last lens is the model itself


# ---------------------------------------------------------------------------------------------
# The planted induction circuit: answers known by construction


@pytest.fixture(scope="module")
def planted():
    model = planted_induction_model()
    return model, P.task_runs(model, TASK, 64, seed=0)


def test_planted_circuit_separates_the_runs(planted):
    _, runs = planted
    assert runs.m_clean > -1.5 and runs.m_corrupted < -5.0  # reads the context / cannot


def test_planted_induction_head_patch_is_one_silent_heads_zero(planted):
    model, runs = planted
    df = P.head_patch_effects(model, runs).set_index(["layer", "head"])["patch_effect"]
    assert abs(df[INDUCTION] - 1) < 1e-4
    for key, v in df.items():
        if key not in (INDUCTION, PREV):
            assert v == 0.0, key  # a head that writes nothing changes nothing, exactly
    # the previous-token head's clean keys point the induction head at corrupted values: worse than nothing
    assert df[PREV] < 0


def test_patching_everything_gives_one_nothing_gives_zero(planted):
    model, runs = planted
    every = [(l, h) for l in range(2) for h in range(4)]
    assert abs(runs.effect(P.patch_heads(model, runs, every)) - 1) < 1e-4
    assert runs.effect(P.patch_heads(model, runs, [])) == 0.0
    assert abs(P.resid_all_positions_effect(model, runs, 1) - 1) < 1e-4
    assert abs(P.resid_all_positions_effect(model, runs, 0) - 1) < 1e-4


def test_planted_key_path_is_needed_value_path_is_not(planted):
    model, runs = planted
    assert PP.path_effect(model, runs, PREV, INDUCTION, "k", "noising") < 0.2  # most clean performance gone
    assert abs(PP.path_effect(model, runs, PREV, INDUCTION, "v", "noising") - 1) < 1e-4  # none lost
    assert abs(PP.path_effect(model, runs, PREV, INDUCTION, "q", "noising") - 1) < 1e-4
    # no denoised path restores the right token while the values stay corrupted
    for path in "qkv":
        assert PP.path_effect(model, runs, PREV, INDUCTION, path, "denoising") < 0.05


def test_planted_residual_by_position_recovers_only_through_the_first_copy(planted):
    model, runs = planted
    grid = P.resid_patch_effects(model, runs)  # [2, T]
    assert np.all(grid[:, 2 * TASK.period_max:] == 0.0)  # past every target: nothing changes


def test_planted_logit_lens_finds_the_answer_only_after_block_2(planted):
    model, runs = planted
    df = LL.lens_by_copy(model, runs.clean, runs.periods).set_index(["stage", "copy"])
    assert df.loc[(1, "second"), "prob"] < 0.1 < 0.5 < df.loc[(2, "second"), "prob"]
    assert df.loc[(2, "second"), "rank"] < df.loc[(1, "second"), "rank"]


# ---------------------------------------------------------------------------------------------
# Edges


def test_periods_without_a_second_copy_are_refused():
    model = tiny_model(1)
    task = TaskConfig(period_min=4, period_max=6, seq_len=16)
    for period, phrase in ((1, "at least 2"), (9, "no complete second copy")):
        with pytest.raises(ValueError, match=phrase):
            P.task_runs(model, task, 4, period=period)


def test_zero_block_model_cannot_tell_the_runs_apart():
    model = tiny_model(0)
    runs = P.task_runs(model, TaskConfig(period_min=4, period_max=6, seq_len=16), 4)
    assert runs.m_clean == runs.m_corrupted  # logits depend on the current token only
    assert P.head_patch_effects(model, runs).empty
    assert math.isnan(float(runs.effect(runs.m_clean)))
    assert PP.path_patch_table(model, runs).empty


def test_bad_path_arguments_raise():
    model = tiny_model(2)
    runs = P.task_runs(model, TaskConfig(period_min=4, period_max=6, seq_len=16), 2)
    with pytest.raises(ValueError, match="earlier block"):
        PP.path_patch(model, runs, [(1, 0)], (1, 2), "k", "noising")
    with pytest.raises(ValueError, match="path"):
        PP.path_patch(model, runs, [(0, 0)], (1, 2), "x", "noising")
    with pytest.raises(ValueError, match="direction"):
        PP.path_patch(model, runs, [(0, 0)], (1, 2), "k", "sideways")
