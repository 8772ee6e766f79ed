"""Pinned queries on the Archetypes page in a real browser (ui/charts/archetypes.py pattern_views): a click on a
row of the matrix pins that query (the address follows), lights its row and dims the others; the strip's bars are
the generated pattern's row (core.archetypes), summed over the queries when shift-click adds one; a click on a
query in the flow view pins it in the same selection. Read by pixels and tooltips (no Vega view is exposed)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from pin_tools import away, first_chart, first_column_panel, link, picture, pins, point_at

from core.archetypes import catalogue as arc
from ui.charts import OKABE_ITO

pytestmark = pytest.mark.e2e

BLUE = np.array([int(OKABE_ITO[4][i:i + 2], 16) for i in (1, 3, 5)])






def _coloured(img: np.ndarray) -> np.ndarray:
    return (img.max(axis=2) - img.min(axis=2)) > 40


def _bar_tooltip(app, chart, img, left: int, side: int, below: int, T: int, k: int) -> float:
    """The strip's bar at key k: hover its middle, read the tooltip's attention (and check its key)."""
    x = int(left + (k + 0.5) * side / T)
    column = np.abs(img[:, x] - BLUE).sum(axis=1) < 30
    column[:below] = False
    ys = np.flatnonzero(column)
    assert len(ys), f"no bar drawn at key {k}"
    point_at(app, chart, x, (ys[0] + ys[0] + np.argmax(~column[ys[0]:])) / 2, click=False)
    tip = app.page.locator("#vg-tooltip-element.visible")
    tip.wait_for(timeout=5_000)
    text = tip.inner_text()
    assert int(re.search(r"key position j\s+(\d+)", text).group(1)) == k, text
    return float(re.search(r"attention\s+([\d.]+)", text).group(1))


def test_pins_in_the_matrix_and_the_flow_show_the_generated_patterns_rows(app):
    chart = first_chart(app, "archetypes")
    address = link(app)
    tokens = arc.tokenize(arc.PRESET_PROMPTS[address["prompt"]])
    A = arc.archetype_pattern(address["archetype"], tokens, arc.ArchetypeSettings(6.0, 0.8)).numpy()  # the defaults
    T = len(tokens)
    before = picture(chart)
    top, bottom, left, right = first_column_panel(before)
    side = bottom - top
    cell = side / T

    q = int(0.6 * T)
    point_at(app, chart, left + 0.5 * cell, top + (q + 0.5) * cell)
    assert pins(app, 1) == [q]
    away(app)
    after = picture(chart)
    lit = _coloured(after)

    def causal_part(r: int) -> float:  # the coloured share of row r's cells (key 0..r), clear of the outline
        y0, y1 = int(top + (r + 0.25) * cell), int(top + (r + 0.75) * cell)
        return lit[y0:y1, left + 3:int(left + (r + 1) * cell) - 3].mean()

    assert causal_part(q) > 0.9
    others = [causal_part(r) for r in range(1, T) if r != q]
    assert np.mean(others) < 0.5 * np.mean([_coloured(before)[int(top + (r + 0.5) * cell),
                                                                left + 3:int(left + (r + 1) * cell) - 3].mean()
                                             for r in range(1, T) if r != q])
    k = int(np.argmax(A[q]))
    assert _bar_tooltip(app, chart, after, left, side, top + side + 40, T, k) == pytest.approx(A[q, k], abs=2e-3)

    q2 = T - 1
    away(app)
    point_at(app, chart, left + 0.5 * cell, top + (q2 + 0.5) * cell, shift=True)
    assert pins(app, 2) == sorted([q, q2])
    away(app)
    summed = A[[q, q2]].sum(axis=0)
    k = int(np.argmax(summed))
    got = _bar_tooltip(app, chart, picture(chart), left, side, top + side + 40, T, k)
    assert got == pytest.approx(summed[k], abs=2e-3)

    # the flow view: a click on a query's token (left of its lines) pins it in the same selection
    away(app)
    blue = np.abs(before - BLUE).sum(axis=2) < 60
    blue[:, :left + side + 40] = False  # right of the matrix: the flow's lines
    line_start = int(np.flatnonzero(blue.any(axis=0))[0])
    q3 = 2
    flow_height = max(220, min(900, 20 * T))  # ui/charts/archetypes.py _flow
    point_at(app, chart, line_start - 14, top + (q3 + 0.5) * flow_height / T)
    assert pins(app, 1) == [q3]
    # a click on a key's label (right of the lines) leaves the pin as it is: no query there to pin
    line_end = int(np.flatnonzero(blue.any(axis=0))[-1])
    point_at(app, chart, line_end + 14, top + (T - 2 + 0.5) * flow_height / T)
    app.page.wait_for_timeout(1500)
    app.wait_idle()
    assert link(app).get("pin") == str(q3)
    away(app)
    y = int(top + (q3 + 0.5) * cell)
    assert _coloured(picture(chart))[y, left + 3:int(left + (q3 + 1) * cell) - 3].mean() > 0.9  # still lit
    app.assert_no_exception()
