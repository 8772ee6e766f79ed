"""core.causal.circuit: the circuit as a whole (Wang et al., 2022) against independent hook_z ablations (to the
mean over the corrupted runs, or to each sequence's own corrupted run) on a tiny model, the whole model and the
empty circuit, bad inputs, and planted models whose circuit is known by construction: the choice, the score,
completeness and minimality, with one reference for both."""
import pytest
import torch

from core.causal import circuit, patching
from core.causal.corruptions import corrupt
from core.model.hooks import hook_name

from helpers import tiny_model


def _runs(model, L=5, B=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, model.cfg.vocab_size, (B, L), generator=g).repeat(1, 2)
    periods = torch.full((B,), L)
    return patching.prepare(model, clean, corrupt(clean, periods, model.cfg.vocab_size, g), periods)


def _mean_z(model, runs, ablate: dict[int, list[int]], own: bool = False) -> float:
    """M on the clean run with the heads ablate {layer: [heads]} given their mean z over the corrupted runs
    (z W_O is linear, so this is the mean output), or with own=True each sequence's own corrupted z: an edit of
    hook_z, not of hook_result."""
    names = [hook_name(l, "attn.hook_z") for l in ablate]
    _, zc = model.run_with_hooks(runs.corrupted, cache=names)
    edits = {}
    for l, heads in ablate.items():
        z_ref = zc[hook_name(l, "attn.hook_z")]
        mean = z_ref if own else z_ref.mean(0, keepdim=True)

        def edit(z, mean=mean, heads=heads):
            z = z.clone()
            z[:, heads] = mean[:, heads].expand(z.shape[0], -1, -1, -1).to(z.dtype)
            return z
        edits[hook_name(l, "attn.hook_z")] = edit
    with torch.no_grad():
        logits, _ = model.run_with_hooks(runs.clean, edits=edits)
    return float(patching.metric(logits, runs.clean, runs.periods))


def test_whole_model_empty_circuit_and_one_knocked_out_head_match_independent_ablations():
    model = tiny_model(2)
    runs = _runs(model)
    every = circuit.elements(model)
    assert circuit.faithfulness(model, runs, every) == pytest.approx(runs.m_clean, rel=1e-5)
    H = model.cfg.n_heads
    assert circuit.faithfulness(model, runs, frozenset()) == pytest.approx(
        _mean_z(model, runs, {0: list(range(H)), 1: list(range(H))}), rel=1e-5)
    assert circuit.faithfulness(model, runs, every - {("head", 2)}) == pytest.approx(
        _mean_z(model, runs, {1: [2]}), rel=1e-5)
    # a block-1 head ablated everywhere = all its paths and its direct path gone
    gone = {("path", 1, p) for p in "qkv"} | {("direct", 1)}
    assert circuit.faithfulness(model, runs, every - gone) == pytest.approx(_mean_z(model, runs, {0: [1]}), rel=1e-5)
    # the other reference: each sequence's own corrupted run (everything ablated = the corrupted run itself)
    assert circuit.faithfulness(model, runs, frozenset(), "corrupted") == pytest.approx(runs.m_corrupted, rel=1e-5)
    assert circuit.faithfulness(model, runs, every - gone, "corrupted") == pytest.approx(
        _mean_z(model, runs, {0: [1]}, own=True), rel=1e-5)
    assert circuit.faithfulness(model, runs, every - {("head", 2)}, "corrupted") == pytest.approx(
        _mean_z(model, runs, {1: [2]}, own=True), rel=1e-5)


def test_the_report_recovers_all_of_the_whole_model_and_measures_each_element():
    model = tiny_model(2, seed=1)
    runs = _runs(model, seed=1)
    rep = circuit.circuit_report(model, runs, circuit.elements(model))
    assert rep["recovered"] == pytest.approx(1, abs=1e-5)
    assert (rep["rows"]["completeness"] < 1e-4).all()  # the circuit is the model: no knockout tells them apart
    small = frozenset({("head", 0), ("path", 0, "k")})
    rep = circuit.circuit_report(model, runs, small)
    assert len(rep["rows"]) == 3 and set(rep["rows"]["label"]) == {"2.1", "1.1 → k", "the whole circuit"}
    assert rep["rows"].iloc[-1]["minimality"] == pytest.approx(rep["f_circuit"] - rep["f_none"])
    # nats beside shares of the span F(all) - F(none)
    assert rep["span"] == pytest.approx(rep["f_model"] - rep["f_none"])
    assert (rep["rows"]["minimality_share"] * rep["span"]).to_numpy() == pytest.approx(
        rep["rows"]["minimality"].to_numpy())
    by_seq = circuit.faithfulness_by_seq(model, runs, small)
    assert (by_seq * runs.weights).sum() / runs.weights.sum() == pytest.approx(rep["f_circuit"], rel=1e-6)


def test_bad_inputs_are_refused():
    one = tiny_model(1)
    with pytest.raises(ValueError, match="2-block"):
        circuit.faithfulness(one, _runs(one), frozenset())
    model = tiny_model(2)
    with pytest.raises(ValueError, match="Not elements"):
        circuit.faithfulness(model, _runs(model), {("path", 0, "x")})
    with pytest.raises(ValueError, match="reference must be"):
        circuit.faithfulness(model, _runs(model), frozenset(), "median")


def test_the_planted_circuit_is_complete_and_each_element_is_needed():
    """The planted induction model (exercises/planted.py), where the answer is known: the previous-token head
    1.1's key path into block 2 and the induction head 2.2 are the whole circuit (every other head writes
    nothing, and 1.1 writes into dims 2.2's query and value do not read), so that circuit keeps all of M with
    completeness 0, and without either element it keeps nothing."""
    from exercises.planted import INDUCTION, PREV, TASK, planted_induction_model

    model = planted_induction_model()
    runs = patching.task_runs(model, TASK, 16, 0)
    key, head = ("path", PREV[1], "k"), ("head", INDUCTION[1])
    rep = circuit.circuit_report(model, runs, frozenset({key, head}))
    assert rep["recovered"] == pytest.approx(1, abs=1e-5) and (rep["rows"]["completeness"] < 1e-5).all()
    assert (rep["rows"]["minimality"] > 1).all()  # nats: each element is needed
    for alone in (key, head):
        assert circuit.circuit_report(model, runs, frozenset({alone}))["recovered"] < 0.05
    wrong = frozenset({head, ("path", PREV[1], "q"), ("path", PREV[1], "v")})  # the paths 2.2 does not read
    assert circuit.circuit_report(model, runs, wrong)["recovered"] < 0.05


def _query_planted():
    """The planted induction model with one more part: head 1.2 attends to its own position and copies the
    current token into dims 48..63, and 2.2's query reads the token there instead of from the embedding. So
    2.2 needs 1.2 → q besides 1.1 → k; nothing else matters. Under first-copy corruption 1.2's output at every
    second-copy position is the same in both runs (its own token, unchanged), so a sequence's own corrupted run
    cannot see that query path at all; the mean over the corrupted runs can."""
    from exercises.planted import INDUCTION, SHARED, V, planted_induction_model

    model = planted_induction_model()
    b0, b1 = model.blocks
    dh = model.cfg.d_head
    h = 1  # head 1.2
    with torch.no_grad():
        for W in (b0.W_Q, b0.W_K, b0.W_V):
            W[h].zero_()
        u = torch.zeros(dh)
        u[list(range(6))] = 12.0
        b0.W_Q[h, SHARED] = u
        b0.W_K[h, SHARED] = u  # unrotated: the score peaks at offset 0, its own position
        b0.W_V[h, :V, :V] = torch.eye(V)
        b0.W_O[h].zero_()
        b0.W_O[h, :V, 48:48 + V] = torch.eye(V)
        i = INDUCTION[1]
        q = b1.W_Q[i, :V].clone()
        b1.W_Q[i].zero_()
        b1.W_Q[i, 48:48 + V] = q  # the query reads the token from 1.2's copy
    return model


def test_the_planted_circuit_is_chosen_by_either_reference():
    """Planted: 1.1 → k and 2.2 are the whole circuit, so both references choose exactly them, and each scores
    its own choice as all of the span."""
    from exercises.planted import INDUCTION, PREV, TASK, planted_induction_model

    model = planted_induction_model()
    runs = patching.task_runs(model, TASK, 16, 0)
    for reference in circuit.REFERENCES:
        found = circuit.choose(model, runs, reference)
        assert found == {("path", PREV[1], "k"), ("head", INDUCTION[1])}, reference
        rep = circuit.circuit_report(model, runs, found, reference)
        assert rep["recovered"] == pytest.approx(1, abs=1e-4) and (rep["rows"]["completeness_share"] < 1e-4).all()
        assert circuit.grow(model, runs, found, reference) == []  # nothing to add


def test_a_query_path_only_the_mean_reference_can_see_under_first_copy():
    """Planted (_query_planted): with the mean reference the choice is 1.1 → k, 1.2 → q and 2.2, and scoring
    that choice with the same reference keeps all of M; with each sequence's own corrupted run the query path
    is invisible, so that reference chooses only 1.1 → k and 2.2, and, scored by its own reference, they keep all
    of its span. Mixing the two (choosing with the corrupted runs, scoring with the mean) is what loses M."""
    from exercises.planted import INDUCTION, PREV, TASK

    model = _query_planted()
    runs = patching.task_runs(model, TASK, 16, 0)
    key, query, head = ("path", PREV[1], "k"), ("path", 1, "q"), ("head", INDUCTION[1])
    assert circuit.choose(model, runs, "mean") == {key, query, head}
    assert circuit.choose(model, runs, "corrupted") == {key, head}
    mean = circuit.circuit_report(model, runs, {key, query, head}, "mean")
    assert mean["recovered"] == pytest.approx(1, abs=1e-4) and (mean["rows"]["minimality_share"].iloc[:-1] > 0.2).all()
    own = circuit.circuit_report(model, runs, {key, head}, "corrupted")
    assert own["recovered"] == pytest.approx(1, abs=1e-4)
    mixed = circuit.circuit_report(model, runs, {key, head}, "mean")
    assert mixed["recovered"] < 0.5
    assert circuit.grow(model, runs, {key, head}, "mean")[0][0] == query  # the first part greedy growth adds
    page = circuit.page_circuit(model, runs)
    assert page["elements"] == ["1.1 → k", "1.2 → q", "2.2"] and page["other"]["elements"] == ["1.1 → k", "2.2"]
    from core.causal import check_readings

    said = check_readings.circuit_sentence(page, runs.m_clean - runs.m_corrupted, "first-copy")
    assert "only the mean reference can find 1.2 → q needed" in said and "disagree on 1.2 → q" in said
