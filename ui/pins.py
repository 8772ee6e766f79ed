"""Pinned tokens on a page: a chart with the pin selection (ui/charts/pins.py) drawn in a fragment, so a click
reruns only that fragment, and its pinned queries kept in st.session_state (where a link reads them and every
pattern drawn from the same state starts from them)."""
from __future__ import annotations

import streamlit as st

from ui import share
from ui.charts import pins
from ui.charts.kept import draw


def pinned(state: str, length: int) -> tuple[int, ...]:
    """The queries pinned in st.session_state[state] that a sequence of `length` tokens has."""
    return tuple(p for p in st.session_state.get(state) or () if 0 <= p < length)


def _chosen(key: str, name: str, field: str) -> list[int]:
    chosen = (st.session_state.get(key) or {}).get("selection", {}).get(name) or []
    return sorted({int(d[field]) for d in chosen if isinstance(d, dict) and d.get(field) is not None})


def take_pin(key: str, field: str, state: str, page: str | None, keys: tuple[str, str] | None = None):
    """The chart's on_select: its pinned queries become the page's (st.session_state[state]); with keys = (key
    field, keys state), so do its keys pinned apart (pins.KEYS); with a page, the address follows
    (share.republish)."""
    def take() -> None:
        st.session_state[state] = _chosen(key, pins.PIN, field)
        if keys is not None:
            st.session_state[keys[1]] = _chosen(key, pins.KEYS, keys[0])
        if page:
            share.republish(page)
    return take


@st.fragment
def pinnable(chart, key: str, field: str, state: str, page: str | None = None,
             keys: tuple[str, str] | None = None) -> None:
    """Draw a chart with a pin selection; a click reruns only this fragment (the chart's spec, with the pin
    it was built with, is the kept one: the browser holds the pin it shows). keys: (key field, state) of a chart
    that also pins keys apart (pins.KEYS): they are kept in st.session_state[state] too."""
    draw(st, chart, width="content", key=key, on_select=take_pin(key, field, state, page, keys),
         selection_mode=[pins.PIN] if keys is None else [pins.PIN, pins.KEYS])
