"""Head archetypes, their detectors, the IOI data and the Head archetypes page."""
from __future__ import annotations

import pytest
import torch

from core.archetypes import catalogue as arc
from core.archetypes import head_matches as hm
from core.archetypes import ioi
from core.model.config import ModelConfig
from core.model.symbols import InputProblem, encode_text
from core.model.tinycharlm import TinyCharLM
from core.reading.detectors import SCORE_ROWS
from ui.charts import archetypes as charts

from helpers import CHECKPOINTS, SHIPPED, open_app

PROMPTS = list(arc.PRESET_PROMPTS.values())
SETTINGS = [arc.ArchetypeSettings(s, r) for s in (0.0, 1.0, 6.0, 12.0) for r in (0.0, 0.8, 1.0)]


# ------------------------------------------------------------------ patterns


@pytest.mark.parametrize("prompt", PROMPTS + ["Hi", "one , two , one , two"])
def test_every_pattern_is_causal_and_rows_sum_to_one(prompt):
    tokens = arc.tokenize(prompt)
    T = len(tokens)
    for name in arc.ARCHETYPES:
        for settings in SETTINGS:
            A = arc.archetype_pattern(name, tokens, settings)
            assert A.shape == (T, T)
            assert torch.all(A >= 0)
            assert torch.all(A.triu(1) == 0), f"{name} reads the future"
            assert torch.allclose(A.sum(-1), torch.ones(T), atol=1e-5), name


def test_archetypes_put_their_mass_where_they_say():
    tokens = arc.tokenize(arc.PRESET_PROMPTS["IOI sentence"])  # <bos> When John and Mary ... John gave a drink to
    sharp = arc.ArchetypeSettings(sharpness=12.0, rest_share=1.0)
    assert tokens[2] == tokens[10] == "John" and tokens[4] == "Mary" and tokens[-1] == "to"
    A = {name: arc.archetype_pattern(name, tokens, sharp) for name in arc.ARCHETYPES}
    assert A["previous_token"][7, 6] > 0.99
    assert A["first_token"][9, 0] > 0.99
    assert A["self"][5, 5] > 0.99
    assert A["duplicate_token"][10, 2] > 0.99  # second John reads the first
    assert A["induction"][10, 3] > 0.99  # second John reads what followed the first ("and")
    assert A["name_mover"][14, 4] > 0.99  # the end reads Mary, the name seen once
    assert A["induction"][5, 0] == pytest.approx(1.0)  # "went" never appeared before: rests on BOS


def test_rest_share_and_sharpness_do_what_they_say():
    tokens = arc.tokenize(arc.PRESET_PROMPTS["IOI sentence"])
    idle_row = 5  # "went": nothing for the induction archetype to find
    for r in (0.0, 0.3, 0.9):
        A = arc.archetype_pattern("induction", tokens, arc.ArchetypeSettings(6.0, r))
        assert A[idle_row, 0].item() == pytest.approx(r + (1 - r) / (idle_row + 1), abs=1e-6)
    flat = arc.archetype_pattern("previous_token", tokens, arc.ArchetypeSettings(0.0, 0.8))
    assert torch.allclose(flat[7, :8], torch.full((8,), 1 / 8))
    on_target = [arc.archetype_pattern("previous_token", tokens, arc.ArchetypeSettings(s, 0.8))[7, 6].item()
                 for s in (1.0, 3.0, 6.0, 12.0)]
    assert on_target == sorted(on_target) and on_target[0] < 0.5 < on_target[-1]
    with pytest.raises(ValueError):
        arc.archetype_pattern("self", tokens, arc.ArchetypeSettings(6.0, 1.5))


# ------------------------------------------------------------------ detectors


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("rows", SCORE_ROWS)
def test_each_detector_scores_its_own_archetype_highest(prompt, rows):
    tokens = arc.tokenize(prompt)
    for sharpness in (5.0, 6.0, 8.0, 12.0):
        for rest in (0.0, 0.5, 0.8, 1.0):
            table = arc.detector_table(tokens, arc.ArchetypeSettings(sharpness, rest), rows)
            wins = arc.own_detector_wins(table)
            assert set(wins) == set(arc.ALL_DETECTORS)
            assert all(wins.values()), (sharpness, rest, wins)
            # and every archetype beats, on its own detector, a head that spreads evenly
            score = table.set_index(["archetype", "detector"])["score"]
            margin = 0.3 if rows == "target" else 0.0
            for name in arc.ARCHETYPES:
                assert score[(name, name)] > score[("uniform", name)] + margin, (name, sharpness, rest)


def test_whole_pattern_score_counts_idle_rows_as_zero():
    tokens = arc.tokenize(arc.PRESET_PROMPTS["IOI sentence"])  # 2 of 15 rows repeat an earlier token
    A = arc.archetype_pattern("duplicate_token", tokens, arc.ArchetypeSettings(50.0, 1.0))
    target = arc.all_detector_scores(A, tokens, "target")["duplicate_token"].item()
    whole = arc.all_detector_scores(A, tokens, "all")["duplicate_token"].item()
    assert target == pytest.approx(1.0, abs=1e-4)
    assert whole == pytest.approx(2 / 15, abs=1e-4)


def test_a_blunt_sink_loses_its_own_detector():
    # low sharpness, everything idle on BOS: the resting archetypes are more sink-like than the sink
    table = arc.detector_table(arc.tokenize(PROMPTS[0]), arc.ArchetypeSettings(1.0, 1.0))
    wins = arc.own_detector_wins(table)
    assert wins["first_token"] is False
    assert wins["previous_token"] and wins["self"]


def test_rivals_name_the_archetype_that_wins_instead():
    # "Bo and Bo": the token after the earlier Bo is "and", which is also the previous token
    table = arc.detector_table(arc.tokenize("Ann saw Bo and Bo waved to"), arc.ArchetypeSettings())
    rivals = arc.detector_rivals(table)
    assert list(rivals) == ["induction"]
    rival, own, score = rivals["induction"]
    assert rival == "previous_token" and score >= own
    assert arc.detector_rivals(arc.detector_table(arc.tokenize(PROMPTS[0]), arc.ArchetypeSettings())) == {}


def test_detectors_report_nothing_to_find():
    table = arc.detector_table(arc.tokenize("the quick brown fox"), arc.ArchetypeSettings())
    wins = arc.own_detector_wins(table)
    assert wins["induction"] is None and wins["duplicate_token"] is None and wins["name_mover"] is None
    assert wins["previous_token"] and wins["first_token"] and wins["self"]


def test_name_mover_targets():
    assert arc.name_mover_targets(arc.tokenize(arc.PRESET_PROMPTS["IOI sentence"])) == [4]
    assert arc.name_mover_targets(arc.tokenize("When Anna met Anna and Tom met Tom, she said")) == [2, 4, 6, 8]
    assert arc.name_mover_targets(arc.tokenize("The cat sat")) == []


# ------------------------------------------------------------------ views
# The builders themselves (`.uncached`): the kept ones may hand back a stored spec (ui/charts/kept.py)


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("name", arc.ARCHETYPES)
def test_matrix_and_flow_views_build(prompt, name):
    tokens = arc.tokenize(prompt)
    labels = arc.token_labels(tokens)
    T = len(tokens)
    A = arc.archetype_pattern(name, tokens)
    matrix = charts.pattern_matrix.uncached(A.numpy(), labels).to_dict()
    heat = matrix["vconcat"][0]["layer"][0]  # the heatmap (then the pinned row's outline; under it the strip)
    assert len(matrix["datasets"][heat["data"]["name"]]) == T * (T + 1) // 2  # the causal triangle, no more
    flow = charts.pattern_flow.uncached(A.numpy(), labels).to_dict()
    # lines and queries; beside them keys and the pinned queries' weight on each key
    assert [len(v["layer"]) for v in flow["hconcat"]] == [2, 2]
    focused = charts.pattern_flow.uncached(A.numpy(), labels, focus=T - 1)
    lines = focused.hconcat[0].layer[0].data
    assert set(lines["i"]) == {T - 1}
    assert lines["weight"].sum() == pytest.approx(A[T - 1][A[T - 1] >= 0.01].sum().item(), abs=1e-5)


def test_detector_heatmap_and_ioi_diagram_build():
    tokens = arc.tokenize(PROMPTS[0])
    table = arc.detector_table(tokens)
    chart = charts.score_heatmap.uncached(table, "archetype", list(arc.ARCHETYPES) + ["uniform"],
                                          list(arc.ALL_DETECTORS), arc.DETECTOR_LABELS, "archetype",
                                          own={a: a for a in arc.ARCHETYPES})
    assert chart.to_dict()["layer"]
    lanes = [g.label for g in ioi.GROUPS]
    assert charts.ioi_diagram.uncached(ioi.heads_frame(), ioi.edges_frame(), lanes, ioi.LOGITS_X).to_dict()["layer"]


# ------------------------------------------------------------------ prompts


def test_tokenize_words_and_punctuation():
    assert arc.tokenize("When John, Mary's friend, left.") == [arc.BOS, "When", "John", ",", "Mary's", "friend",
                                                                ",", "left", "."]


@pytest.mark.parametrize("bad", ["", "   ", "x" * (arc.MAX_PROMPT_CHARS + 1), "a " * (arc.MAX_PROMPT_WORDS + 1),
                                 "  \n\t "])
def test_bad_word_prompts_get_a_message(bad):
    with pytest.raises(InputProblem) as e:
        arc.tokenize(bad)
    assert str(e.value).endswith(".") and len(str(e.value)) > 20


def test_default_char_prompt():
    text = hm.random_char_prompt(period=24, copies=3, seed=1)
    assert len(text) == 72 and text[:24] * 3 == text and " " not in text
    assert hm.random_char_prompt(24, 3, seed=1) == text != hm.random_char_prompt(24, 3, seed=2)


# ------------------------------------------------------------------ model heads and IOI data


def encode(text: str, vocab_size: int) -> torch.Tensor:
    return torch.tensor(encode_text(text, vocab_size, min_len=2))


def test_head_detector_table_on_a_model():
    torch.manual_seed(0)
    model = TinyCharLM(ModelConfig(n_layers=2, d_model=32, n_heads=2)).eval()
    tokens = encode(hm.random_char_prompt(8, 3, seed=0), 64)
    patterns = hm.model_patterns(model, tokens)
    assert [p.shape for p in patterns] == [(2, 24, 24)] * 2
    table = hm.head_detector_table(patterns, tokens)
    assert len(table) == (2 * 2 + 1) * len(arc.DETECTORS)
    assert table["score"].between(0, 1).all()
    best = hm.best_matches(table)
    assert len(best) == 4 and set(best["best"]) <= set(arc.DETECTORS)
    assert hm.model_patterns(TinyCharLM(ModelConfig(n_layers=0)), tokens) == []


def test_a_clear_match_must_beat_a_uniform_head():
    import pandas as pd
    rows = [{"layer": 0, "head": h, "detector": d, "score": 0.0} for h in range(3) for d in arc.DETECTORS]
    rows += [{"layer": -1, "head": -1, "detector": d, "score": 0.2 if d == "self" else 0.05} for d in arc.DETECTORS]
    table = pd.DataFrame(rows)
    table.loc[(table["layer"] == 0) & (table["head"] == 0) & (table["detector"] == "induction"), "score"] = 0.35
    table.loc[(table["layer"] == 0) & (table["head"] == 1) & (table["detector"] == "self"), "score"] = 0.35
    table.loc[(table["layer"] == 0) & (table["head"] == 2) & (table["detector"] == "induction"), "score"] = 0.25
    best = hm.best_matches(table).set_index("head")
    assert best.loc[0, "best"] == "induction" and best.loc[0, "matches"]  # 0.35 is 7x a uniform head
    assert best.loc[1, "best"] == "self" and not best.loc[1, "matches"]  # 0.35 is under 3x a uniform head's 0.2
    assert not best.loc[2, "matches"]  # 0.25 is under the 0.3 floor
    assert hm.strongest_head(best.reset_index()) == (0, 0)  # a clear match beats an equal score that is not


@pytest.mark.skipif(not (CHECKPOINTS / "variable-period-2block.pt").is_file(),
                    reason="checkpoints/variable-period-2block.pt is not shipped yet")
def test_trained_two_block_model_has_previous_token_and_induction_heads():
    from core.model.checkpoints import read_checkpoint
    model, _ = read_checkpoint(CHECKPOINTS / "variable-period-2block.pt")
    tokens = encode(hm.random_char_prompt(24, 3, seed=0), model.cfg.vocab_size)
    best = hm.best_matches(hm.head_detector_table(hm.model_patterns(model, tokens), tokens))
    assert ((best["layer"] == 0) & (best["best"] == "previous_token") & best["matches"]).any()
    assert ((best["layer"] == 1) & (best["best"] == "induction") & best["matches"]).any()


def test_ioi_data():
    heads = [h for g in ioi.GROUPS for h in g.heads]
    assert len(heads) == len(set(heads)) == 26
    assert all(0 <= l < 12 and 0 <= h < 12 for l, h in heads)
    keys = {g.key for g in ioi.GROUPS} | {"logits"}
    assert all(src in keys and dst in keys for src, dst, _ in ioi.EDGES)
    edges = ioi.edges_frame()
    assert (edges["x2"] > edges["x"]).all()  # every connection runs forward through the layers
    tokens = arc.tokenize(ioi.IOI_PROMPT)
    assert ioi.ioi_positions(tokens) == {"IO": 4, "S1": 2, "S1+1": 3, "S2": 10, "END": 14}
    assert ioi.ioi_positions(arc.tokenize("the quick brown fox")) is None
    assert len(ioi.roles_on_prompt(tokens)) == len(ioi.GROUPS)


# ------------------------------------------------------------------ the page


def _session_model(at, n_layers):
    from core.model.task import TaskConfig
    from ui.state import LabModel
    torch.manual_seed(0)
    model = TinyCharLM(ModelConfig(n_layers=n_layers)).eval()
    entry = LabModel(f"session:test-{n_layers}", f"test {n_layers}-block", model,
                     {"config": model.cfg, "task": TaskConfig(), "train": None, "history": None}, "trained")
    at.session_state["lab_models"] = {entry.key: entry}
    at.run()
    at.selectbox(key="picked_model").set_value(entry.key).run()
    assert at.session_state["picked_model"] == entry.key
    return at


def _text(at):
    return " ".join(str(e.value) for kind in ("markdown", "info", "warning", "success", "caption")
                    for e in getattr(at, kind))


@pytest.mark.app
@pytest.mark.skipif(not SHIPPED, reason="no checkpoints/*.pt shipped yet")
@pytest.mark.parametrize("file", SHIPPED)
def test_page_with_every_shipped_checkpoint(file):
    at = open_app("app_pages/archetypes.py", file)
    text = _text(at)
    if "zero-block" in file:
        assert "no attention heads" in text
    else:
        assert "block 1 · head 1" in text
    assert "not run here" in text


@pytest.mark.app
def test_page_with_session_models_and_bad_prompts():
    at = _session_model(open_app("app_pages/archetypes.py"), 2)
    assert not at.exception
    assert "block 2 · head 4" in _text(at)
    # bad word prompts: a message, the rest of the page still there
    at.radio(key="arch_prompt").set_value("Your own sentence").run()
    for bad in ["", "word " * 100]:
        at.text_input(key="arch_custom").set_value(bad).run()
        assert not at.exception
        assert any("prompt" in w.value for w in at.warning)
        assert "The IOI circuit in GPT-2 small" in [h.value.split("· ")[-1] for h in at.header][-2:][0]
    at.text_input(key="arch_custom").set_value("Ann met Bo at noon, and Bo thanked").run()
    assert not at.exception and not at.warning
    # bad character prompt
    at.radio(key="arch_char_mode").set_value("Your own characters").run()
    at.text_input(key="arch_chars").set_value("héllo wörld").run()
    assert not at.exception
    assert any("no token for 'é', 'ö'" in w.value for w in at.warning)
    # a model without blocks
    at = _session_model(open_app("app_pages/archetypes.py"), 0)
    assert not at.exception
    assert "no attention heads" in _text(at)
