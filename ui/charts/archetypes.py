"""Charts for the head-archetypes page: attention matrix, BertViz-style flow view, detector tables,
and the IOI circuit diagram. Every builder returns an Altair chart."""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from . import CATEGORICAL, OKABE_ITO, SEQUENTIAL, pins
from .kept import kept

LINE_COLOUR = OKABE_ITO[4]  # blue
FOCUS_COLOUR = OKABE_ITO[5]  # vermillion
PAD = alt.AutoSizeParams(type="pad")  # fixed-size charts: Streamlit's default "fit" squeezes them


def _pattern_frame(pattern: np.ndarray, labels: list[str]) -> pd.DataFrame:
    """Causal entries (j <= i) of pattern [T, T] as rows query, key, i, j, weight."""
    T = pattern.shape[0]
    values = np.asarray(pattern, dtype=float).tolist()
    return pd.DataFrame([{"query": labels[i], "key": labels[j], "i": i, "j": j, "weight": values[i][j]}
                         for i in range(T) for j in range(i + 1)])


def _side(T: int) -> int:
    return max(300, min(620, 22 * T))


def _matrix(pattern: np.ndarray, labels: list[str], pin: tuple[int, ...], side: int) -> alt.VConcatChart:
    """One head's heatmap (rows = query i, columns = key j, only j <= i) and, under it, the token strip: click a
    row (or a token) to pin the query, its bars the attention the pinned queries give each key, summed."""
    T = len(labels)
    data = _pattern_frame(pattern, labels)
    positions = list(range(T))
    axis = {"labelExpr": pins.lookup(labels, "value"), "labelOverlap": T > 45, "labelLimit": 120}
    selection = pins.params("i", pin)
    rect = alt.Chart(data).mark_rect().encode(
        x=alt.X("j:O", title="key: the token read (source)", scale=alt.Scale(domain=positions),
                axis=alt.Axis(labelAngle=-60, **axis)),
        y=alt.Y("i:O", title="query: the token reading (destination)", scale=alt.Scale(domain=positions),
                axis=alt.Axis(**axis)),
        color=alt.Color("weight:Q", title="attention", scale=alt.Scale(scheme=SEQUENTIAL, domain=[0, 1])),
        opacity=alt.condition(pins.full(), alt.value(1), alt.value(pins.DIM)),
        tooltip=[alt.Tooltip("query:N"), alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".3f")],
    ).add_params(*selection)
    outline = alt.Chart(pd.DataFrame({"i": positions})).transform_filter(pins.active()).mark_rect(
        fill=None, stroke=FOCUS_COLOUR, strokeWidth=1.5).encode(x=alt.value(0), x2=alt.value(side), y="i:O")
    heat = alt.layer(rect, outline).properties(width=side, height=side)
    words = [l.split(" ", 1)[-1] for l in labels]  # the strip's tooltip: the token (its place says the position)
    return alt.vconcat(heat, pins.strip(data, words, "i", "j", side, "attention", selection, text=False),
                       spacing=6)


@kept
@pins.shared_params
def pattern_matrix(pattern: np.ndarray, labels: list[str], size: int | None = None,
                   pin: tuple[int, ...] = ()) -> alt.VConcatChart:
    """Heatmap of one head: rows = query (destination) token, columns = key (source) token; only j <= i. Click a
    row to pin its query (shift-click adds one; pin: the queries pinned to begin with): the strip under it
    shows the keys' weights, summed over the pinned queries."""
    return _matrix(pattern, labels, pin, size or _side(len(labels))).properties(title="", autosize=PAD)


def _flow(pattern: np.ndarray, labels: list[str], focus: int | None, pin: tuple[int, ...],
          width: int = 300) -> alt.HConcatChart:
    T = len(labels)
    full = _pattern_frame(pattern, labels)
    data = full[full["weight"] >= 0.01]
    if focus is not None:
        data = data[data["i"] == focus]
    height = max(220, min(900, 20 * T))
    y_scale = alt.Scale(domain=[-0.5, T - 0.5], reverse=True)
    x_scale = alt.Scale(domain=[0, 1])
    selection = pins.params("i", pin)
    strength = alt.Opacity("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.15, 0.95]),
                           legend=alt.Legend(title="attention"))
    lines = alt.Chart(data).mark_rule(color=LINE_COLOUR, strokeCap="round").encode(
        x=alt.X("x0:Q", scale=x_scale,
                title="left: query (destination)  →  right: key (source)",
                axis=alt.Axis(labels=False, ticks=False, grid=False, domain=False)),
        x2="x1:Q",
        y=alt.Y("i:Q", scale=y_scale, title=None, axis=None),
        y2="j:Q",
        strokeWidth=alt.StrokeWidth("weight:Q", scale=alt.Scale(domain=[0, 1], range=[0.4, 4.5]), legend=None),
        opacity=alt.condition(pins.full(), strength, alt.value(0.04)),
        tooltip=[alt.Tooltip("query:N"), alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".3f")],
    ).transform_calculate(x0="0.06", x1="1").add_params(*selection)
    tokens = pd.DataFrame({"label": labels, "i": range(T),
                           "focus": [focus is not None and k == focus for k in range(T)]})
    read = data.groupby("j")["weight"].sum() if len(data) else pd.Series(dtype=float)
    tokens["read"] = [float(read.get(k, 0.0)) for k in range(T)]
    lit = f"datum.focus || ({pins.active()})"  # (an empty selection tests false)
    left = alt.Chart(tokens).mark_text(align="right", dx=-4, fontSize=12).encode(
        x=alt.datum(0.06, scale=x_scale), y=alt.Y("i:Q", scale=y_scale), text="label:N",
        color=alt.condition(lit, alt.value(FOCUS_COLOUR), alt.value("#333333")),
        tooltip=[alt.Tooltip("label:N", title="query (click to pin)")]).add_params(*selection)
    keys = tokens.rename(columns={"i": "j"}).drop(columns="focus")
    right = alt.Chart(keys).mark_text(align="left", dx=4, fontSize=12, color="#333333").encode(
        x=alt.datum(0, scale=x_scale, axis=None), y=alt.Y("j:Q", scale=y_scale, axis=None), text="label:N",
        tooltip=[alt.Tooltip("label:N", title="key"), alt.Tooltip("read:Q", title="attention received", format=".2f")])
    # the pinned (or hovered) queries' weight on each key, summed, written after the key (over its grey label)
    weights = alt.Chart(full).transform_filter(pins.active()).transform_aggregate(
        weight="sum(weight)", groupby=["j", "key"]).transform_filter("datum.weight >= 0.005").transform_calculate(
        shown="datum.key + '  ' + format(datum.weight, '.2f')").mark_text(
        align="left", dx=4, fontSize=12, color=LINE_COLOUR).encode(
        x=alt.datum(0, scale=x_scale), y=alt.Y("j:Q", scale=y_scale), text="shown:N",
        tooltip=[alt.Tooltip("key:N"), alt.Tooltip("weight:Q", format=".3f", title="attention of the pinned queries")])
    # the keys in a view of their own, beside the lines: the pin selection lives in the lines' view only, so a
    # click on a key (no query there) leaves the pin alone instead of pinning nothing
    keys_view = alt.layer(right, weights).properties(width=90, height=height, view=alt.ViewBackground(stroke=None))
    return alt.hconcat(alt.layer(lines, left).properties(width=width, height=height), keys_view, spacing=0)


@kept
@pins.shared_params
def pattern_flow(pattern: np.ndarray, labels: list[str], focus: int | None = None,
                 pin: tuple[int, ...] = ()) -> alt.HConcatChart:
    """BertViz-style head view: queries on the left, keys on the right, a line from query i to key j whose
    width and opacity grow with A[i, j] (none below 0.01). `focus` keeps only the lines of one query position.
    Click a query (or a line) to pin it (shift-click adds one): the other lines fade and each key is written
    with the weight the pinned queries give it, summed."""
    return _flow(pattern, labels, focus, pin).properties(title="")


@kept
@pins.shared_params
def pattern_views(pattern: np.ndarray, labels: list[str], focus: int | None = None,
                  pin: tuple[int, ...] = ()) -> alt.HConcatChart:
    """The matrix and the flow view side by side in one chart, sharing one pin: a query pinned (or hovered) in
    either is lit in both, in the browser, with no rerun."""
    # narrower than alone, the legends below: both views fit a 1400 px screen's main column side by side
    return alt.hconcat(_matrix(pattern, labels, pin, _side(len(labels))), _flow(pattern, labels, focus, pin, 200),
                       spacing=20, title="").resolve_scale(
        color="independent", opacity="independent").properties(autosize=PAD).configure_legend(orient="bottom")


@kept
def score_heatmap(table: pd.DataFrame, row: str, row_order: list[str], detector_order: list[str],
                  detector_labels: dict[str, str], row_title: str, own: dict[str, str] | None = None) -> alt.Chart:
    """Rows x detectors heatmap of scores in [0, 1] with the value written in each cell.

    table has columns `row`, "detector", "score"; `own` maps a row value to its own detector, whose
    cell gets an outline (the cell that should win its column)."""
    data = table.copy()
    data["detector_label"] = data["detector"].map(detector_labels)
    data["text"] = [("—" if (s is None or (isinstance(s, float) and math.isnan(s))) else f"{s:.2f}")
                    for s in data["score"]]
    data["own"] = [own is not None and own.get(r) == d for r, d in zip(data[row], data["detector"])]
    x_order = [detector_labels[d] for d in detector_order]
    base = alt.Chart(data).encode(
        x=alt.X("detector_label:N", sort=x_order, title="detector", axis=alt.Axis(labelAngle=-30)),
        y=alt.Y(f"{row}:N", sort=row_order, title=row_title, axis=alt.Axis(labelLimit=220)))
    cells = base.mark_rect().encode(
        color=alt.Color("score:Q", title="score", scale=alt.Scale(scheme=SEQUENTIAL, domain=[0, 1])),
        tooltip=[alt.Tooltip(f"{row}:N"), alt.Tooltip("detector_label:N", title="detector"),
                 alt.Tooltip("score:Q", format=".3f")])
    outline = base.transform_filter("datum.own").mark_rect(fill=None, stroke=OKABE_ITO[5], strokeWidth=3)
    text = base.mark_text(fontSize=12).encode(
        text="text:N",
        color=alt.condition("datum.score > 0.55", alt.value("black"), alt.value("white")))
    # sizes include the axes and legend (Streamlit fits the whole chart into them)
    return alt.layer(cells, outline, text, title="").properties(
        width=95 * len(detector_order) + 290, height=30 * len(row_order) + 130)


@kept
def ioi_diagram(heads: pd.DataFrame, edges: pd.DataFrame, lanes: list[str], logits_x: int) -> alt.Chart:
    """The IOI circuit: x = GPT-2 small layer, one lane per functional group, a dot per head labelled
    "layer.head", lines for the connections between groups and into the logits."""
    n = len(lanes)
    lane_expr = "[" + ",".join(f"'{name}'" for name in lanes) + "][datum.value]"
    x_scale = alt.Scale(domain=[-0.5, logits_x + 0.8])
    y_scale = alt.Scale(domain=[-0.6, n - 0.4], reverse=True)
    x_axis = alt.Axis(values=list(range(logits_x)), format="d", grid=True, gridOpacity=0.3,
                      title="GPT-2 small layer (0-based; logits on the right)")
    y_axis = alt.Axis(values=list(range(n)), labelExpr=lane_expr, title="functional group", grid=False,
                      labelLimit=220)
    links = alt.Chart(edges).mark_rule(color="#777777", strokeWidth=1.5, strokeDash=[4, 3]).encode(
        x=alt.X("x:Q", scale=x_scale, axis=x_axis), x2="x2:Q",
        y=alt.Y("y:Q", scale=y_scale, axis=y_axis), y2="y2:Q",
        tooltip=["source:N", "target:N", "via:N"])
    ends = alt.Chart(edges).mark_point(shape="triangle-right", filled=True, size=60, color="#777777").encode(
        x="x2:Q", y="y2:Q", tooltip=["source:N", "target:N", "via:N"])
    dots = alt.Chart(heads).mark_circle(size=140, opacity=1).encode(
        x=alt.X("layer:Q", scale=x_scale, axis=x_axis), y=alt.Y("y:Q", scale=y_scale, axis=y_axis),
        color=alt.Color("group:N", sort=lanes, scale=alt.Scale(scheme=CATEGORICAL), legend=None),
        tooltip=[alt.Tooltip("id:N", title="head (layer.head)"), "group:N", "role:N"])
    labels = alt.Chart(heads).mark_text(align="left", dx=8, fontSize=11).encode(
        x="layer:Q", y="y:Q", text="id:N")
    logits = alt.Chart(pd.DataFrame({"x": [logits_x], "y": [lanes.index("name-mover")], "t": ["logits"]}))
    logit_mark = logits.mark_text(align="left", dx=8, fontWeight="bold").encode(x="x:Q", y="y:Q", text="t:N")
    return alt.layer(links, ends, dots, labels, logit_mark).properties(height=70 * n + 60, width=900)
