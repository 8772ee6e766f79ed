"""Head scores, detectors and attention capture on hand-made patterns: each equals its definition."""
import math

import numpy as np
import pytest
import torch

from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.reading.attention import capture, task_sequences, value_weighted
from core.reading.detectors import DETECTORS, detector_mask, detector_scores
from core.reading.heads import (
    PERIOD_SCORES,
    detector_table,
    head_score_table,
    head_scores,
    offset_mass,
    offset_profile,
    offset_table,
)
from core.reading.report import build_report

T = 24


def one_hot_pattern(target, T=T, B=1, H=1):
    """Pattern [B, H, T, T] with all of row i's mass on key target(i) (clamped into 0..i)."""
    A = torch.zeros(B, H, T, T)
    for i in range(T):
        A[..., i, min(max(target(i), 0), i)] = 1.0
    return A


def random_causal(B, H, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, H, T, T, generator=g) * 2
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)


def loop_definitions(A, periods):
    """docs/DESIGN.md's definitions written as plain loops: A [B, H, T, T] -> {name: [H] array}."""
    B, H, T, _ = A.shape
    out = {}
    for name in PERIOD_SCORES:
        vals = [[] for _ in range(H)]
        for b in range(B):
            L = int(periods[b])
            for i in range(T):
                if name == "induction_any":  # every earlier copy: keys i+1-kL >= 0, k = 1, 2, ...
                    if i >= L:
                        for h in range(H):
                            vals[h].append(sum(float(A[b, h, i, i + 1 - k * L]) for k in range(1, T)
                                               if i + 1 - k * L >= 0))
                    continue
                j = {"prev_token": i - 1 if i >= 1 else None,
                     "induction": i + 1 - L if i >= L else None,
                     "duplicate": i - L if i >= L else None,
                     "first_token": 0 if i >= 1 else None,
                     "self": i if i >= 1 else None}[name]
                if j is not None:
                    for h in range(H):
                        vals[h].append(float(A[b, h, i, j]))
        out[name] = np.array([np.mean(v) for v in vals])
    return out


def test_previous_token_pattern_scores():
    s = head_scores(one_hot_pattern(lambda i: i - 1), torch.tensor([5]))
    assert s["prev_token"].item() == pytest.approx(1.0)
    assert s["induction"].item() == pytest.approx(0.0)
    assert s["duplicate"].item() == pytest.approx(0.0)
    assert s["first_token"].item() == pytest.approx(1 / (T - 1))  # only query 1 looks at key 0
    assert s["self"].item() == 0.0  # query 0, which has nowhere else to look, does not count


def test_induction_pattern_scores():
    L = 6
    s = head_scores(one_hot_pattern(lambda i: i + 1 - L if i >= L else 0), torch.tensor([L]))
    assert s["induction"].item() == pytest.approx(1.0)
    assert s["prev_token"].item() == pytest.approx(1 / (T - 1))  # query 1 sends its mass to key 0 = i - 1
    assert s["duplicate"].item() == pytest.approx(0.0)


def test_induction_any_counts_every_earlier_copy():
    """A head that reads the token after the *oldest* copy scores 0 on the latest-copy induction score
    and 1 on induction_any; one that splits its mass between two copies scores its share on each."""
    L = 5
    oldest = one_hot_pattern(lambda i: (i + 1) % L if i >= L else 0)  # key i+1-kL with k as large as fits
    s = head_scores(oldest, torch.tensor([L]))
    assert s["induction_any"].item() == pytest.approx(1.0)
    assert s["induction"].item() == pytest.approx(sum(i + 1 - L < L for i in range(L, T)) / (T - L))
    split = torch.zeros(1, 1, T, T)
    for i in range(T):
        if i + 1 - 2 * L >= 0:
            split[0, 0, i, i + 1 - L] = split[0, 0, i, i + 1 - 2 * L] = 0.5
        else:
            split[0, 0, i, max(i + 1 - L, 0) if i >= L else i] = 1.0
    s = head_scores(split, torch.tensor([L]))
    assert s["induction_any"].item() == pytest.approx(1.0)
    assert s["induction"].item() < 1.0


def test_duplicate_first_and_self_patterns():
    L = 7
    assert head_scores(one_hot_pattern(lambda i: i - L if i >= L else i), torch.tensor([L]))["duplicate"].item() == 1.0
    sink = head_scores(one_hot_pattern(lambda i: 0), torch.tensor([L]))
    assert sink["first_token"].item() == 1.0 and sink["prev_token"].item() == pytest.approx(1 / (T - 1))
    own = head_scores(one_hot_pattern(lambda i: i), torch.tensor([L]))
    assert own["self"].item() == 1.0 and own["prev_token"].item() == 0.0


def test_scores_equal_loop_definitions_on_random_patterns():
    A = random_causal(5, 3, T)
    periods = torch.tensor([4, 5, 7, 9, 11])
    got = head_scores(A, periods)
    want = loop_definitions(A, periods)
    for name in PERIOD_SCORES:
        np.testing.assert_allclose(got[name].numpy(), want[name], rtol=1e-5, atol=1e-7)


def test_offset_profile_matches_offset_mass_and_definition():
    A = random_causal(3, 2, T, seed=1)
    prof = offset_profile(A)
    for k in (0, 1, 5, T - 1):
        np.testing.assert_allclose(prof[:, k].numpy(), offset_mass(A, k).numpy(), rtol=1e-6)
        by_hand = np.mean([[A[b, :, i, i - k].numpy() for i in range(k, T)] for b in range(3)], axis=(0, 1))
        np.testing.assert_allclose(prof[:, k].numpy(), by_hand, rtol=1e-5)
    assert offset_profile(one_hot_pattern(lambda i: i - 3))[0, 3].item() == 1.0
    tidy = offset_table([A], max_offset=4)
    assert len(tidy) == 2 * 5 and list(tidy.columns) == ["label", "layer", "head", "offset", "mass"]


def test_head_score_table_is_tidy():
    A = [random_causal(2, 3, T, seed=s) for s in (2, 3)]
    df = head_score_table(A, torch.tensor([5, 6]))
    assert len(df) == 6 and list(df["layer"]) == [0, 0, 0, 1, 1, 1] and list(df["head"]) == [0, 1, 2] * 2
    assert list(df["label"]) == ["1.1", "1.2", "1.3", "2.1", "2.2", "2.3"] and df.columns[0] == "label"
    assert df.loc[4, "induction"] == pytest.approx(head_scores(A[1], torch.tensor([5, 6]))["induction"][1].item())


# ---- token-based detectors: TransformerLens's own code transcribed independently in numpy ----

def tl_duplicate(tokens):
    tp = np.tile(tokens, (len(tokens), 1))
    eq = np.equal(tp, tp.T).astype(int)
    np.fill_diagonal(eq, 0)
    return np.tril(eq)


def tl_induction(tokens):
    dup = tl_duplicate(tokens)
    shifted = np.roll(dup, 1, axis=1)
    shifted[:, 0] = 0
    return np.tril(shifted)


def tl_previous(tokens):
    T = len(tokens)
    return np.tril(np.eye(T, k=-1))


def tl_score(A, M):
    return (A * M).sum() / A.sum()


def test_detector_masks_match_transformerlens():
    toks = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 1, 4])
    for name, ref in (("previous_token", tl_previous), ("duplicate_token", tl_duplicate), ("induction", tl_induction)):
        np.testing.assert_array_equal(detector_mask(name, toks).numpy().astype(int), ref(toks.numpy()))


def test_detector_scores_match_transformerlens_formula():
    toks = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 1, 4, 1, 5])
    A = random_causal(1, 2, len(toks), seed=4)[0]
    got = detector_scores(A, toks)
    for name, ref in (("previous_token", tl_previous), ("duplicate_token", tl_duplicate), ("induction", tl_induction)):
        for h in range(2):
            assert got[name][h].item() == pytest.approx(tl_score(A[h].numpy(), ref(toks.numpy())), rel=1e-5)


def test_batched_detectors_equal_one_sequence_at_a_time():
    toks = torch.randint(0, 5, (3, 14), generator=torch.Generator().manual_seed(5))
    A = random_causal(3, 2, 14, seed=6)
    batched = detector_scores(A, toks[:, None, :])
    for b in range(3):
        single = detector_scores(A[b], toks[b])
        for name in DETECTORS:
            assert torch.allclose(batched[name][b], single[name], atol=1e-6)


def test_detectors_on_hand_made_patterns():
    L, n = 6, 24
    toks = torch.arange(L).repeat(n // L)  # no repeats inside a period: targets are unambiguous
    prev = one_hot_pattern(lambda i: i - 1, T=n)[0, 0]
    s = detector_scores(prev, toks)
    assert s["previous_token"].item() == pytest.approx((n - 1) / n)  # row 0 has no previous token
    assert detector_scores(prev, toks, rows="target")["previous_token"].item() == pytest.approx(1.0)
    assert s["induction"].item() == pytest.approx(0.0)
    ind = one_hot_pattern(lambda i: i + 1 - L if i >= L else 0, T=n)[0, 0]
    si = detector_scores(ind, toks, rows="target")
    assert si["induction"].item() == pytest.approx(1.0) and si["duplicate_token"].item() == pytest.approx(0.0)
    assert detector_scores(ind, toks)["induction"].item() == pytest.approx((n - L) / n)
    sink = one_hot_pattern(lambda i: 0, T=n)[0, 0]
    assert detector_scores(sink, toks, exclude_current_token=True)["first_token"].item() == pytest.approx(1.0)
    assert detector_scores(one_hot_pattern(lambda i: i, T=n)[0, 0], toks)["self"].item() == 1.0
    df = detector_table([prev[None], ind[None]], toks)
    assert list(df.columns[3:]) == list(DETECTORS) and len(df) == 2


# ---- capture and the value-weighted view ----

def tiny_model(layers=2, seed=0, **kw):
    torch.manual_seed(seed)
    return TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=layers, **kw)).eval()


def test_capture_and_value_weighting_follow_their_definitions():
    model = tiny_model()
    toks = torch.randint(0, 16, (12,))
    cap = capture(model, toks)
    assert cap.tokens.shape == (1, 12) and len(cap.pattern) == 2
    for l in range(2):
        A = cap.pattern[l]
        assert torch.allclose(A.sum(-1), torch.ones(1, 2, 12)) and A.triu(1).abs().max() == 0
        # ||v_j W_O[h]|| by hand from the stream entering block l
        _, cache = model.run_with_cache(toks[None])
        blk = model.blocks[l]
        for h in range(2):
            norms = (cache["resid"][l][0] @ blk.W_V[h] @ blk.W_O[h]).norm(dim=-1)
            assert torch.allclose(cap.write_norm[l][0, h], norms, atol=1e-5)
            raw = A[0, h] * norms[None, :]
            assert torch.allclose(cap.weighted(l, normalize=False)[0, h], raw, atol=1e-5)
            assert torch.allclose(cap.view(l, weighted=True)[0, h], raw / raw.sum(-1, keepdim=True), atol=1e-5)
    # a position that writes nothing disappears from the value-weighted view
    A = torch.full((1, 3, 3), 1 / 3).tril()
    w = value_weighted(A, torch.tensor([[0.0, 1.0, 1.0]]))
    assert w[0, 2, 0] == 0 and w[0, 2, 1] == pytest.approx(0.5)


def test_task_sequences_are_reproducible():
    task = TaskConfig()
    a, pa = task_sequences(task, 64, 4, period=20, seed=3)
    b, _ = task_sequences(task, 64, 4, period=20, seed=3)
    assert torch.equal(a, b) and (pa == 20).all() and torch.equal(a[:, 20:40], a[:, :20])


def test_report_fills_every_head_column():
    model = tiny_model()
    rep = build_report(model, TaskConfig(period_min=4, period_max=6, seq_len=16), offsets=[3], n_seqs=8)
    assert len(rep["heads"]) == 4 and rep["eval"]["ablation_mode"] == "zero"
    for row in rep["heads"]:
        for key in (*PERIOD_SCORES, "ov_diag_top1", "ov_copying_eig", "ablation_loss_later_delta"):
            assert row[key] is not None and math.isfinite(row[key])
    assert {r["offset"] for r in rep["offset_mass"]} == {3}
