"""Pages that read on a narrow screen (800 px with the sidebar open) as well as a wide one.

Four tools. `fit_charts()` (called once per run by dashboard.py) keeps every Vega-Lite chart inside
its column: a chart drawn wider than the room it has scrolls sideways within the column instead of
running over its neighbour or past the page's edge (not scaled down: see FIT_CSS); it also lets a
metric's label and delta, a page link and a button's label wrap onto a second line where Streamlit
would cut them off with "…" (a one-word button label cannot: give it room, `button_row()`).
`chart_and_note()` puts a chart and its explanation side by side where both fit, and stacks them
where they do not; `chart_pair()` does the same for two charts. `button_row()` sets buttons side by side,
each as wide as its label.
"""
from __future__ import annotations

import streamlit as st

# Vega draws into a canvas (or svg) of fixed pixel size. A chart wider than its column scrolls sideways inside
# it rather than being scaled down with CSS: Vega reads the pointer on a scaled drawing as if it were not scaled,
# so every tooltip and click would land on another cell than the one under the pointer.
# Streamlit keeps a metric's label and delta, a page link's and a button's label on one line and cuts
# what does not fit; here they wrap between words instead (never inside one: a word wider than its box
# still needs a shorter label or more room).
FIT_CSS = """
<style>
[data-testid="stVegaLiteChart"] { max-width: 100% !important; overflow-x: auto; overflow-y: hidden; }
[data-testid="stVegaLiteChart"] .vega-embed { overflow: visible; }
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] *, [data-testid="stMetricDelta"],
[data-testid="stMetricDelta"] *, [data-testid="stPageLink"] *, [data-testid="stButton"] button *,
[data-testid="stDownloadButton"] button * {
  white-space: normal !important; text-overflow: clip !important; word-break: normal !important;
  overflow-wrap: normal !important; }
</style>
"""


def fit_charts() -> None:
    st.html(FIT_CSS)


def chart_and_note():
    """(chart container, note container) in one row that wraps: the note moves below the chart
    when the main column has no room for both."""
    row = st.container(horizontal=True, gap="medium")
    return row.container(width="content"), row.container(width=320)


def chart_pair(width: int = 440):
    """Two containers of `width` px in one row that wraps: two charts side by side where the main column
    has room for both (1400 px), stacked where it has not (800 px), each at a width it reads at."""
    row = st.container(horizontal=True, gap="medium")
    return row.container(width=width), row.container(width=width)


def button_row():
    """A row for buttons, each as wide as its label (st.columns' equal shares cut a label to "T…" on a
    narrow screen); it wraps when the row has no room."""
    return st.container(horizontal=True, gap="small")
