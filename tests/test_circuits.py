"""Circuits on hand-built weights with known answers, and on the shipped 2-block checkpoint."""
import math

import pytest
import torch

from core.model.checkpoints import read_checkpoint
from core.model.config import ModelConfig
from core.model.rope import apply_rope, rope_cos_sin
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.reading.circuits import head_qk_vectors, ov_circuit, qk_circuit, rotary_profile
from core.reading.composition import composition_baseline, composition_table
from core.reading.copying import (
    copying_scores,
    effective_embedding,
    ov_copying_eig,
    ov_copying_matrix,
    ov_copying_table,
    ov_diag_top1,
    ov_diag_topk,
)
from core.reading.probes import period_probe, period_sweep

from helpers import shipped as shipped_path
from helpers import tiny_model


def orthonormal_embedding(V, D, seed=0):
    Q, _ = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(seed)))
    return Q[:V].clone()  # [V, D], orthonormal rows


def copying_model(sign=1.0):
    """1 block, V=16 <= d_head=32: head 0's W_V W_O is the identity on the embeddings' span."""
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=64, n_heads=2, n_layers=1)).eval()
    with torch.no_grad():
        E = orthonormal_embedding(16, 64)
        model.W_E.copy_(E)
        P = torch.eye(16, 32)  # [V, d_head]
        model.blocks[0].W_V[0] = E.T @ P
        model.blocks[0].W_O[0] = sign * P.T @ E
    return model


def test_identity_ov_head_copies_perfectly():
    model = copying_model()
    C = ov_copying_matrix(model, 0, 0)
    assert torch.allclose(C, torch.eye(16), atol=1e-5)
    assert ov_diag_top1(C) == 1.0 and ov_copying_eig(C) == pytest.approx(1.0, abs=1e-6)
    anti = ov_copying_matrix(copying_model(-1.0), 0, 0)
    assert ov_diag_top1(anti) == 0.0 and ov_copying_eig(anti) == pytest.approx(-1.0, abs=1e-6)


def test_copying_scores_on_known_matrices():
    V = 10
    perm = torch.eye(V)[torch.roll(torch.arange(V), 1)]  # moves every token to another: no copying
    assert ov_diag_top1(perm - torch.eye(V)) == 0.0 and ov_diag_topk(perm - torch.eye(V), 5) == 0.0
    near = perm * 2 + torch.eye(V)  # diagonal second-largest in every row
    assert ov_diag_top1(near) == 0.0 and ov_diag_topk(near, 2) == 1.0
    half = torch.eye(V)
    half[: V // 2] = -torch.eye(V)[: V // 2] + 0.1 * perm[: V // 2]
    assert ov_diag_top1(half) == 0.5
    s = copying_scores(torch.eye(V))
    assert s == {"ov_diag_top1": 1.0, "ov_diag_top5": 1.0, "ov_copying_eig": pytest.approx(1.0)}


def test_ov_table_has_heads_and_block_sums():
    model = tiny_model(2)
    df = ov_copying_table(model)
    assert len(df) == 2 * (4 + 1)
    block_sum = ov_copying_matrix(model, 1, None)
    by_hand = sum(ov_copying_matrix(model, 1, h) for h in range(4))
    assert torch.allclose(block_sum, by_hand, atol=1e-4)
    row = df[(df.layer == 1) & (df["head"] == "all")].iloc[0]
    assert row.ov_diag_top1 == ov_diag_top1(by_hand)


def test_factored_circuits_rank_and_singular_values():
    model = tiny_model(2)  # d_model 32, d_head 8
    for f, dense in ((qk_circuit(model, 1, 2), (model.blocks[1].W_Q[2] @ model.blocks[1].W_K[2].T).detach()),
                     (ov_circuit(model, 0, 3), (model.blocks[0].W_V[3] @ model.blocks[0].W_O[3]).detach())):
        assert f.shape == (32, 32) and torch.allclose(f.AB, dense, atol=1e-5)
        assert f.rank() == 8 == torch.linalg.matrix_rank(dense)
        full = torch.linalg.svdvals(dense.double())
        assert torch.allclose(f.svals(full=True).double(), full, atol=1e-4)
        assert f.svals(full=True)[8:].abs().max() == 0
        assert float(f.norm()) == pytest.approx(float(dense.norm()), rel=1e-5)
    assert torch.allclose((qk_circuit(model, 0, 0) @ torch.eye(32)).AB, qk_circuit(model, 0, 0).AB)


def test_composition_scores_follow_elhage_conventions():
    model = tiny_model(2)
    df = composition_table(model)
    assert len(df) == 3 * 4 * 4 and set(df.kind) == {"Q", "K", "V"}
    b0, b1 = model.blocks
    # Elhage et al. write column vectors: W_OV^col = (W_V W_O)^T, W_QK^col = W_Q W_K^T
    for a, b in ((0, 0), (2, 3)):
        ov_w = (b0.W_V[a] @ b0.W_O[a]).T
        qk_r = b1.W_Q[b] @ b1.W_K[b].T
        ov_r = (b1.W_V[b] @ b1.W_O[b]).T
        fro = torch.linalg.matrix_norm
        want = {"Q": fro(qk_r.T @ ov_w) / (fro(qk_r) * fro(ov_w)),
                "K": fro(qk_r @ ov_w) / (fro(qk_r) * fro(ov_w)),
                "V": fro(ov_r @ ov_w) / (fro(ov_r) * fro(ov_w))}
        for kind, value in want.items():
            got = df[(df.kind == kind) & (df.writer_head == a) & (df.reader_head == b)].score.item()
            assert got == pytest.approx(float(value.detach()), rel=1e-4)


def test_composition_reads_the_right_side():
    """A writer whose output lands only where the reader's queries read: Q-composition 1 (after
    normalisation high), K-composition 0; swap the reader's W_Q and W_K and the two swap."""
    model = TinyCharLM(ModelConfig(vocab_size=8, d_model=16, n_heads=2, n_layers=2)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        I = torch.eye(16)
        model.blocks[0].W_V[0] = I[:, :8]
        model.blocks[0].W_O[0] = I[:8]  # writes into coordinates 0..7
        model.blocks[1].W_Q[0] = I[:, :8]  # reader's queries read 0..7
        model.blocks[1].W_K[0] = I[:, 8:]  # its keys read 8..15
    df = composition_table(model).set_index(["kind", "writer_head", "reader_head"]).score
    assert df[("Q", 0, 0)] > 0.3 and df[("K", 0, 0)] == 0.0
    with torch.no_grad():
        W_Q = model.blocks[1].W_Q.clone()
        model.blocks[1].W_Q.copy_(model.blocks[1].W_K)
        model.blocks[1].W_K.copy_(W_Q)
    df = composition_table(model).set_index(["kind", "writer_head", "reader_head"]).score
    assert df[("K", 0, 0)] > 0.3 and df[("Q", 0, 0)] == 0.0


def test_random_baseline_matches_random_models():
    base = composition_baseline(32, 8, n_draws=400)
    assert set(base) == {"Q", "K", "V"}
    scores = []
    for seed in range(12):
        torch.manual_seed(seed)
        m = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=2))
        scores.append(composition_table(m).groupby("kind").score.mean())
    mean = sum(scores) / len(scores)
    for kind in "QKV":
        assert mean[kind] == pytest.approx(base[kind], rel=0.08)
    assert 0 < base["Q"] < 1 and composition_table(tiny_model(1)).empty


# ---------------------------------------------------------------------------------------------
# The fixed-offset shortcut, built by hand: a content-free query from the biases


def offset_31_model():
    """1 block with biases; every head: W_Q = W_K = 0, b_K = R_31 b_Q so the score peaks at offset 31;
    the four heads' W_V W_O add up to 10 x the identity, so the block copies the token 31 back."""
    V, D, H = 64, 128, 4
    model = TinyCharLM(ModelConfig(vocab_size=V, d_model=D, n_heads=H, n_layers=1, bias=True)).eval()
    dh = model.d_head
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.W_E.copy_(orthonormal_embedding(V, D))
        blk = model.blocks[0]
        q = torch.full((dh,), 10.0 / math.sqrt(2))
        cos, sin = rope_cos_sin(32, dh, model.cfg.rope_base)
        k = apply_rope(q.expand(32, dh), cos, sin)[31]
        I = torch.eye(D)
        for h in range(H):
            blk.b_Q[h], blk.b_K[h] = q, k
            blk.W_V[h] = I[:, h * dh:(h + 1) * dh]
            blk.W_O[h] = 10.0 * I[h * dh:(h + 1) * dh]
    return model


def test_constant_query_head_peaks_at_31_and_solves_only_period_32():
    model = offset_31_model()
    task = TaskConfig(period_min=32, period_max=32, seq_len=96)
    q, k = head_qk_vectors(model, 0, 0, source="bias")
    profile = rotary_profile(q, k, 96, model.cfg.rope_base)
    assert int(profile.argmax()) == 31
    # the profile is the score the model itself gives: pattern row i = softmax of profile[i - j]
    pattern = model.run_with_cache(torch.randint(0, 64, (1, 96)))[1]["pattern"][0][0, 0]
    i = 80
    assert torch.allclose(pattern[i, : i + 1], profile[: i + 1].flip(0).softmax(0), atol=1e-5)
    at32 = period_probe(model, task, 32, offsets=[31], n_seqs=32)
    at24 = period_probe(model, task, 24, offsets=[31], n_seqs=32)
    assert at32["metrics"]["acc_second_copy"] > 0.98 and at32["metrics"]["loss_second_copy"] < 0.05
    assert at24["metrics"]["acc_second_copy"] < 0.1 and at24["metrics"]["loss_later_copies"] > 3
    m24 = at24["offset_mass"].set_index(["head", "offset"]).mass
    assert m24[(0, 31)] > 0.95 and m24[(0, 23)] < 0.01
    sweep = period_sweep(model, task, periods=[24, 32], n_seqs=16).set_index("period")
    assert sweep.loc[32, "acc_later_copies"] > 0.98 and sweep.loc[32, "trained"] and not sweep.loc[24, "trained"]
    with pytest.raises(ValueError, match="between"):
        period_probe(model, task, 60)


def test_mean_query_profile_and_bias_needs_biases():
    model = tiny_model(1)
    with pytest.raises(ValueError, match="no biases"):
        head_qk_vectors(model, 0, 0, source="bias")
    resid = model.W_E[torch.randint(0, 16, (3, 10))]
    q, k = head_qk_vectors(model, 0, 1, resid=resid)
    assert torch.allclose(q, resid.reshape(-1, 32).mean(0) @ model.blocks[0].W_Q[1], atol=1e-5)


# ---------------------------------------------------------------------------------------------
# The shipped checkpoint


@pytest.fixture(scope="module")
def shipped():
    return read_checkpoint(shipped_path())


def test_shipped_block2_copies(shipped):
    """Block 2's summed OV circuit copies: on the effective embedding (what block 1 makes of each token)
    every row's top logit is the attended token; on raw W_E it is still far above chance 1/V."""
    model, _ = shipped
    df = ov_copying_table(model)
    block2 = df[(df.layer == 1) & (df["head"] == "all")].iloc[0]
    assert block2.ov_diag_top1_effective >= 0.9, block2
    assert block2.ov_diag_top1 > 10 / model.cfg.vocab_size, block2


def test_effective_embedding_is_the_stream_after_self_attending_heads():
    """Block 1 reads W_E itself; block 2 reads W_E plus what every block-1 head writes when it attends
    to the token's own position (checked against a forward pass on a one-token sequence, where every
    head can only attend to itself), biases included."""
    torch.manual_seed(0)
    for bias in (False, True):
        model = TinyCharLM(ModelConfig(vocab_size=12, d_model=16, n_heads=2, n_layers=3, bias=bias))
        if bias:
            with torch.no_grad():
                for p in model.parameters():
                    if p.dim() <= 2 and p is not model.W_E:
                        p.normal_(0, 0.3)
        assert torch.equal(effective_embedding(model, 0), model.W_E.detach())
        with torch.no_grad():
            _, cache = model.run_with_cache(torch.arange(12)[:, None])  # 12 one-token sequences
        for layer in (1, 2):
            assert torch.allclose(effective_embedding(model, layer), cache["resid"][layer][:, 0], atol=1e-5)
        C = ov_copying_matrix(model, 2, None, effective=True)
        ov = sum(model.blocks[2].W_V[h] @ model.blocks[2].W_O[h] for h in range(2))
        assert torch.allclose(C, effective_embedding(model, 2) @ ov @ model.W_E.T, atol=1e-5)


def test_centred_eigen_score_ignores_row_and_column_constant_terms():
    """ov_copying_eig scores C (I - 11^T/V): adding a constant to a row (a shift the softmax ignores)
    or a column-constant term 1 u^T (logit b boosted whatever is attended) leaves it unchanged, while
    the uncentred score moves; a row shift leaves the diagonal scores unchanged too."""
    g = torch.Generator().manual_seed(0)
    V = 12
    C = torch.eye(V) * 2 + 0.3 * torch.randn(V, V, generator=g)
    row_shift = C - 1.0 + 0.5 * torch.randn(V, 1, generator=g)  # a constant per row
    col_shift = C + torch.ones(V, 1) * torch.randn(1, V, generator=g)  # 1 u^T
    base = ov_copying_eig(C)
    for other in (row_shift, col_shift):
        assert ov_copying_eig(other) == pytest.approx(base, abs=1e-6)
    assert abs(ov_copying_eig(row_shift, centred=False) - ov_copying_eig(C, centred=False)) > 0.05
    assert ov_diag_top1(row_shift) == ov_diag_top1(C)
    # a pure shared direction: C = 1 u^T + I has uncentred score dominated by the rank-one part
    shared = torch.eye(V) * 0.1 + 10.0 * torch.ones(V, V)
    assert ov_copying_eig(shared) == pytest.approx(1.0) and ov_copying_eig(shared, centred=False) == pytest.approx(1.0)
    anti_shared = -torch.eye(V) * 0.1 + 10.0 * torch.ones(V, V)
    assert ov_copying_eig(anti_shared) == pytest.approx(-1.0) and ov_copying_eig(anti_shared, centred=False) > 0.9


def test_effective_embedding_weights_heads_by_self_attention():
    """With measured self-attention s[l][h], each earlier head adds s * (X W_V W_O): a naive loop over
    heads agrees; s = 0 everywhere leaves W_E (plus biases), s = 1 is the unweighted form."""
    torch.manual_seed(1)
    model = TinyCharLM(ModelConfig(vocab_size=10, d_model=24, n_heads=3, n_layers=3))
    s = [[0.2, 0.0, 0.9], [1.0, 0.5, 0.1]]
    X = model.W_E.detach().clone()
    for l in range(2):
        b = model.blocks[l]
        X = X + sum(s[l][h] * (X @ b.W_V[h].detach() @ b.W_O[h].detach()) for h in range(3))
    assert torch.allclose(effective_embedding(model, 2, s), X, atol=1e-5)
    assert torch.allclose(effective_embedding(model, 2, [[0.0] * 3] * 2), model.W_E.detach())
    assert torch.allclose(effective_embedding(model, 2, [[1.0] * 3] * 2), effective_embedding(model, 2), atol=1e-6)
