"""ui/charts/kept.py: a chart is kept per content of its builder's arguments, and drawn from its kept spec
exactly as st.altair_chart draws the chart."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from ui.charts import kept as kept_module
from ui.charts.kept import Undigestable, digest, kept


def _frame():
    return pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "label": ["1.1", "1.2", "2.1"],
                         "value": [0.5, -0.25, 1.0]})


def test_digest_tells_every_change_of_content_apart():
    base = _frame()
    same = _frame()
    assert digest(base, 3, "a") == digest(same, 3, "a")
    assert digest(np.arange(4.0)) == digest(np.arange(4.0)) and digest(torch.ones(2)) == digest(torch.ones(2))
    changed = [
        base.assign(value=[0.5, -0.25, 1.5]),  # one number
        base.assign(label=["1.1", "1.2", "2.2"]),  # one string
        base.rename(columns={"value": "score"}),  # a column's name
        base[["head", "layer", "label", "value"]],  # the columns' order
        base.set_axis([5, 6, 7]),  # the index
        base.astype({"value": "float32"}),  # a dtype
        base.astype({"label": "category"}),  # a dtype of text
        base.astype({"label": pd.CategoricalDtype(["2.1", "1.2", "1.1"])}),  # the categories' order
    ]
    digests = {digest(base)} | {digest(c) for c in changed}
    assert len(digests) == len(changed) + 1
    assert len({digest(1), digest(1.0), digest("1"), digest(True), digest((1,)), digest([1])}) == 6
    assert digest(np.zeros((2, 3))) != digest(np.zeros((3, 2)))
    assert digest(np.zeros(3, dtype=np.float32)) != digest(np.zeros(3, dtype=np.float64))
    assert digest(torch.tensor([1.0, 2.0])) != digest(torch.tensor([1.0, 2.5]))
    with pytest.raises(Undigestable):
        digest(object())


def test_kept_builds_once_per_content_and_never_gives_an_old_chart(monkeypatch):
    calls = []

    @kept
    def build(frame, title="t"):
        calls.append(title)
        return {"title": title, "rows": len(frame) if hasattr(frame, "__len__") else None}  # any object is kept

    kept_module.clear()
    a = build(_frame(), title="x")
    assert build(_frame(), title="x") is a and calls == ["x"]
    assert build(_frame(), title="y") is not a and calls == ["x", "y"]
    assert build(_frame().head(2), title="x")["rows"] == 2 and len(calls) == 3
    holder = object()
    build(holder)  # an argument without a digest: built every time, not kept
    build(holder)
    assert len(calls) == 5
    monkeypatch.setattr(kept_module, "MAX_CHARTS", 2)
    build(_frame(), title="z")  # a third entry: the least recently used ("x") goes
    assert build(_frame(), title="x") is not a and len(calls) == 7
    assert len(kept_module._charts) <= 2 and len(kept_module._by_id) == len(kept_module._charts)
    kept_module.clear()


def test_sessions_asking_at_once_wait_for_one_build_and_one_conversion(monkeypatch):
    """A class opening pages on a new server asks for each chart from many sessions at once;
    one builds it and converts it, the others wait and take the same chart and spec (before: each built
    and converted its own; 20 readers' first pages on a cold server, p95 9.5 -> 6.8 s)."""
    import threading
    import time

    builds, conversions, drawn = [], [], []

    class Chart:  # a chart object (a dict would be drawn as a spec)
        def __init__(self, rows):
            self.rows = rows

    @kept
    def slow(frame):
        builds.append(1)
        time.sleep(0.2)  # long enough for every thread to ask while the first builds
        return Chart(len(frame))

    def converting(chart):
        conversions.append(1)
        time.sleep(0.2)
        return {"spec": {"rows": chart.rows}, "datasets": {}}

    class Where:
        def vega_lite_chart(self, spec, **kwargs):
            drawn.append(spec)

    monkeypatch.setattr(kept_module, "sent_form", converting)
    kept_module.clear()
    got, start = [], threading.Barrier(8)

    def session():
        start.wait()
        chart = slow(_frame())
        got.append(chart)
        kept_module.draw(Where(), chart)

    threads = [threading.Thread(target=session) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 8 and all(c is got[0] for c in got)
    assert len(builds) == 1 and len(conversions) == 1
    assert len(drawn) == 8 and all(d == {"spec": {"rows": 3}, "datasets": {}} for d in drawn)
    assert kept_module._building == {}  # no lock left behind
    with pytest.raises(ZeroDivisionError):  # a builder that raises lets the next caller build
        kept(lambda x: 1 / 0)(1)
    assert kept_module._building == {}
    kept_module.clear()


def _three_ways():
    import pandas as pd
    import streamlit as st

    from ui.charts import causal as charts
    from ui.charts.kept import clear, draw

    clear()
    frame = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "patch_effect": [0.1, -0.3, 0.5, 0.9]})
    # what st.altair_chart sends for the chart, with the canvas that draw gives a chart with a colour bar
    canvas = {"embedOptions": {"renderer": "canvas"}}
    st.altair_chart(charts.head_effects.uncached(frame, "title").properties(usermeta=canvas), width="content")
    draw(st, charts.head_effects(frame, "title"), width="content")  # converted, then kept
    draw(st, charts.head_effects(frame, "title"), width="content")  # from the kept spec
    draw(st, charts.head_effects(frame.assign(patch_effect=[0.2, -0.3, 0.5, 0.9]), "title"), width="content")
    clear()


def test_draw_sends_what_altair_chart_sends():
    at = AppTest.from_function(_three_ways, default_timeout=60).run()
    assert not at.exception
    sent = [c.proto for c in at.get("vega_lite_chart")]
    assert len(sent) == 4 and sent[0].datasets
    for proto in sent:  # the same spec, whatever the order of its keys
        proto.spec = json.dumps(json.loads(proto.spec), sort_keys=True)
    assert sent[0].SerializeToString() == sent[1].SerializeToString() == sent[2].SerializeToString()
    assert sent[3].datasets[0].data.data != sent[0].datasets[0].data.data  # new data: a new chart


def _live_history():
    from core.model.checkpoints import read_checkpoint

    from helpers import CHECKPOINTS

    model, info = read_checkpoint(CHECKPOINTS / "variable-period-2block.pt")
    return info["history"], model.cfg.vocab_size


def test_a_live_charts_swapped_data_spec_is_a_fresh_charts_spec_row_by_row():
    """The Train page's live charts (ui.charts.train.*_spec) are their kept spec with new datasets: for every
    prefix of a real run's rows (before and after the drop, with the film strip's marks and the dashed
    reference run) the spec equals the one st.altair_chart would send for a chart built afresh."""
    import math

    import pandas as pd

    from core.training import live
    from ui.charts import train as charts
    from ui.charts.kept import clear, sent_form

    history, vocab = _live_history()
    reference = live.loss_frame(history, "shipped 1 block"), live.accuracy_frame(history, "shipped 1 block")
    clear()
    span, dropped = 3000, set()
    for n in (1, 2, 3, 8, 9, 10, 11, 20, len(history)):
        rows = history[:n]
        drop = live.drop_step(rows, vocab)
        dropped.add(drop is not None)
        marks = [r["step"] for r in rows[::3]][:6] if n > 2 else None
        heads = live.head_score_frame(rows)
        for ref in (None, reference):
            loss, acc = live.loss_frame(rows, "this run"), live.accuracy_frame(rows, "this run")
            if ref is not None:
                loss, acc = pd.concat([loss, ref[0]]), pd.concat([acc, ref[1]])
            assert charts.loss_spec(loss, math.log(vocab), drop, span, marks=marks) == sent_form(
                charts.loss_chart(loss, math.log(vocab), drop, span, marks=marks))
            assert charts.accuracy_spec(acc, 1 / vocab, drop, span) == sent_form(
                charts.accuracy_chart(acc, 1 / vocab, drop, span))
        assert charts.head_score_spec(heads, drop, span) == sent_form(charts.head_score_chart(heads, drop, span))
    assert dropped == {False, True}  # the prefixes cross the drop (a red line appears: a new shape)
    clear()


def test_swapped_converts_once_per_shape_and_falls_back_where_it_cannot_swap():
    import altair as alt
    import pandas as pd

    from ui.charts.kept import clear, sent_form, swapped

    calls = []

    def bars(frames, title):
        calls.append(title)
        return alt.Chart(frames["bars"]).mark_bar().encode(x="x:Q", y="y:Q").properties(title=title)

    def shifted(frames, title):  # hands Altair a frame of its own: a dataset no role gives
        calls.append(title)
        return alt.Chart(frames["bars"].assign(y=frames["bars"]["y"] + 1)).mark_bar().encode(x="x:Q", y="y:Q")

    clear()
    for k in range(4):
        frame = pd.DataFrame({"x": range(k + 1), "y": [float(k)] * (k + 1)})
        assert swapped(bars, {"bars": frame}, "a") == sent_form(bars({"bars": frame}, "a"))
        assert swapped(shifted, {"bars": frame}, "s") == sent_form(shifted({"bars": frame}, "s"))
    # bars: one template for "a" (then each call's fresh comparison); shifted: built at every call
    assert calls.count("a") == 1 + 4 and calls.count("s") == 1 + 4 + 4
    assert swapped(bars, {"bars": frame}, "b")["title"] == "b" and calls.count("b") == 1  # another shape
    clear()


@pytest.mark.app  # two page runs in AppTest: the rest tier
def test_a_page_drawn_from_kept_charts_sends_what_a_fresh_build_sends():
    """The Attention page on the default model twice in one process: first every chart built and converted,
    then (a second visitor) every chart from the kept ones: the same messages, and no chart built again."""
    from helpers import open_app

    kept_module.clear()
    first = [c.proto.SerializeToString() for c in open_app("app_pages/attention.py").get("vega_lite_chart")]
    charts = {k: e.chart for k, e in kept_module._charts.items()}
    again = [c.proto.SerializeToString() for c in open_app("app_pages/attention.py").get("vega_lite_chart")]
    assert len(first) >= 3 and again == first
    assert charts and all(kept_module._charts[k].chart is c for k, c in charts.items())
    kept_module.clear()
