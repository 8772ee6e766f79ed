"""Pinned tokens beyond the Attention page's grid (ui/charts/pins.py, ui/pins.py). Archetypes: the matrix and the
flow view are one chart sharing one pin selection, the keys' weights it shows are read from the generated
pattern, and a link's `pin` starts both pinned and survives a change of archetype. The Attention page's single
head: keys pinned apart with alt-click."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.archetypes import catalogue as arc
from ui.charts import archetypes as charts
from ui.charts.pins import PIN

PROMPT = arc.PRESET_PROMPTS[next(iter(arc.PRESET_PROMPTS))]


def _views(spec: dict) -> list[dict]:
    """Every unit view of a compound spec."""
    out = []
    for key in ("hconcat", "vconcat", "layer"):
        for part in spec.get(key, []):
            out += _views(part)
    return out or [spec]


def test_the_matrix_and_the_flow_share_one_pin_started_at_the_pinned_queries():
    tokens = arc.tokenize(PROMPT)
    A = arc.archetype_pattern("induction", tokens).numpy()
    spec = charts.pattern_views.uncached(A, arc.token_labels(tokens), None, (3, 7)).to_dict()
    (pin,) = [p for p in spec["params"] if p["name"] == PIN]
    assert pin["value"] == [{"i": 3}, {"i": 7}] and pin["select"]["fields"] == ["i"]
    # the selection lives in the matrix (its cells), the strip (its tokens) and the flow (its lines, in the layer
    # with its queries: a click on a query pins it too, tests/e2e/test_e2e_archetype_pins.py)
    marks = [v["mark"]["type"] for v in _views(spec) if v.get("name") in pin["views"]]
    assert sorted(marks) == ["rect", "rect", "rule"], marks
    # the numbers written after the keys: the pinned queries' weights, summed, from the whole causal pattern
    weights = [v for v in _views(spec) if any("aggregate" in t for t in v.get("transform", []))
               and v["encoding"].get("text", {}).get("field") == "shown"]
    (written,) = weights
    rows = spec["datasets"][written["data"]["name"]]
    got = np.zeros(A.shape[0])
    for r in rows:
        if r["i"] in (3, 7):
            got[r["j"]] += r["weight"]
    assert np.allclose(got, A[[3, 7]].sum(axis=0), atol=1e-6)


def test_without_a_pin_nothing_starts_pinned():
    tokens = arc.tokenize(PROMPT)
    A = arc.archetype_pattern("previous_token", tokens).numpy()
    spec = charts.pattern_views.uncached(A, arc.token_labels(tokens)).to_dict()
    (pin,) = [p for p in spec["params"] if p["name"] == PIN]
    assert "value" not in pin


@pytest.mark.app
def test_a_pin_link_pins_both_views_and_survives_a_change_of_archetype():
    from test_share import address, open_link

    link = {"model": "variable-period-2block", "archetype": "induction", "prompt": next(iter(arc.PRESET_PROMPTS)),
            "pin": "4,9"}
    at = open_link("app_pages/archetypes.py", link)
    assert at.session_state["arch_pin"] == [4, 9] and not at.sidebar.warning

    def pinned_first() -> list[int]:
        for chart in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart"):
            for param in json.loads(chart.proto.spec).get("params", []):
                if param.get("name") == PIN:
                    return sorted(v for d in param.get("value", []) for v in d.values())
        raise AssertionError("no chart with a pin")

    assert pinned_first() == [4, 9] and address(at)["pin"] == "4,9"
    at.selectbox(key="arch_name").set_value("previous_token").run()
    assert not at.exception
    assert pinned_first() == [4, 9] and address(at)["pin"] == "4,9"


def test_the_single_head_pins_keys_apart_with_alt_click_and_queries_without_it():
    """ui/charts/attention.py head_heatmap: two click selections that never both take one click (the query pin
    ignores alt-clicks, the key pin takes only those), and the bars beside the pattern read the pinned keys."""
    from ui.charts import attention
    from ui.charts.pins import KEYS

    T = 12
    A = np.tril(np.ones((T, T)))
    A /= A.sum(axis=1, keepdims=True)
    spec = attention.head_heatmap.uncached(A, list("abcdefghijkl"), None, 4, (5,)).to_dict()
    by_name = {p["name"]: p for p in spec["params"]}
    assert by_name[PIN]["select"]["on"] == "click[!event.altKey]" and by_name[PIN]["value"] == [{"qi": 5}]
    assert by_name[KEYS]["select"]["on"] == "click[event.altKey]" and by_name[KEYS]["select"]["fields"] == ["kj"]
    readers = [v for v in _views(spec) if any(f"'{KEYS}_store'" in str(t.get("filter", "")) for t in
                                               v.get("transform", [])) and v["mark"]["type"] == "bar"]
    assert len(readers) == 1 and readers[0]["encoding"]["y"]["field"] == "qi"
