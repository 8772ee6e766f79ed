"""Attention and Circuits pages through AppTest: every shipped checkpoint renders both, bad typed
sequences get a message, an ablation changes the metric shown."""

import pytest
from streamlit.testing.v1 import AppTest

from helpers import SHIPPED, TWO_BLOCK, open_app


def two_block(page: str) -> AppTest:
    return open_app(page, TWO_BLOCK)


@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_attention_page_on_every_shipped_checkpoint(file):
    at = open_app("app_pages/attention.py", file)
    if "zero-block" in file:
        assert any("no attention blocks" in i.value for i in at.info)
        assert len(at.get("page_link")) >= 1
        return
    assert not at.warning and not at.error
    assert len(at.get("vega_lite_chart")) >= 5  # grid, close-up, offsets, sweep, probe mass
    assert len(at.dataframe) == 2 and len(at.metric) == 3  # the head scores and their 95% intervals
    at.radio(key="att_weighting").set_value("value-weighted").run()
    at.slider(key="att_probe").set_value(at.slider(key="att_probe").min).run()
    assert not at.exception, at.exception


@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_circuits_page_on_every_shipped_checkpoint(file):
    at = open_app("app_pages/circuits.py", file)
    if "zero-block" in file:
        assert any("no attention blocks" in i.value for i in at.info)
        return
    assert not at.warning and not at.error
    one_block = "1block" in file
    assert any("no composition" in i.value for i in at.info) == one_block
    last = at.selectbox(key="cir_head").options[-1]
    at.selectbox(key="cir_head").set_value(last).run()
    assert not at.exception, at.exception


@pytest.mark.app
def test_typed_sequence_bad_input_gets_a_message():
    at = two_block("app_pages/attention.py")
    at.radio(key="att_source").set_value("Type your own").run()
    assert not at.exception and not at.warning  # the default text is valid
    charts_ok = len(at.get("vega_lite_chart"))
    for bad, words in (("", "at least"), ("héllo wörld", "no token"), ("ab" * 100, "limit"), ("a", "at least")):
        at.text_input(key="att_text").set_value(bad).run()
        assert not at.exception, at.exception
        assert at.warning and words in at.warning[0].value, (bad, [w.value for w in at.warning])
        assert len(at.get("vega_lite_chart")) < charts_ok  # the pattern charts are not drawn
    at.text_input(key="att_text").set_value("abcabcabcabc").run()
    assert not at.warning and len(at.get("vega_lite_chart")) == charts_ok


@pytest.mark.app
def test_ablation_changes_the_metric_shown():
    at = two_block("app_pages/circuits.py")
    before = {m.label: m.value for m in at.metric}
    key = "later-copy loss (nats)"
    at.multiselect(key="cir_ablate").set_value(["1.1", "1.2", "1.3", "1.4"]).run()
    assert not at.exception, at.exception
    after = {m.label: m.value for m in at.metric}
    assert float(after[key]) > float(before[key]) + 1.0  # block 1 feeds the induction heads
    delta = next(m for m in at.metric if m.label == key).delta
    assert delta is not None and float(delta) == pytest.approx(float(after[key]) - float(before[key]), abs=2e-3)
    at.radio(key="cir_mode").set_value("mean").run()
    assert not at.exception and float(next(m for m in at.metric if m.label == key).value) > float(before[key])
