"""What the Causal page says follows from what it measured. The resample corruption, which
path-patching rows each corruption can test, the 'more than the previous token' sentence, and no
interpretive sentence or question where the gap is small or an effect is within its noise
(core.causal.readings, core.quiz.causal), on the shipped 2-block file."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from core.causal import corruptions, patching, readings
from core.causal import experiments as causal
from core.model.checkpoints import read_checkpoint
from core.model.snapshots import model_at_step
from core.quiz import causal as quiz_causal

from helpers import ROOT

FILE = ROOT / "checkpoints" / "variable-period-2block.pt"
PERIOD, N_SEQS = 24, 32  # the page's default period for this file and its number of sequences


@pytest.fixture(scope="module")
def shipped():
    torch.manual_seed(0)
    return read_checkpoint(FILE)


@pytest.fixture(scope="module")
def first_copy(shipped):
    model, info = shipped
    return causal.task_experiments(model, info["task"], PERIOD, N_SEQS, 0, positions=False)


@pytest.fixture(scope="module")
def swept(shipped):
    model, info = shipped
    return causal.task_experiments(model, info["task"], PERIOD, N_SEQS, 0, positions=True)


@pytest.fixture(scope="module")
def resampled(shipped):
    model, info = shipped
    return causal.task_experiments(model, info["task"], PERIOD, N_SEQS, 0, positions=False, corruption="resample")


def _k2(res, path, direction="noising"):
    p = res.paths
    sub = p[(p["path"] == path) & (p["direction"] == direction) & (p["receiver_head"] < 0)]
    return sub.set_index("sender")


def test_resample_donors_are_other_sequences_of_the_same_period():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 16, (64, 30), generator=g)
    periods = torch.randint(3, 10, (64,), generator=g)
    donor = corruptions.resample(tokens, periods, 16, g)
    for row, L in zip(donor, periods.tolist()):
        assert torch.equal(row[L:], row[:-L])  # periodic with the clean row's period
    assert (donor != tokens).float().mean() > 0.8  # every position may differ, not only the first copy


def test_query_rows_are_untestable_under_first_copy_and_testable_under_resample(first_copy, resampled):
    assert first_copy.corruption == "first-copy" and resampled.corruption == "resample"
    senders = ["1.1", "1.2", "1.3", "1.4"]
    assert readings.untestable_paths(first_copy) == {"q": senders}
    assert first_copy.senders["at_queries"].max() < 0.1  # the last few tokens are the same in both runs
    assert readings.untestable_paths(resampled) == {}
    assert resampled.senders["at_queries"].min() > 0.9
    # the query rows move once the corruption reaches them: 1.4's query path into block 2 is needed
    q_first, q_res = _k2(first_copy, "q"), _k2(resampled, "q")
    assert q_first.loc["1.4", "patch_effect"] > 0.99
    assert q_res.loc["1.4", "effect_high"] < 0.9 and q_res.loc["1.1", "effect_high"] < 0.95


def test_effects_come_with_bootstrap_intervals_that_hold_them(first_copy):
    for frame in (first_copy.heads, first_copy.paths):
        ok = frame["patch_effect"].notna()
        assert ok.all()
        assert (frame["effect_low"] <= frame["patch_effect"] + 1e-9).all()
        assert (frame["patch_effect"] <= frame["effect_high"] + 1e-9).all()
    k = _k2(first_copy, "k")
    assert k.loc["1.4", "effect_high"] - k.loc["1.4", "effect_low"] < 0.2


def test_head_1_2_looks_two_back_and_the_page_says_the_match_uses_more(first_copy):
    top = first_copy.offsets[first_copy.offsets["top"]].set_index("sender")
    assert top.loc["1.2", "offset"] == 2 and top.loc["1.2", "mass"] > 0.9
    assert top.loc["1.4", "offset"] == 1
    k = _k2(first_copy, "k")
    assert k.loc["1.2", "effect_high"] < readings.NEEDED
    sentence = readings.longer_match_sentence(first_copy)
    assert sentence and "head 1.2" in sentence and "two positions back" in sentence
    assert f"{top.loc['1.2', 'mass']:.2f}" in sentence and f"{k.loc['1.2', 'patch_effect']:.2f}" in sentence
    assert "1.4" not in sentence  # it looks one position back
    kc = readings.key_composition_sentence(first_copy)
    assert kc and "head 1.4" in kc


def test_the_shipped_model_gets_its_questions(first_copy):
    gap = first_copy.gap
    assert quiz_causal.needed_key_path(first_copy.paths, gap).answer == "1.4"
    assert quiz_causal.patched_heads(first_copy.heads, gap).answer == "block 2"


@pytest.mark.parametrize("seed", [0, 1])
def test_no_interpretive_sentence_or_question_on_the_step_150_snapshot(shipped, seed):
    model, info = shipped
    early = model_at_step(model, info, 150)
    res = causal.task_experiments(early, info["task"], PERIOD, N_SEQS, seed, positions=False)
    gap = res.gap
    assert gap < readings.MIN_GAP
    assert readings.key_composition_sentence(res) is None
    assert readings.longer_match_sentence(res) is None
    assert readings.most_needed_key_path(res) is None
    for q in (quiz_causal.patched_heads(res.heads, gap), quiz_causal.needed_key_path(res.paths, gap),
              quiz_causal.lens_stage(res.lens_by_copy, gap=gap)):
        assert q.answer is None and "no clear answer" in q.why


def test_the_blank_embedding_row_is_explained_by_a_measured_window(swept):
    res = swept
    assert np.abs(res.resid[0]).max() < 0.02  # no single clean token restores anything measurable
    w = res.embedding_window
    assert w["positions"] == [8, 9, 10] and w["effect"] == pytest.approx(0.027, abs=0.002)
    assert w["one_target"] == pytest.approx(1 / 23)


def test_noising_direct_effects_and_attribution_on_the_shipped_file(swept, first_copy):
    """Noising per head, direct effects into the logits and attribution patching against the exact sweep
    (what a researcher would expect beside the exact sweep)."""
    noise = first_copy.noise.set_index("label")
    # the last block has nothing above it: its noising and direct effects are the same measurement
    for h in ("2.1", "2.2", "2.3", "2.4"):
        assert noise.loc[h, "noise_effect"] == pytest.approx(noise.loc[h, "direct_effect"], abs=1e-6)
    # block 1 writes nothing the logits read directly at the scored positions, but 1.4 is needed through block 2
    assert (noise.loc[["1.1", "1.2", "1.3", "1.4"], "direct_effect"] > 0.99).all()
    assert noise.loc["1.4", "noise_high"] < 0.45 and noise["noise_effect"].idxmin() == "1.4"
    res = swept
    att = res.attribution
    assert att["estimate"].shape == res.head_positions.shape
    assert att["corr"] > 0.8 and att["max_abs_diff"] < 0.05
    assert min(att["per_head"][h] for h in ("2.1", "2.2", "2.3", "2.4")) > 0.99
    assert att["per_head"]["1.4"] < 0.5  # it acts through block 2's keys: a first-order estimate misses that


def test_the_mechanism_over_training_shows_which_path_forms_first(shipped):
    """docs/DESIGN.md and the page's mechanism_sentence: at the first snapshot with a gap of at least MIN_GAP
    every block-1 value path is about equally needed (1.2's interval just reaches 0.9); at the end 1.4's key
    path is the most needed, the value paths of 1.2 and 1.4 are not needed and those of 1.1 and 1.3 still
    are. The first measurable step is found here from the gaps, not typed."""
    model, info = shipped
    gaps = {}
    for s in info["snapshots"]:
        runs = patching.task_runs(model_at_step(model, info, s["step"]), info["task"], N_SEQS, 0, PERIOD)
        gaps[s["step"]] = runs.m_clean - runs.m_corrupted
    first = min(step for step, g in gaps.items() if g >= readings.MIN_GAP)
    keep = {"snapshots": [s for s in info["snapshots"] if s["step"] == first], "task": info["task"],
            "train": info["train"]}
    df = causal.mechanism_over_training(model, keep, PERIOD, N_SEQS, 0)
    last = int(df["step"].max())
    eff = df.set_index(["step", "path", "sender"])
    v0 = eff.loc[(first, "v"), "patch_effect"]
    high0 = eff.loc[(first, "v"), "effect_high"]
    assert v0.max() - v0.min() < 0.1 and (v0 < readings.NEEDED).all()
    assert (high0.drop("1.2") < readings.NEEDED).all() and high0["1.2"] < readings.NEEDED + 0.01
    k1 = eff.loc[(last, "k"), "patch_effect"]
    assert k1.idxmin() == "1.4" and eff.loc[(last, "k", "1.4"), "effect_high"] < readings.NEEDED
    v1 = eff.loc[(last, "v")]
    assert (v1.loc[["1.2", "1.4"], "effect_high"] >= readings.NEEDED).all()
    assert (v1.loc[["1.1", "1.3"], "effect_high"] < readings.NEEDED).all()
    said = readings.mechanism_sentence(df)
    assert said.startswith(f"At step {first}, the first with a gap of at least")
    assert "No longer needed at the end: value path of 1.4." in said
    assert f"the key path of 1.4 from step {last}" in said  # only two steps kept here: 1.4's key path is new


def test_stream_noising_cannot_test_the_second_copy_under_first_copy_but_can_under_resample(shipped):
    model, info = shipped
    first = patching.task_runs(model, info["task"], 8, 0, PERIOD)
    res = patching.task_runs(model, info["task"], 8, 0, PERIOD, "resample")
    a = patching.resid_patch_effects(model, first, noising=True)
    b = patching.resid_patch_effects(model, res, noising=True)
    assert np.allclose(a[0, PERIOD:], 1.0, atol=1e-5)  # the same tokens in both runs there
    assert a[0, :PERIOD].max() < 0.97  # one first-copy token is needed by the targets that read it
    assert b[0, PERIOD:2 * PERIOD - 1].min() < 0.97  # under resample the query positions are tested too


def _planted(gap, effects):
    """A Causal-page result with only what the key-path sentence and question read: sender -> (effect,
    low, high) of noising its key path into all of block 2."""
    paths = pd.DataFrame([{"sender": s, "path": "k", "direction": "noising", "receiver_head": -1, "patch_effect": e,
                           "effect_low": lo, "effect_high": hi, "testable": True}
                          for s, (e, lo, hi) in effects.items()])
    return SimpleNamespace(gap=gap, paths=paths, offsets=None)  # the fields of results.Experiments they read


@pytest.mark.parametrize("gap, effects, answer", [
    (3.0, {"1.1": (0.2, 0.1, 0.3), "1.2": (0.8, 0.7, 0.9), "1.3": (0.95, 0.9, 1.0)}, "1.1"),
    # below the runner-up's interval but not below 1.3's wide one: not clear
    (3.0, {"1.1": (0.3, 0.1, 0.5), "1.2": (0.6, 0.55, 0.65), "1.3": (0.7, 0.4, 1.0)}, None),
    # clearly the lowest, but noising it leaves more than NEEDED: not clearly needed
    (3.0, {"1.1": (0.92, 0.91, 0.93), "1.2": (0.99, 0.98, 1.0), "1.3": (0.99, 0.98, 1.0)}, None),
    (0.3, {"1.1": (0.2, 0.1, 0.3), "1.2": (0.8, 0.7, 0.9), "1.3": (0.95, 0.9, 1.0)}, None),  # the gap is too small
])
def test_the_key_path_sentence_and_question_agree(gap, effects, answer):
    """The page's sentence (core.causal.readings) and its question (core.quiz.causal) on the same
    numbers: one rule (core.causal.clarity) decides both, so either both answer, naming the same head, or
    neither does. Each planted case sits where the two rules differed before."""
    res = _planted(gap, effects)
    sentence = readings.key_composition_sentence(res)
    question = quiz_causal.needed_key_path(res.paths, res.gap)
    assert question.answer == answer
    assert (sentence is None) == (answer is None)
    if answer:
        assert f"head {answer}:" in sentence and question.why.startswith(f"Noising head {answer}'s")


def test_per_position_cells_add_up_for_the_last_block_only(swept):
    """A last-block head's per-position cells sum to its section-1 effect (its write at p reaches
    only p's logits); an earlier-block head's need not. The page's sentence states what the frame holds."""
    res = swept
    whole = res.heads.set_index("label")["patch_effect"]
    summed = dict(zip(res.head_rows, res.head_positions.sum(1)))
    last = [lab for lab in res.head_rows if lab.startswith("2.")]
    assert max(abs(summed[h] - whole[h]) for h in last) < 1e-5
    gaps = {h: abs(summed[h] - whole[h]) for h in res.head_rows if h.startswith("1.")}
    assert max(gaps.values()) > 0.01  # block 1's rows do not add up
    said = readings.position_sum_sentence(res)
    worst = max(gaps, key=gaps.get)
    assert "add up to the head's effect in section 1" in said and "2.1, 2.2, 2.3 and 2.4" in said
    assert f"head {worst}: the cells sum to {summed[worst]:.3f}, section 1 gives {whole[worst]:.3f}" in said


def test_attribution_reports_sums_sign_and_scale_beside_the_correlation(swept):
    """The correlation alone hid that the estimate's largest difference exceeds the largest exact
    cell, that block-1 heads' summed estimates have the wrong sign, and that the right-signed ones are too
    large. Each figure of the sentence is recomputed here from the two grids."""
    res = swept
    att = res.attribution
    est, exact = att["estimate"].sum(1), res.head_positions.sum(1)
    sums = att["sums"].set_index("label")
    for i, lab in enumerate(res.head_rows):
        assert sums.loc[lab, "estimate_sum"] == pytest.approx(est[i], abs=1e-9)
        assert sums.loc[lab, "exact_sum"] == pytest.approx(exact[i], abs=1e-9)
        assert bool(sums.loc[lab, "same_sign"]) == (np.sign(est[i]) == np.sign(exact[i]))
    assert att["max_abs_exact"] == pytest.approx(np.abs(res.head_positions).max())
    said = readings.attribution_sentence(res)
    assert (f"largest difference {att['max_abs_diff']:.3f} "
            f"(the largest exact cell is {att['max_abs_exact']:.3f})") in said
    wrong = [lab for i, lab in enumerate(res.head_rows) if np.sign(est[i]) != np.sign(exact[i])]
    for lab in wrong:
        e, x = sums.loc[lab, "estimate_sum"], sums.loc[lab, "exact_sum"]
        assert f"{lab} ({e:+.3f} against an exact {x:+.3f})" in said
    # DESIGN.md: on the shipped file 1.2's and 1.4's summed estimates have the wrong sign, every block-2 head's is
    # too large (1.16 to 1.30 times)
    assert wrong == ["1.2", "1.4"]
    assert [round(float(sums.loc[h, c]), 3) for h in wrong for c in ("estimate_sum", "exact_sum")] == [
        0.094, -0.085, 0.210, -0.194]
    scale = sums.loc[["2.1", "2.2", "2.3", "2.4"], "scale"]
    assert (round(scale.min(), 2), round(scale.max(), 2)) == (1.16, 1.30)


def test_direct_effects_are_untestable_where_the_corruption_forces_them(first_copy, resampled):
    """Under first-copy a block-1 head's output at the scored positions hardly changes, so its
    'share kept when only the direct path is noised' of 1 is forced: the page says untestable there."""
    fc, rs = first_copy.noise.set_index("label"), resampled.noise.set_index("label")
    block1, block2 = ["1.1", "1.2", "1.3", "1.4"], ["2.1", "2.2", "2.3", "2.4"]
    assert not fc.loc[block1, "direct_testable"].any() and fc.loc[block2, "direct_testable"].all()
    assert rs["direct_testable"].all()
    assert all(readings.direct_cell(fc.loc[h]) == "untestable" for h in block1)
    assert readings.direct_cell(rs.loc["1.4"]).startswith(f"{rs.loc['1.4', 'direct_effect']:.2f} [")


def test_the_checks_say_what_each_corruption_must_give(first_copy, resampled):
    """Under resample patching every head leaves each scored token's embedding corrupted, so it
    falls short of 1; the stream entering the last block is the clean run's under both."""
    assert first_copy.all_heads == pytest.approx(1, abs=1e-5) and first_copy.resid_last == pytest.approx(1, abs=1e-6)
    assert resampled.resid_last == pytest.approx(1, abs=1e-6) and resampled.all_heads < 1 - 1e-4
    said = readings.checks_sentence(resampled, "block 2")
    assert f"{resampled.all_heads:.4f}: under resample" in said and "fall a little short of 1" in said
    assert "it must be 1 too" in readings.checks_sentence(first_copy, "block 2")


def test_the_atp_star_sentence_states_the_signs_of_the_sums(swept):
    """AtP* beside plain attribution on the page; the heads named come from the summed grids."""
    res = swept
    exact = res.head_positions.sum(1)
    star = res.attribution["star"].sum(1)
    plain = res.attribution["estimate"].sum(1)
    wrong_star = [lab for i, lab in enumerate(res.head_rows) if np.sign(star[i]) != np.sign(exact[i])]
    wrong_plain = [lab for i, lab in enumerate(res.head_rows) if np.sign(plain[i]) != np.sign(exact[i])]
    said = readings.atp_star_sentence(res)
    assert f"AtP* for {readings._heads(wrong_star)}" in said
    assert f"plain attribution gets the sign wrong for {readings._heads(wrong_plain)}" in said


def test_the_metric_sentence_names_the_top_head_each_metric_finds(first_copy):
    df = first_copy.by_metric
    eff = df.pivot(index="label", columns="metric", values="patch_effect")
    assert set(df["metric"]) == {"logprob", "logit_diff", "prob"}
    m = eff["logprob"]
    assert np.allclose(m.loc[first_copy.heads["label"]].to_numpy(), first_copy.heads["patch_effect"], atol=1e-5)
    tops = {eff[c].idxmax() for c in eff.columns}
    said = readings.metric_sentence(first_copy)
    if len(tops) == 1:
        assert f"head {tops.pop()} under all three metrics" in said
    else:
        assert "The metrics disagree on the top head" in said


def test_the_circuit_as_a_whole_uses_one_reference(first_copy, resampled):
    """The page's circuit is chosen and scored with the mean over the corrupted runs (core.causal.circuit): its
    elements are those whose knockout alone clearly costs M, its F(all) is M(clean), its span is F(all) - F(none),
    and the sentence sets it beside the circuit the corrupted-run reference finds (under first-copy without the
    query path 1.4 → q, which that reference cannot see)."""
    from core.causal import check_readings

    fc, rs = first_copy.circuit, resampled.circuit
    assert fc["f_model"] == pytest.approx(first_copy.m_clean, abs=1e-5)
    assert fc["span"] == pytest.approx(fc["f_model"] - fc["f_none"])
    k = fc["knockouts"].set_index("label")
    assert set(fc["elements"]) == set(k.index[k["kept_high"] < readings.NEEDED])
    assert "1.4 → q" in fc["elements"] and "1.4 → q" not in fc["other"]["elements"]
    said = check_readings.circuit_sentence(fc, first_copy.gap, "first-copy")
    assert "only the mean reference can find 1.4 → q needed" in said and "keeps 48% of its own span" in said
    said = check_readings.circuit_sentence(rs, resampled.gap, "resample")
    assert "No block-2 head is clearly needed alone under that reference" in said
    assert "only the mean reference" not in said


def test_the_circuit_is_scored_again_on_fresh_sequences_and_minimality_says_what_it_rests_on(first_copy, shipped):
    """The circuit chosen on the page's sequences, scored again on sequences of another seed (the page's seed plus
    ui.causal_sections.FRESH_SEED): its elements are the chosen ones, F(all) is M(clean) of the fresh runs, and the
    sentence gives both shares. Minimality: an element of the circuit whose minimality is 0 or below is named with
    what knocking it out of the whole model costs, and the circuit's share of the span beside it."""
    from core.causal import check_readings, circuit, patching

    model, info = shipped
    fc = first_copy.circuit
    assert sorted(circuit.describe(e) for e in circuit.chosen(fc)) == sorted(fc["elements"])
    fresh_runs = patching.task_runs(model, info["task"], N_SEQS, 10_000, PERIOD)
    fresh = circuit.fresh_report(model, fresh_runs, circuit.chosen(fc))
    assert fresh["f_model"] == pytest.approx(fresh_runs.m_clean, abs=1e-5) and fresh["n_seqs"] == N_SEQS
    assert fresh["recovered"] != fc["recovered"]  # other sequences, another share
    said = check_readings.fresh_sentence(fc, fresh, first_copy.n_seqs)
    assert (f"Chosen and scored on the same {N_SEQS} sequences, the circuit keeps {fc['recovered']:.0%} of the span; "
            f"scored again on {N_SEQS} fresh sequences drawn with another seed, which it was not chosen on, it keeps "
            f"{fresh['recovered']:.0%}") in said
    rows = fc["rows"][fc["rows"]["element"].notna()]
    low = rows[rows["minimality"] <= 0]
    said = check_readings.minimality_sentence(fc)
    assert (said is None) == low.empty
    k = fc["knockouts"].set_index("label")
    for r in low.itertuples():
        assert (f"{r.label}: minimality {check_readings.signed(r.minimality)} nats, yet knocked out of the whole "
                f"model alone it costs {k.loc[r.label, 'lost_nats']:.2f} nats ({1 - k.loc[r.label, 'kept']:.0%} of "
                "the span)") in said
    if not low.empty:
        assert f"this one keeps {fc['recovered']:.0%} of the span" in said
        assert ("the most of all 20 elements" in said) == (k["lost_nats"].idxmax() in set(low["label"]))


def test_weight_composition_beside_path_patching(first_copy, shipped):
    """Path patching ranks 1.4 first for every block-2 head, the weights agree for none of the four on the
    shipped files (how many agree depends on the files: it is read from them, not a property of the method);
    each number is the weights' composition score and one minus the path table's effect."""
    from core.causal import composition
    from core.reading.composition import composition_matrix

    model, _ = shipped
    f = first_copy.composition.set_index(["sender", "receiver"])
    scores = composition_matrix(model, "K", 0, 1)
    k = first_copy.paths.query("path == 'k' and direction == 'noising' and receiver_head >= 0")
    for r in k.itertuples():
        row = f.loc[(r.sender, r.receiver)]
        assert row["k_score"] == pytest.approx(float(scores[r.sender_head, r.receiver_head]))
        assert row["k_lost"] == pytest.approx(1 - r.patch_effect)
    top = readings.top_senders(first_copy.composition)
    assert (top["by_patching"] == "1.4").all() and top["agree"].sum() == 0
    said = readings.composition_sentence(first_copy.composition, first_copy.gap)
    assert f"for {int(top['agree'].sum())} of {len(top)} block-2 heads" in said
    with pytest.raises(ValueError, match="two blocks"):
        from helpers import tiny_model
        composition.composition_vs_paths(tiny_model(1), first_copy.paths)


def test_the_right_token_and_the_left_out_target_under_each_corruption(shipped):
    """docs/DESIGN.md (the metric) and the page's opening: the right token is the clean one; under
    first-copy it is also the corrupted run's at every scored target, under resample only by chance (2.6% of
    them at the defaults; the old text said "every token differs"). The target t = L is left out because even
    the clean run cannot predict it (the old reason, its corrupted predecessor, does not hold under resample)."""
    model, info = shipped
    L = PERIOD
    for corruption, share in (("first-copy", 1.0), ("resample", 0.026)):
        runs = patching.task_runs(model, info["task"], N_SEQS, 0, PERIOD, corruption)
        same = (runs.clean[:, L + 1:2 * L] == runs.corrupted[:, L + 1:2 * L]).float().mean().item()
        assert same == pytest.approx(share, abs=0.001), corruption
        if corruption == "resample":
            assert (runs.corrupted[:, :2 * L] != runs.clean[:, :2 * L]).float().mean() > 0.95
    with torch.no_grad():
        guess = model(runs.clean).argmax(-1)
    assert (guess[:, L - 1] == runs.clean[:, L]).float().mean() < 0.1  # t = L: 2 of 32 right
    assert (guess[:, L:2 * L - 1] == runs.clean[:, L + 1:2 * L]).float().mean() > 0.95  # the scored targets


def test_zero_blocks_tie_exactly_under_first_copy_only():
    """docs/DESIGN.md (patch effect) and the page's zero-block note: M(clean) = M(corrupted) holds
    under first-copy only; under resample the current token changes and the two differ by 0.00038 nats."""
    model, info = read_checkpoint(ROOT / "checkpoints" / "zero-block.pt")
    first = patching.task_runs(model, info["task"], N_SEQS, 0, PERIOD)
    res = patching.task_runs(model, info["task"], N_SEQS, 0, PERIOD, "resample")
    assert first.m_clean == first.m_corrupted
    assert res.m_clean - res.m_corrupted == pytest.approx(0.00038, abs=0.00001)


def test_a_typed_texts_intervals_are_over_its_corruptions(shipped):
    """For typed text the rows are one sequence against its corruptions, so the page's intervals are
    over corruptions, not sequences (readings.interval_unit, in every interval the page shows)."""
    from core.model.symbols import encode_text

    model, _ = shipped
    res = causal.text_experiments(model, encode_text("abcdefgabcdefg", model.cfg.vocab_size), 8, 0, positions=False)
    runs = causal.typed_runs(model, encode_text("abcdefgabcdefg", model.cfg.vocab_size), 8, 0)
    assert (runs.clean == runs.clean[0]).all() and len({tuple(r.tolist()) for r in runs.corrupted}) == 8
    assert res.typed and readings.interval_unit(res) == "the 8 corruptions of your sequence"
    assert readings.interval_unit(SimpleNamespace(typed=False, n_seqs=32)) == "the 32 sequences"
