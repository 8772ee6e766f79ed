"""Timeline charts for the Train page (ui.timeline): the loss curve with the film strip's markers, the
film strip of two heads' patterns, the in-context-learning score and the loss by position.

The film strip pins queries (ui/charts/pins.py): a click on a row pins it in every frame of both heads, the others
dimmed. Its live form, PNG tiles redrawn while a run trains (strip_pngs), takes no click: the pinned rows are drawn
in the tiles (pinned_colour) from a picker beside them (ui.timeline.live_pin_picker), the same pin.

Input: the dict core.training.timeline.timeline returns (numpy arrays and lists).
"""
from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict

import altair as alt
import numpy as np
import pandas as pd

from core.model.symbols import head_label, token_char

from . import OKABE_ITO, pins
from .kept import kept

MARK = OKABE_ITO[5]  # vermillion: the film-strip markers


@kept
def curve(t: dict) -> alt.LayerChart:
    df = pd.DataFrame({"step": t["steps"], "loss": t["loss_later"]})
    marks = pd.DataFrame({"step": t["frames"], "frame": [str(i + 1) for i in range(len(t["frames"]))]})
    line = alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("step:Q", title="training step"), y=alt.Y("loss:Q", title="later-copy loss (nats)"),
        tooltip=["step:Q", alt.Tooltip("loss:Q", format=".3f")])
    rules = alt.Chart(marks).mark_rule(color=MARK).encode(x="step:Q")
    text = alt.Chart(marks).mark_text(color=MARK, dy=-6, fontWeight="bold").encode(
        x="step:Q", y=alt.value(0), text="frame:N")
    return (line + rules + text).properties(height=200)


def _frame_labels(t: dict) -> list[str]:
    return [f"{f + 1}: step {s}" for f, s in enumerate(t["frames"])]


STRIP_SIDE = 130  # the most pixels a film-strip frame is wide (and high)


@kept
@pins.shared_params
def strip(t: dict, pin: tuple[int, ...] = ()) -> alt.FacetChart:
    """The film strip: two heads (rows) x up to six frames (columns) of one sequence's patterns. A click on a
    query row pins it in every head and every frame (the others dimmed, pins.DIM), shift-click adds one, hovering
    previews one, a click above the diagonal releases (pin: the queries pinned to begin with). Each cell's tooltip
    names its query and key tokens (t["tokens"]); a pinned row is marked in vermillion across its future."""
    rows, labels = [], []
    for name, pats in t["patterns"].items():
        layer, head = t["heads"][name]
        label = f"{name} head {head_label(layer, head)}"
        labels.append(label)
        for f, step in enumerate(t["frames"]):
            P = np.nan_to_num(pats[f])
            i, j = np.nonzero(np.tril(P >= 0.01))
            rows.append(pd.DataFrame({"head": label, "frame": f"{f + 1}: step {step}", "query": i, "key": j,
                                      "weight": P[i, j].astype(float).round(4)}))
    df = pd.concat(rows, ignore_index=True)
    n = len(t["tokens"])
    order = _frame_labels(t)
    tokens = [token_char(int(k)) for k in t["tokens"]]
    side = min(STRIP_SIDE, 2 * n)
    pos = alt.Scale(domain=[0, n])
    x = alt.X("key:Q", scale=pos, axis=None)
    y = alt.Y("query:Q", scale=alt.Scale(domain=[0, n], reverse=True), axis=None)
    params = pins.params("query", pin)
    cells = alt.Chart(df).transform_calculate(
        key_end="datum.key + 1", query_end="datum.query + 1", q_tok=pins.lookup(tokens, "query"),
        k_tok=pins.lookup(tokens, "key")).mark_rect().encode(
        x=x, x2="key_end:Q", y=y, y2="query_end:Q",
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), legend=None),
        opacity=alt.condition(pins.full(), alt.value(1), alt.value(pins.DIM)),
        tooltip=[alt.Tooltip("head:N"), alt.Tooltip("frame:N"), alt.Tooltip("query:Q", title="query i"),
                 alt.Tooltip("q_tok:N", title="query token"), alt.Tooltip("key:Q", title="key j"),
                 alt.Tooltip("k_tok:N", title="key token"), alt.Tooltip("weight:Q", format=".2f")],
    ).add_params(*params)
    # every row has a drawn cell (its largest weight is at least 1 / n): its rows are the rows of the strip
    whole = alt.Chart(df).transform_aggregate(groupby=["head", "frame", "query"]).transform_calculate(
        query_end="datum.query + 1", start="0", end=str(n), q_tok=pins.lookup(tokens, "query"))
    # a row's causal part (keys 0..i) takes the click, not only its drawn cells; above the diagonal a click
    # releases the pin
    targets = whole.mark_rect(fill="white", opacity=0.001).encode(
        x=alt.X("start:Q", scale=pos, axis=None), x2="query_end:Q", y=y, y2="query_end:Q",
        tooltip=[alt.Tooltip("query:Q", title="query i"), alt.Tooltip("q_tok:N", title="query token")],
    ).add_params(*params)
    # the pinned (or hovered) row marked across its future (empty otherwise: a line over the cells, 2 px
    # high, would hide them)
    marked = whole.transform_filter(pins.active()).mark_rect(color=MARK).encode(
        x=alt.X("query_end:Q", scale=pos, axis=None), x2="end:Q", y=y, y2="query_end:Q")
    return alt.layer(targets, cells, marked).properties(width=side, height=side).facet(
        row=alt.Row("head:N", title=None, sort=labels), column=alt.Column("frame:N", title=None, sort=order))


# viridis at 0, 1/4, 1/2, 3/4 and 1 (the film strip's Vega scheme), interpolated linearly in RGB
_VIRIDIS = np.array([[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]], float)


def _colour(weights: np.ndarray) -> np.ndarray:
    """[n, n] weights in [0, 1] -> [n, n, 3] uint8 viridis; the upper triangle (future keys) white.
    NaN (a diverging run's last frame) is drawn as 0."""
    x = np.nan_to_num(np.clip(weights, 0, 1), nan=0.0) * (len(_VIRIDIS) - 1)
    lo = np.minimum(x.astype(int), len(_VIRIDIS) - 2)
    frac = (x - lo)[..., None]
    rgb = _VIRIDIS[lo] * (1 - frac) + _VIRIDIS[lo + 1] * frac
    rgb[np.triu_indices(weights.shape[0], 1)] = 255
    return rgb.astype(np.uint8)


def strip_tiles(t: dict, scale: int = 2) -> dict[str, tuple[list[np.ndarray], list[str]]]:
    """The film strip as images, for a strip redrawn every few seconds while a run trains (the shipped run's
    strip as the Vega facet of `strip` is 442 KB of JSON, as twelve PNG tiles 24 KB):
    {row label: (RGB tiles [n*scale, n*scale, 3], captions)}, rows queries and columns keys."""
    out = {}
    for name, pats in t["patterns"].items():
        layer, head = t["heads"][name]
        tiles = [np.kron(_colour(p), np.ones((scale, scale, 1), np.uint8)) for p in pats]
        captions = [f"{f + 1}: step {s}" for f, s in enumerate(t["frames"])]
        out[f"{name} head {head_label(layer, head)}"] = (tiles, captions)
    return out


MAX_PNGS = 256  # encoded tiles kept (about 1-3 KB each)
_pngs: OrderedDict[bytes, bytes] = OrderedDict()
_pngs_lock = threading.Lock()


def pinned_colour(weights: np.ndarray, pin: tuple[int, ...] = ()) -> np.ndarray:
    """_colour with queries pinned: the pinned rows at full strength and marked in vermillion (MARK) across their
    future, every other row blended towards white as the finished strip dims it (opacity pins.DIM on white)."""
    rgb = _colour(weights)
    n = weights.shape[0]
    pin = [p for p in pin if 0 <= p < n]
    if not pin:
        return rgb
    others = np.ones(n, bool)
    others[pin] = False
    rgb[others] = np.round(pins.DIM * rgb[others] + (1 - pins.DIM) * 255).astype(np.uint8)
    mark = np.array([int(MARK[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
    for p in pin:
        rgb[p, p + 1:] = mark
    return rgb


def _tile_png(pattern: np.ndarray, scale: int, pin: tuple[int, ...] = ()) -> bytes:
    """One frame of a head as a PNG (pinned_colour, each weight a scale x scale square), kept per content and pin:
    the live strip's frames recur from one logged row to the next, so a new row (or a new pin) encodes only its
    new tiles."""
    pin = tuple(sorted({int(p) for p in pin}))
    key = hashlib.blake2b(f"{pattern.dtype.str}{pattern.shape}{scale}{pin}".encode() + pattern.tobytes(),
                          digest_size=16).digest()
    with _pngs_lock:
        png = _pngs.get(key)
        if png is not None:
            _pngs.move_to_end(key)
            return png
    from PIL import Image

    buf = io.BytesIO()
    # zlib level 1: a quarter of the default level's CPU for a tenth more bytes (a new logged row's twelve tiles
    # took 16 ms at level 6, bench/live_strip_pin_cost.py)
    Image.fromarray(pinned_colour(pattern, pin).repeat(scale, 0).repeat(scale, 1)).save(buf, format="PNG",
                                                                                          compress_level=1)
    png = buf.getvalue()
    with _pngs_lock:
        _pngs[key] = png
        while len(_pngs) > MAX_PNGS:
            _pngs.popitem(last=False)
    return png


def strip_pngs(t: dict, pin: tuple[int, ...] = ()) -> dict[str, tuple[list[bytes], list[str]]]:
    """strip_tiles with every tile encoded as PNG (what st.image sends), the queries `pin` pinned (pinned_colour):
    {row label: (PNGs, captions)}."""
    out = {}
    for name, pats in t["patterns"].items():
        layer, head = t["heads"][name]
        captions = [f"{f + 1}: step {s}" for f, s in enumerate(t["frames"])]
        out[f"{name} head {head_label(layer, head)}"] = ([_tile_png(p, 2, pin) for p in pats], captions)
    return out


@kept
def icl(t: dict) -> alt.Chart:
    df = pd.DataFrame({"step": t["steps"], "icl": t["icl"]})
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("step:Q", title="training step"),
        y=alt.Y("icl:Q", title=f"loss at {t['late']} − loss at {t['early']} (nats)"),
        tooltip=["step:Q", alt.Tooltip("icl:Q", format=".3f")]).properties(height=200)


@kept
def by_position(t: dict) -> alt.Chart:
    b, a = t["before_after"]
    rows = []
    for idx, when in ((b, "before the drop"), (a, "after the drop")):
        for pos, v in enumerate(t["loss_by_position"][idx], start=1):
            rows.append({"position": pos, "loss": float(v), "step": f"step {t['steps'][idx]} ({when})"})
    return alt.Chart(pd.DataFrame(rows)).mark_line().encode(
        x=alt.X("position:Q", title="position of the predicted token"), y=alt.Y("loss:Q", title="loss (nats)"),
        color=alt.Color("step:N", title=None, legend=alt.Legend(orient="top", direction="vertical")),
        tooltip=["position:Q", alt.Tooltip("loss:Q", format=".3f"), "step:N"]).properties(height=220)
