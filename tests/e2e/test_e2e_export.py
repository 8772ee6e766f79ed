"""Every chart exports in a real browser: the first chart of the Attention page, from its Export menu, as an SVG that
parses and names the page, the model and the chart's axes, and as a PNG at print scale (ui/charts/export.py)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from PIL import Image
from pin_tools import download

from ui.charts.export import PNG_SCALE

pytestmark = pytest.mark.e2e



def test_the_first_attention_chart_downloads_as_svg_and_print_scale_png(app):
    app.goto("attention")
    app.wait_charts(1)
    svg = download(app, "SVG")
    assert svg.suggested_filename.startswith("attention_variable-period-2block_") and \
        svg.suggested_filename.endswith(".svg")
    root = ET.parse(svg.path()).getroot()
    assert root.tag.endswith("svg") and "key position j" in " ".join(root.itertext())
    png = download(app, "PNG")
    assert png.suggested_filename == svg.suggested_filename.removesuffix(".svg") + ".png"
    assert Image.open(png.path()).size[0] == PNG_SCALE * round(float(root.get("width")))
