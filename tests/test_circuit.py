"""core.causal.circuit: the circuit as a whole (Wang et al., 2022) against independent hook_z mean
ablations on a tiny model, the whole model and the empty circuit, and bad inputs."""
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


def _mean_z(model, runs, ablate: dict[int, list[int]]) -> float:
    """M on the clean run with the heads ablate {layer: [heads]} given their mean z over the corrupted runs
    (z W_O is linear, so this is the mean output): an edit of hook_z, not of hook_result."""
    names = [hook_name(l, "attn.hook_z") for l in ablate]
    _, zc = model.run_with_hooks(runs.corrupted, cache=names)
    edits = {}
    for l, heads in ablate.items():
        mean = zc[hook_name(l, "attn.hook_z")].mean(0, keepdim=True)

        def edit(z, mean=mean, heads=heads):
            z = z.clone()
            z[:, heads] = mean[:, heads].expand(z.shape[0], -1, -1, -1)
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


def test_bad_inputs_are_refused():
    one = tiny_model(1)
    with pytest.raises(ValueError, match="2-block"):
        circuit.faithfulness(one, _runs(one), frozenset())
    model = tiny_model(2)
    with pytest.raises(ValueError, match="Not elements"):
        circuit.faithfulness(model, _runs(model), {("path", 0, "x")})


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
