"""The RoPE-aware K-composition score (core.causal.composition): its rotation against the model's own
rotated queries and keys, a constructed pair whose answer is |cos(d theta)|, offset 0 as the plain score, the
offsets a planted induction head attends at, and bad inputs."""
import math

import pytest
import torch

from core.causal import composition as C
from core.causal import patching, readings
from core.model.config import ModelConfig
from core.model.hooks import hook_name
from core.model.tinycharlm import TinyCharLM
from core.reading.composition import composition_matrix
from exercises.planted import TASK, planted_induction_model

from helpers import tiny_model


def test_the_rotation_is_the_models_own():
    """x_i W_QK(i - j) x_j^T equals the model's rotated q_i . rotated k_j (hook_rot_q, hook_rot_k) for every pair."""
    model = tiny_model(2, seed=2, dtype=torch.float64)
    x = torch.randint(0, 16, (1, 12), generator=torch.Generator().manual_seed(0))
    names = [hook_name(1, p) for p in ("hook_resid_pre", "attn.hook_rot_q", "attn.hook_rot_k")]
    with torch.no_grad():
        _, cache = model.run_with_hooks(x, cache=names)
    h, q, k = (cache[n][0] for n in names)
    for head in (0, 3):
        for i, j in ((5, 5), (7, 2), (11, 0), (9, 8)):
            got = float(h[i] @ C.rotated_qk(model, 1, head, i - j) @ h[j])
            assert got == pytest.approx(float(q[head, i] @ k[head, j]), rel=1e-9, abs=1e-9), (head, i, j)


def _pair(a: int = 1) -> TinyCharLM:
    """Writer 1.1 writes stream dim 0 into dim 1; reader 2.1's query reads dim 2 into rotary pair a's first
    coordinate, its key reads dim 1 into that coordinate and dim 3 into the pair's second one."""
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=2)).double()
    dh = model.cfg.d_head
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        w, r = model.blocks
        w.W_V[0, 0, 0], w.W_O[0, 0, 1] = 1.0, 1.0
        r.W_Q[0, 2, a] = 1.0
        r.W_K[0, 1, a], r.W_K[0, 3, a + dh // 2] = 1.0, 1.0
    return model


def test_a_constructed_pair_scores_the_cosine_of_its_turn():
    """At offset d the reader's query matches cos(d theta_a) of what the writer writes and sin(d theta_a) of a
    direction it does not: the plain score is 1 (offset 0) and the rotated one |cos(d theta_a)|."""
    a = 1
    model = _pair(a)
    theta = model.cfg.rope_base ** (-2 * a / model.cfg.d_head)
    assert float(composition_matrix(model, "K", 0, 1)[0, 0]) == pytest.approx(1.0)
    for d in (0, 3, 10):
        weights = torch.zeros(2, 20)
        weights[:, d] = 1.0
        got = float(C.rope_composition(model, weights)[0, 0])
        c, s = math.cos(d * theta), math.sin(d * theta)
        assert got == pytest.approx(abs(c) / math.hypot(c, s), abs=1e-9), d  # the norm of W_QK(d) stays 1
    two = torch.zeros(2, 20)
    two[:, 3], two[:, 10] = 1.0, 3.0
    assert float(C.rope_composition(model, two)[0, 0]) == pytest.approx(
        (abs(math.cos(3 * theta)) + 3 * abs(math.cos(10 * theta))) / 4, abs=1e-9)


def test_offset_zero_is_the_plain_score():
    model = tiny_model(2, seed=1)
    weights = torch.zeros(4, 8)
    weights[:, 0] = 1.0
    assert torch.allclose(C.rope_composition(model, weights).float(), composition_matrix(model, "K", 0, 1), atol=1e-5)


def test_a_planted_induction_head_attends_one_period_minus_one_back():
    model = planted_induction_model()
    runs = patching.task_runs(model, TASK, 16, seed=0, period=8)
    mass = C.receiver_offsets(runs, 1)
    assert torch.allclose(mass.sum(1), torch.ones(4, dtype=torch.float64), atol=1e-5)
    assert int(mass[1].argmax()) == 7 and mass[1, 7] > 0.5  # head 2.2: query i, key i - L + 1


def test_bad_inputs_are_refused():
    model = tiny_model(2)
    with pytest.raises(ValueError, match="must come before"):
        C.rope_composition(model, torch.ones(4, 3), writer=1, reader=1)
    with pytest.raises(ValueError, match="some weight for every reader"):
        C.rope_composition(model, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="some weight for every reader"):
        C.rope_composition(model, torch.ones(3, 3))
    one = tiny_model(1)
    runs = patching.task_runs(one, TASK, 2, seed=0, period=6)
    with pytest.raises(ValueError, match="two blocks"):
        C.rope_composition_vs_paths(one, runs, None)


@pytest.mark.slow
def test_on_the_shipped_file_only_the_rope_aware_score_separates_the_heads_that_look_back():
    """The shipped 2-block file at the page's defaults: the sentence's counts and ranges recomputed from the
    frame, and the separation checked on the two score matrices directly."""
    from core.causal import check_readings, checks, experiments
    from core.model.checkpoints import read_checkpoint

    from helpers import ROOT

    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    runs = patching.task_runs(model, info["task"], 32, 0, 24)
    paths, offsets = experiments._path_frame(model, runs), experiments.block1_offsets(runs)
    frame = checks.rope_composition(model, runs, paths)
    said = check_readings.rope_sentence(frame, offsets, runs.m_clean - runs.m_corrupted)
    rope = C.rope_composition(model, C.receiver_offsets(runs, 1))
    plain = composition_matrix(model, "K", 0, 1)
    back, self_ = [1, 3], [0, 2]  # 1.2 and 1.4 look back (offsets 2 and 1), 1.1 and 1.3 attend to themselves
    assert (rope[back].min(0).values > rope[self_].max(0).values).all()
    assert not (plain[back].min(0).values > plain[self_].max(0).values).all()
    agree = {s: int(readings.top_senders(frame, s)["agree"].sum()) for s in ("k_score", "k_rope")}
    assert agree == {"k_score": 0, "k_rope": 4}
    assert "the score names the most needed key writer for 4 of 4 block-2 heads" in said
    assert "the plain score for 0 of 4" in said and "(most attended: 23)" in said
    assert "Only the RoPE-aware score separates the heads that look back (1.2 and 1.4) from those that attend to " \
           "their own position (1.1 and 1.3)" in said
    assert f"1.4 {rope[3].min():.3f}–{rope[3].max():.3f}, 1.1" in said


def test_the_page_checks_come_with_the_experiments_they_sit_beside():
    """checks.all_checks on a small 2-block model: GradDrop's undropped column is the experiments' own AtP*, the
    composition frame carries both scores; a 1-block model gets neither."""
    from dataclasses import replace

    from core.causal import checks, experiments

    model = tiny_model(2, seed=3)
    runs = patching.task_runs(model, TASK, 3, seed=0, period=4)
    res = experiments.experiments(model, runs, positions=True)
    got = checks.all_checks(model, runs, res)
    star = res.attribution["star"].reshape(2, 4, -1).sum(-1)
    assert got["graddrop"]["star_sum"].to_numpy() == pytest.approx(star.reshape(-1), abs=1e-6)
    assert {"k_score", "k_rope", "k_lost", "receiver_offset"} <= set(got["rope"].columns)
    assert checks.all_checks(model, runs, replace(res, attribution=None))["graddrop"] is None  # no sweeps
    one = tiny_model(1)
    assert checks.all_checks(one, patching.task_runs(one, TASK, 2, seed=0, period=4), res) == {
        "graddrop": None, "rope": None, "circuit_fresh": None}
