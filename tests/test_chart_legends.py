"""A chart with a colour bar is drawn on a canvas: Vega's SVG renderer points the bar's gradient at the page's
address as it was when the chart was drawn, and the bar goes blank once the address bar's query changes
(ui/share.py keeps it in step with the page's settings). tests/e2e/test_e2e_pixels.py checks the pages."""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from core.model.checkpoints import read_checkpoint
from core.training import live
from ui.charts import attention, train
from ui.charts.kept import has_gradient_legend, on_canvas_if_gradient, sent_form

from helpers import shipped


def test_a_heatmap_with_a_colour_bar_goes_on_a_canvas():
    spec = sent_form(attention.pattern_grid(np.random.default_rng(0).random((2, 2, 6, 6))))
    assert has_gradient_legend(spec)
    assert on_canvas_if_gradient(spec)["usermeta"]["embedOptions"]["renderer"] == "canvas"


def test_a_chart_with_categorical_colours_stays_svg():
    _, info = read_checkpoint(shipped("variable-period-2block.pt"))
    spec = sent_form(train.loss_chart(live.loss_frame(info["history"], "this run"), math.log(64), 225, 800))
    assert not has_gradient_legend(spec)
    assert "usermeta" not in on_canvas_if_gradient(spec)


def test_a_continuous_colour_without_its_legend_stays_svg_and_a_nested_one_is_found():
    df = pd.DataFrame({"x": [0, 1], "y": [0, 1], "v": [0.1, 0.9]})
    bare = alt.Chart(df).mark_rect().encode(x="x:O", y="y:O", color=alt.Color("v:Q", legend=None))
    assert not has_gradient_legend(bare.to_dict())
    with_bar = alt.Chart(df).mark_rect().encode(x="x:O", y="y:O", color="v:Q")
    assert has_gradient_legend(alt.hconcat(bare, alt.layer(with_bar, bare)).to_dict())
