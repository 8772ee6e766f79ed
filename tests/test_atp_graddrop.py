"""GradDrop (core.causal.atp, Kramár et al., 2024): identities that follow from its definition, the dropped
estimate against an independent linearisation of the direct path, a model whose only path is the direct one,
bad inputs, and what it says about head 1.4 on the shipped file."""
import numpy as np
import pytest
import torch

from core.causal import atp, check_readings, noising, patching
from core.causal.corruptions import corrupt
from core.model.checkpoints import read_checkpoint

from helpers import ROOT, tiny_model


def _runs(model, L=5, B=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, model.cfg.vocab_size, (B, L), generator=g).repeat(1, 2)
    periods = torch.full((B,), L)
    return patching.prepare(model, clean, corrupt(clean, periods, model.cfg.vocab_size, g), periods)


def test_dropping_block_1_changes_nothing_and_heads_at_or_above_the_dropped_block_keep_their_estimate():
    model = tiny_model(3, seed=3)
    runs = _runs(model, seed=3)
    star, plain = atp.atp_star_head_positions(model, runs), noising.attribution_head_positions(model, runs)
    gd, gd_plain = atp.graddrop_head_positions(model, runs), atp.graddrop_head_positions(model, runs, qk_fix=False)
    assert np.allclose(gd[0], star, atol=1e-6) and np.allclose(gd_plain[0], plain, atol=1e-6)
    for drop in (1, 2):
        assert np.allclose(gd[drop, drop:], star[drop:], atol=1e-6)  # no path from them runs through block `drop`
        assert np.abs(gd[drop, :drop] - star[:drop]).max() > 1e-4  # heads below lose the paths through it
    assert np.allclose(atp.graddrop_head_positions(model, runs, undropped=star), gd, atol=1e-6)


def test_with_block_2_dropped_a_block_1_head_keeps_its_direct_path_linearised():
    """Independent of atp's code: the gradient of M with respect to the final stream of the corrupted run (one
    autograd call on a plain run from the last stream), dotted with the head's clean - corrupted output."""
    model = tiny_model(2, seed=4)
    runs = _runs(model, seed=4)
    final = runs.corrupted_cache["resid"][2].clone().requires_grad_(True)
    logits, _ = model.run_with_hooks(resid=final, start=2)
    (g,) = torch.autograd.grad(patching.metric(logits, runs.clean, runs.periods), [final])
    delta = runs.clean_cache["head_out"][0] - runs.corrupted_cache["head_out"][0]  # [B, H, T, D]
    want = (delta * g[:, None]).sum((0, -1)).numpy() / (runs.m_clean - runs.m_corrupted)  # [H, T]
    for qk_fix in (True, False):
        assert np.allclose(atp.graddrop_head_positions(model, runs, qk_fix)[1, 0], want, atol=1e-6)


def test_when_block_2_writes_nothing_the_direct_path_is_the_whole_estimate():
    """Block 2's outputs zeroed: a block-1 head reaches M only directly, so dropping block 2 loses nothing, and
    the GradDrop magnitude is twice the estimate's (n_layers - 1 = 1)."""
    model = tiny_model(2, seed=5)
    with torch.no_grad():
        model.blocks[1].W_O.zero_()
    runs = _runs(model, seed=5)
    gd = atp.graddrop_head_positions(model, runs)
    assert np.allclose(gd[1, 0], gd[0, 0], atol=1e-6) and np.abs(gd[0, 0]).max() > 1e-3
    assert np.allclose(atp.graddrop_score(gd)[0], 2 * np.abs(gd[0, 0]), atol=1e-6)


def test_direct_path_effects_match_patching_the_final_stream():
    model = tiny_model(2, seed=6)
    runs = _runs(model, seed=6)
    got = atp.direct_path_effects(model, runs)
    l, h = 0, 3
    final = runs.corrupted_cache["resid"][2] + runs.clean_cache["head_out"][l][:, h] - \
        runs.corrupted_cache["head_out"][l][:, h]
    with torch.no_grad():
        logits, _ = model.run_with_hooks(resid=final, start=2)
    assert got[l, h] == pytest.approx(float(runs.effect(float(patching.metric(logits, runs.clean, runs.periods)))),
                                      abs=1e-6)
    assert np.allclose(got[1], patching.head_patch_effects(model, runs)["patch_effect"].to_numpy()[4:], atol=1e-5)


def test_bad_inputs_are_refused():
    one = tiny_model(1)
    with pytest.raises(ValueError, match="two blocks or more"):
        atp.graddrop_head_positions(one, _runs(one))
    with pytest.raises(ValueError, match="another model"):
        atp.graddrop_head_positions(tiny_model(2), _runs(tiny_model(3)))


@pytest.mark.slow
def test_on_the_shipped_file_graddrop_finds_no_cancellation_for_1_4():
    """The shipped 2-block file, first copy, period 24, 32 sequences: 1.4's direct path carries about nothing
    (exactly and estimated), so there is nothing for GradDrop to uncover, and its magnitude is AtP*'s."""
    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    runs = patching.task_runs(model, info["task"], 32, 0, 24)
    exact = patching.head_position_effects(model, runs)
    star = atp.atp_star_head_positions(model, runs)
    t = atp.graddrop_table(model, runs, exact, star).set_index("label")
    r = t.loc["1.4"]
    assert r.exact_sum < 0 < r.star_sum
    assert abs(r.dropped_layer1) < 0.01 and abs(r.direct_exact) < 0.01
    assert r.graddrop == pytest.approx(abs(r.star_sum), abs=0.005)  # per position: |AtP*| + |direct| ~ |AtP*|
    said = check_readings.graddrop_sentence(t.reset_index(), runs.m_clean - runs.m_corrupted)
    s = check_readings.signed
    assert (f"1.4: exact {s(exact[0, 3].sum())}, AtP* {s(star[0, 3].sum())}; with block 2's gradient dropped only "
            f"its direct path is left, estimated {s(r.dropped_layer1)} (exactly {s(r.direct_exact)}), so nothing "
            f"cancels: "
            f"GradDrop's score is {r.graddrop:.3f}, AtP*'s sum {s(star[0, 3].sum())}") in said
    wrong = [lab for lab in ("1.1", "1.2", "1.3", "1.4")
             if (t.loc[lab, "star_sum"] > 0) != (t.loc[lab, "exact_sum"] > 0)]
    assert all(f"{lab}: exact" in said for lab in wrong) and "cannot correct a sign" in said
