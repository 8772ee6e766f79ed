"""Pinned tokens, shared by every chart that draws attention (ui/charts/attention.py, ui/charts/archetypes.py).

A click on a query (a row of a pattern, or a token in the strip under it) pins it, shift-click adds one, a click
on empty space releases them all; hovering previews a query while nothing is pinned. It all happens in the
browser (Vega-Lite selection parameters): a page learns of a pin only where it asks to (st.vega_lite_chart's
on_select, in a fragment: ui/pins.py).
"""
from __future__ import annotations

import functools
import warnings

import altair as alt
import numpy as np
import pandas as pd

from . import OKABE_ITO

PIN = "pin"  # the click selection's name (a link's `pin` is its initial value)
HOVER = "hover"
KEYS = "keys"  # keys pinned apart (alt-click), where a view has both queries and keys
PIN_STROKE = "white"  # the outline of a pinned (or hovered) row
HOW_TO_PIN = "pin a query: click a row or a token (shift-click adds one; a click above a diagonal releases)"
DIM = 0.3  # opacity of the rows not pinned (or not hovered) while some are


def active() -> str:
    """Vega expression: datum's query is pinned, or hovered while nothing is pinned."""
    return (f"length(data('{PIN}_store')) ? vlSelectionTest('{PIN}_store', datum) : "
            f"vlSelectionTest('{HOVER}_store', datum)")


def full() -> str:
    """Vega expression: datum's row is drawn at full strength (active, or nothing pinned or hovered)."""
    return f"(!length(data('{PIN}_store')) && !length(data('{HOVER}_store'))) || ({active()})"


def shared_params(builder):
    """Run a builder whose views share the pin and hover params without Altair's note that it merged them
    (that is the point: one selection over the patterns and the strip)."""
    @functools.wraps(builder)
    def build(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Automatically deduplicated selection parameter")
            return builder(*args, **kwargs)
    return build


def params(field: str, pin: tuple[int, ...], keys: bool = False):
    """The click-to-pin selection of queries (`field`), started at `pin`, and the hover preview. keys: the view
    pins keys apart with alt-click (key_params), so a query pin takes only clicks without alt."""
    start = {"value": [{field: int(p)} for p in pin]} if pin else {}
    click = alt.selection_point(name=PIN, on="click[!event.altKey]" if keys else "click", toggle="event.shiftKey",
                                fields=[field], **start)
    hover = alt.selection_point(name=HOVER, on="pointerover", clear="pointerout", fields=[field])
    return click, hover


def key_params(field: str, keys: tuple[int, ...] = ()):
    """The alt-click selection of keys (`field`), started at `keys` (a link's `keys`): alt-shift-click adds one; an
    alt-click on empty space releases."""
    start = {"value": [{field: int(k)} for k in keys]} if keys else {}
    return alt.selection_point(name=KEYS, on="click[event.altKey]", toggle="event.shiftKey", fields=[field],
                               clear="dblclick", **start)


def keys_pinned() -> str:
    """Vega expression: datum's key is pinned apart."""
    return f"vlSelectionTest('{KEYS}_store', datum)"


def lookup(labels: list[str], field: str) -> str:
    """Vega expression: the label of datum[field] (an index)."""
    quoted = ",".join("'" + l.replace("\\", "\\\\").replace("'", "\\'") + "'" for l in labels)
    return f"[{quoted}][datum['{field}']]"


def strip(weights: pd.DataFrame, labels: list[str], field: str, key: str, width: int, what: str,
          selection, text: bool = True) -> alt.VConcatChart:
    """The token strip: the sequence's tokens in a row (click one to pin it as a query), and above them bars of
    the attention the pinned (or hovered) queries give each key, summed over the queries. weights: one row per
    (query `field`, key `key`) with `weight`; selection: params(field, ...); text: write the tokens in their
    cells (where they fit)."""
    T = len(labels)
    x_scale = alt.Scale(domain=list(range(T)))
    no_axis = alt.Axis(labels=False, ticks=False, title=None, domain=False)
    bars = alt.Chart(weights).transform_filter(active()).transform_aggregate(
        weight="sum(weight)", groupby=[key]).mark_bar(color=OKABE_ITO[4]).encode(
        x=alt.X(f"{key}:O", scale=x_scale, axis=no_axis),
        y=alt.Y("weight:Q", title=what, axis=alt.Axis(tickCount=3, titleFontSize=10, format=".2f"),
                scale=alt.Scale(domainMin=0)),
        tooltip=[alt.Tooltip(f"{key}:O", title="key position j"),
                 alt.Tooltip("weight:Q", format=".3f", title=what)],
    ).properties(width=width, height=70)
    # the token itself: Markov labels lead with the position ("12·3"), which the strip's place already says
    shown_as = [l.rsplit("·", 1)[-1] for l in labels]
    tokens = pd.DataFrame({field: np.arange(T), "token": [l if l.strip() else "␣" for l in shown_as]})
    shown = alt.condition(active(), alt.value(OKABE_ITO[4]), alt.value("#f2f2f2"))
    cells = alt.Chart(tokens).mark_rect(stroke="white").encode(
        x=alt.X(f"{field}:O", scale=x_scale, axis=alt.Axis(title=HOW_TO_PIN, labelFontSize=7, labelAngle=0,
                                                           titleFontSize=10, values=list(range(0, T, 5)))),
        fill=shown,
        tooltip=[alt.Tooltip(f"{field}:O", title="position"), alt.Tooltip("token:N", title="token")],
    ).add_params(*selection)
    words = alt.Chart(tokens).mark_text(fontSize=10 if T <= 48 else 8).encode(
        x=alt.X(f"{field}:O", scale=x_scale), text="token:N")
    row = alt.layer(cells, words) if text and width / T >= 5 else cells  # too narrow to read: the tooltip tells
    row = row.properties(width=width, height=18)
    return alt.vconcat(bars, row, spacing=2)
