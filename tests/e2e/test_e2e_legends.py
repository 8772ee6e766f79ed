"""Colour bars survive a change of the address: no chart on any page points a fill at the page's address
(Vega's SVG gradients do, vega/vega#3948, and go blank once ui/share.py rewrites the query), and the pages
with colour bars draw them on a canvas (ui.charts.kept.on_canvas_if_gradient)."""
from __future__ import annotations

import pytest

from streamlit_server import MIN_CHARTS, PAGES

pytestmark = pytest.mark.e2e

WITH_COLOUR_BARS = ("attention", "circuits", "causal")
ADDRESS_REFS_JS = r"""() => [...document.querySelectorAll(
    '[data-testid="stVegaLiteChart"] svg [fill*="url("], [data-testid="stVegaLiteChart"] svg [style*="url("]')]
    .map(e => e.getAttribute('fill') || e.getAttribute('style'))"""


@pytest.mark.parametrize("path", [p for p in PAGES if p])
def test_no_chart_points_its_colours_at_the_address(app, path):
    app.goto(path)
    app.wait_charts(MIN_CHARTS[path])
    app.assert_no_exception()
    assert app.page.evaluate(ADDRESS_REFS_JS) == []
    if path in WITH_COLOUR_BARS:
        assert app.page.locator('[data-testid="stVegaLiteChart"] canvas').count() >= 1
