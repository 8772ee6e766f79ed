"""Path expansion (core/reading/paths.py): exact with the patterns fixed, for 0, 1 and 2 blocks, with and
without biases; the zero-block Gram form; score terms; weight-read skip-trigrams; composition."""
import math

import pytest
import torch

from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.reading.bigrams import bigram_counts, gram_logits, mutual_information, zero_block_summary
from core.reading.circuits import qk_content, skip_trigrams
from core.reading.composition import composition_baseline, composition_matrix
from core.reading.paths import logit_contributions, mean_target_contributions, path_terms
from core.reading.score_groups import GROUPS, score_groups
from core.reading.score_terms import induction_margins, mean_induction_score_terms, score_terms, target_margin
from ui.model_keys import shipped_key

from helpers import SHIPPED, open_app, random_tokens, tiny_model

TASK = TaskConfig(period_min=4, period_max=6, seq_len=14)


@pytest.mark.parametrize("n_layers", [0, 1, 2])
@pytest.mark.parametrize("bias", [False, True])
def test_paths_sum_to_logits(n_layers, bias):
    model = tiny_model(n_layers, bias=bias, seed=n_layers, dtype=torch.float64)
    tokens = random_tokens(3, 20, seed=1)
    logits, cache = model.run_with_cache(tokens)
    pt = path_terms(model, tokens, cache)
    H = model.cfg.n_heads
    # direct, H per block, H*H composed pairs for two blocks (bias paths extra)
    n_plain = {0: 1, 1: 1 + H, 2: 1 + 2 * H + H * H}[n_layers]
    assert sum(k != "bias" for k in pt.kinds) == n_plain
    assert (sum(k == "bias" for k in pt.kinds) > 0) == (bias and n_layers > 0)
    assert len(set(pt.labels)) == len(pt.labels)
    summed = pt.logits(model.W_E).sum(0)
    assert torch.allclose(summed, logits, atol=1e-10, rtol=0)
    assert torch.allclose(summed, model(tokens), atol=1e-9, rtol=0)  # the fused forward too
    if n_layers:  # the non-direct paths matter: dropping them changes the logits
        assert (pt.logits(model.W_E)[0] - logits).abs().max() > 1e-2


def test_paths_exact_in_float32():
    model = tiny_model(2, bias=True, seed=3)
    tokens = random_tokens(2, 24, seed=2)
    logits, cache = model.run_with_cache(tokens)
    summed = path_terms(model, tokens, cache).logits(model.W_E).sum(0)
    assert (summed - logits).abs().max() <= 1e-5 * logits.abs().max()


def test_paths_use_the_given_patterns():
    """Held-fixed means held fixed: patterns from other tokens give other (wrong) logits."""
    model = tiny_model(1, seed=4, dtype=torch.float64)
    tokens, other = random_tokens(1, 20, seed=5), random_tokens(1, 20, seed=6)
    logits, _ = model.run_with_cache(tokens)
    _, other_cache = model.run_with_cache(other)
    wrong = path_terms(model, tokens, other_cache).logits(model.W_E).sum(0)
    assert (wrong - logits).abs().max() > 1e-3


def test_zero_block_logits_are_the_gram_form():
    model = tiny_model(0, seed=7)
    tokens = random_tokens(4, 30, seed=3)
    gram = gram_logits(model)
    assert torch.equal(model(tokens), model.W_E[tokens] @ model.W_E.T)
    assert torch.allclose(model(tokens), gram[tokens], atol=1e-5)
    assert torch.allclose(gram, gram.T)
    assert torch.linalg.eigvalsh(gram.double()).min() > -1e-4  # positive semidefinite
    summary = zero_block_summary(model, TASK, n_seqs=64)
    assert summary["gram_max_error"] < 1e-5
    assert torch.allclose(summary["model_probs"].sum(-1), torch.ones(16), atol=1e-5)


def test_gram_check_fails_for_a_model_with_blocks():
    """The Gram form is the whole story only at zero blocks."""
    model = tiny_model(1, seed=8)
    tokens = random_tokens(2, 20, seed=4)
    assert (model(tokens) - gram_logits(model)[tokens]).abs().max() > 1e-2


def test_task_bigrams_carry_almost_no_information():
    counts = bigram_counts(TASK, 16, n_seqs=2000, seed=0)
    assert 2000 * TASK.period_min <= counts.sum() <= 2000 * TASK.period_max  # one period per sequence
    mi = mutual_information(counts)
    bias = (16 - 1) ** 2 / (2 * float(counts.sum()))
    assert mi < 3 * bias  # what independence leaves in a plug-in estimate
    dependent = torch.eye(16) * 100 + 1  # next token mostly equals the current one
    assert mutual_information(dependent) > 1.0


def test_logit_contributions_sum_to_the_model_logit():
    model = tiny_model(2, bias=True, seed=9, dtype=torch.float64)
    tokens = random_tokens(1, 18, seed=7)[0]
    c = logit_contributions(model, tokens, pos=11, token=5)
    assert math.isclose(sum(c["values"]), c["total"], abs_tol=1e-9)
    raw = logit_contributions(model, tokens, pos=11, token=5, centered=False)
    assert math.isclose(raw["total"], float(model(tokens[None])[0, 11, 5].detach()), abs_tol=1e-9)


def test_mean_target_contributions_sum_to_mean_logit():
    model = tiny_model(2, seed=10, dtype=torch.float64)
    out = mean_target_contributions(model, TASK, n_seqs=20, seed=1, chunk=8)
    assert out["n"] > 0 and len(out["values"]) == 25
    assert math.isclose(sum(out["values"]), out["total"], abs_tol=1e-8)


@pytest.mark.parametrize("bias", [False, True])
def test_score_terms_sum_to_scores_and_give_the_pattern(bias):
    model = tiny_model(2, bias=bias, seed=11, dtype=torch.float64)
    tokens = random_tokens(1, 16, seed=8)
    _, cache = model.run_with_cache(tokens)
    for layer in (0, 1):
        st = score_terms(model, tokens[0], layer, 2, cache)
        assert torch.allclose(st["terms"].sum((0, 1)), st["scores"], atol=1e-10)
        masked = st["scores"].masked_fill(~torch.ones(16, 16, dtype=torch.bool).tril(), float("-inf"))
        assert torch.allclose(masked.softmax(-1), cache["pattern"][layer][0, 2], atol=1e-10)
        # direct (+ the block-1 heads, their b_V paths and b_O) + b_Q
        assert len(st["q_labels"]) == (1 if layer == 0 else 1 + 4 + (5 if bias else 0)) + bias
    m = target_margin(st["terms"], 9, 3)
    row = st["scores"][9, :10]
    assert math.isclose(float(m.sum()), float(row[3] - torch.cat([row[:3], row[4:]]).mean()), abs_tol=1e-10)


def _copying_model(perm: torch.Tensor) -> TinyCharLM:
    """One head that copies (OV = identity on tokens) and whose query for token b matches the key
    of token perm[b] only: its strongest skip-trigrams are [perm[b]] ... [b] -> [perm[b]]."""
    V, D = 8, 32
    model = TinyCharLM(ModelConfig(vocab_size=V, d_model=D, n_heads=2, n_layers=1)).eval()
    E = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(0)))[0][:V]  # orthonormal rows
    with torch.no_grad():
        model.W_E.copy_(E)
        b = model.blocks[0]
        for W in (b.W_Q, b.W_K, b.W_V, b.W_O):
            W.zero_()
        b.W_V[0, :, :V] = E.T
        b.W_O[0, :V, :] = E
        b.W_Q[0, :, :V] = E.T * 3
        b.W_K[0, :, :V] = E[perm].T * 3  # k_a is 3 at coordinate c where perm[c] = a
    return model


def test_skip_trigrams_read_from_weights():
    perm = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])
    model = _copying_model(perm)
    qk = qk_content(model, 0, 0)  # [dest b, source a] = 9/sqrt(dh) [a == perm[b]]
    src_for = {b: int(perm[b]) for b in range(8)}
    assert all(int(qk[b].argmax()) == src_for[b] for b in range(8))
    rows = skip_trigrams(model, 0, 0, k=8)
    assert len(rows) == 8
    for r in rows:
        assert r["source"] == src_for[r["dest"]]
        assert r["boosted"] == r["source"]  # a copying head boosts what it reads
        assert r["qk_margin"] > 0 and r["ov_logit"] > 0


def test_composition_matrix_finds_a_planted_k_composition():
    model = tiny_model(2, seed=12)
    base = composition_baseline(model.cfg.d_model, model.cfg.d_head)["K"]
    with torch.no_grad():  # make head 2.3's keys read exactly what head 1.2 writes
        b0, b1 = model.blocks
        _, _, Vh = torch.linalg.svd(b0.W_V[1] @ b0.W_O[1])
        b1.W_K[2] = Vh[:model.cfg.d_head].T
        b1.W_Q[2] = Vh[:model.cfg.d_head].T
    k = composition_matrix(model, "K")
    assert k.shape == (4, 4)
    assert k[1, 2] == k.max() and k[1, 2] > 1.5 * base  # 1/sqrt(d_head) here, the most a projection allows
    assert not torch.equal(composition_matrix(model, "V"), k)
    with pytest.raises(ValueError):
        composition_matrix(model, "X")


def test_induction_margins_match_the_one_query_margin_and_add_up():
    model = tiny_model(2, seed=13, dtype=torch.float64)
    tokens = random_tokens(1, 16, seed=9)
    st = score_terms(model, tokens[0], 1, 0)
    fast = induction_margins(st["terms"], 5)
    slow = torch.stack([target_margin(st["terms"], i, i + 1 - 5) for i in range(5, 16)], -1)
    assert torch.allclose(fast, slow, atol=1e-12)
    out = mean_induction_score_terms(model, TASK, 1, 0, n_seqs=4)
    assert out["n"] > 0 and math.isclose(float(out["terms"].sum()), out["total"], abs_tol=1e-9)


# ---------------------------------------------------------------------------------------------
# The page, through AppTest, with every shipped checkpoint

@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_depth_page_with_every_shipped_checkpoint(file):
    at = open_app("app_pages/depth.py", file)
    n_blocks = {"zero-block.pt": 0, "variable-period-2block.pt": 2}.get(file, 1)
    infos = " ".join(i.value for i in at.info)
    metrics = {m.label: m.value for m in at.metric}
    if n_blocks == 0:
        assert float(metrics["max |logits − Gram rows|"]) < 1e-4  # exactly the Gram form
        assert "no heads" in infos
    else:
        assert "Pick **zero-block**" in infos
        total = float(metrics[next(k for k in metrics if k.startswith("model's centered logit"))])
        assert math.isclose(float(metrics["sum of the path bars"]), total, abs_tol=2e-3)
    assert ("no composition" in infos) == (n_blocks < 2)
    if n_blocks == 2:
        assert at.selectbox(key="depth_head_4").value is not None


def test_batched_score_terms_match_single_sequences_and_groups_add_up():
    model = tiny_model(2, bias=True, seed=14, dtype=torch.float64)
    tokens = random_tokens(3, 12, seed=10)
    batched = score_terms(model, tokens, 1, 3)
    for b in range(3):
        single = score_terms(model, tokens[b], 1, 3)
        assert torch.allclose(batched["terms"][:, :, b], single["terms"], atol=1e-12)
    out = mean_induction_score_terms(model, TASK, 1, 3, n_seqs=3)
    for roles in (None, {"1.1": "self", "1.2": "previous", "1.3": "other", "1.4": "previous"}):
        groups = score_groups(out, roles)
        assert math.isclose(sum(groups.values()), out["total"], abs_tol=1e-9)
        assert groups["rest"] != 0  # the bias terms land there
    by_hand = sum(float(out["terms"][out["q_labels"].index("1.1"), out["k_labels"].index(k)]) for k in ("1.2", "1.4"))
    assert math.isclose(groups[GROUPS[2]], by_hand, abs_tol=1e-9)


@pytest.mark.app
def test_depth_page_survives_switching_models_with_widgets_set():
    at = open_app("app_pages/depth.py", "variable-period-2block.pt")
    at.selectbox(key="depth_block_2").set_value(1).run()
    at.slider(key="depth_pos_96").set_value(94).run()
    at.radio(key="depth_which").set_value("top").run()
    assert not at.exception
    for file in ("variable-period-1block.pt", "zero-block.pt", "variable-period-2block.pt"):
        at.session_state["picked_model"] = shipped_key(file)  # AppTest drops the sidebar after switch_page
        at.run()
        assert not at.exception, (file, [e.value for e in at.exception])
        infos = " ".join(i.value for i in at.info)
        assert ("no composition" in infos) == (file != "variable-period-2block.pt")
        assert any(m.label.startswith("max |logits") for m in at.metric) == (file == "zero-block.pt")
