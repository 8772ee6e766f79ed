"""Every chart leaves the app as a figure (ui/charts/export.py): an SVG that parses and holds the chart's title and
axis labels, a PNG at PNG_SCALE times the chart's size, and the chart's data as CSV, from the spec a page sends."""
from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
from PIL import Image

from ui.charts import causal, export
from ui.charts.kept import sent_form


def _chart():
    frame = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "patch_effect": [0.1, -0.3, 0.5, 0.9]})
    return causal.head_effects.uncached(frame, "Patch effect of each head")


def test_the_svg_parses_and_carries_the_title_and_the_cells():
    svg = export.svg(sent_form(_chart())).decode()
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    text = " ".join(t for t in root.itertext())
    assert "Patch effect of each head" in text and "0.90" in text  # the title and a cell's number


def test_the_png_is_drawn_at_print_scale():
    spec = sent_form(_chart())
    small, big = (Image.open(io.BytesIO(export.png(spec, scale=s))) for s in (1, export.PNG_SCALE))
    assert big.size[0] == export.PNG_SCALE * small.size[0] and big.size[1] == export.PNG_SCALE * small.size[1]
    assert len(np.unique(np.asarray(big.convert("RGB")).reshape(-1, 3), axis=0)) > 10  # not a blank image


def test_the_csv_is_the_data_the_chart_draws():
    got = pd.read_csv(io.BytesIO(export.csv(sent_form(_chart()))))
    assert sorted(got["patch_effect"]) == [-0.3, 0.1, 0.5, 0.9]


def test_a_file_name_says_page_model_head_and_step_and_is_safe():
    assert export.file_stem("attention", "variable-period-2block", "head-2.1", "step-300", "Every head") == \
        "attention_variable-period-2block_head-2.1_step-300_every-head"
    assert "/" not in export.file_stem("../../etc/passwd", "a b", None, False)


def _grid(pin=()):
    from ui.charts import attention

    rng = np.random.default_rng(0)
    raw = rng.random((2, 2, 6, 6)) * np.tril(np.ones((6, 6)))
    return attention.pattern_grid.uncached(raw / raw.sum(-1, keepdims=True), list("abcabc"), pin)


def test_a_figure_shows_the_tokens_pinned_when_it_is_exported():
    """A pin the browser reports for the chart (its selection) makes the same figure as a chart built pinned there,
    and another figure than none; released (no points), the figure is the unpinned one again."""
    import re

    def svg(spec, **kwargs) -> str:  # vl-convert numbers its gradients across calls
        return re.sub(r"gradient_\d+", "gradient", export.svg(spec, **kwargs).decode())

    plain, pinned = sent_form(_grid()), sent_form(_grid((3, 4)))
    chosen = {"pin": [{"query": 3}, {"query": 4}]}
    assert svg(plain, selected=chosen) == svg(pinned)
    assert svg(plain, selected=chosen) != svg(plain)
    assert svg(pinned, selected={"pin": []}) == svg(plain)
    assert export.pinned_part(chosen) == "pin-3+4" and export.pinned_part({"pin": []}) is None
    assert export.pinned_part(None) is None and export.selection_reader(None)() is None
