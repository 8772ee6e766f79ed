"""Pages that read on a narrow screen (800 px with the sidebar open) as well as a wide one.

Two tools. `fit_charts()` (called once per run by dashboard.py) keeps every Vega-Lite chart inside
its column: a chart drawn wider than the room it has is scaled down to the column's width, keeping
its aspect ratio, instead of running over its neighbour or past the page's edge. `chart_and_note()`
puts a chart and its explanation side by side where both fit, and stacks them where they do not.
"""
from __future__ import annotations

import streamlit as st

# Vega draws into a canvas (or svg) of fixed pixel size; scaling it with CSS keeps it inside its
# column. The embed container is also capped, or it keeps the drawing's full width and overlaps.
FIT_CSS = """
<style>
[data-testid="stVegaLiteChart"], [data-testid="stVegaLiteChart"] .vega-embed { max-width: 100% !important; }
[data-testid="stVegaLiteChart"] .vega-embed { overflow: visible; }
[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks {
  max-width: 100% !important; height: auto !important; }
</style>
"""


def fit_charts() -> None:
    st.html(FIT_CSS)


def chart_and_note():
    """(chart container, note container) in one row that wraps: the note moves below the chart
    when the main column has no room for both."""
    row = st.container(horizontal=True, gap="medium")
    return row.container(width="content"), row.container(width=320)
