"""Charts for the Attention page: the grid of every head's pattern, one head enlarged with token labels,
the head-score table's colours, the offset-mass profile and the period-shift probe.

The grid and the single head pin queries with a click (the PIN selection, drawn in the browser; a page that
needs the pin reads it through st.vega_lite_chart's on_select, as the Attention page does for its link).

Inputs are the numpy arrays and frames of core.reading.analysis (0-based layer and head, and label).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.model.symbols import block_number, head_number

from . import OKABE_ITO, SEQUENTIAL, numbered, pins
from .kept import kept

GRID_MIN = 0.01  # grid cells below this weight are left undrawn (they show as the zero colour)
ZERO_FILL = "#440154"  # viridis at 0: the background of pattern heatmaps, so undrawn cells read as 0
HEAD_SCALE = alt.Scale(range=OKABE_ITO)
PAD = alt.AutoSizeParams(type="pad")  # fixed-size charts: Streamlit's default "fit" squeezes them to nothing


def _pattern_scale() -> alt.Scale:
    return alt.Scale(scheme=SEQUENTIAL, domain=[0, 1])


# Pinned tokens (ui/charts/pins.py): the names below are the ones the pages and tests read
PIN, HOVER, PIN_STROKE, HOW_TO_PIN, DIM = pins.PIN, pins.HOVER, pins.PIN_STROKE, pins.HOW_TO_PIN, pins.DIM
KEYS = pins.KEYS
HOW_TO_PIN_KEYS = ["alt-click a key:", "each query's", "attention to it", "(alt-shift-click", "adds a key)"]
_active, _full, _shared_params, _params, _strip, _lookup = (pins.active, pins.full, pins.shared_params, pins.params,
                                                           pins.strip, pins.lookup)


def grid_frame(patterns: np.ndarray) -> pd.DataFrame:
    """Tidy cells {block, head (counted from 1, the grid's axes), query, key, weight} of patterns
    [L, H, T, T], cells >= GRID_MIN only."""
    l, h, i, j = np.nonzero(patterns >= GRID_MIN)
    return pd.DataFrame({"block": block_number(l), "head": head_number(h), "query": i, "key": j,
                         "weight": patterns[l, h, i, j].round(3)})


def mean_frame(patterns: np.ndarray) -> pd.DataFrame:
    """{query, key, weight}: the mean over every head of patterns [L, H, T, T], causal cells (key <= query)."""
    T = patterns.shape[-1]
    i, j = np.tril_indices(T)
    return pd.DataFrame({"query": i, "key": j, "weight": patterns.mean(axis=(0, 1))[i, j].round(4)})


@kept
@_shared_params
def pattern_grid(patterns: np.ndarray, labels: list[str] | None = None, pin: tuple[int, ...] = ()):
    """Every head's pattern [L, H, T, T] as a blocks x heads grid of heatmaps (query down, key across).
    With the tokens' labels, a token strip below: click a query row in any head (or a token) to pin it,
    and every head's row for it stays lit while the strip shows where it looks, the mean over the heads
    (pin: the queries pinned to begin with)."""
    T = patterns.shape[-1]
    data = grid_frame(patterns)
    pos = alt.Scale(domain=[0, T])
    base = alt.Chart(data).transform_calculate(key_end="datum.key + 1", query_end="datum.query + 1").mark_rect().encode(
        x=alt.X("key:Q", title="key position j", scale=pos, axis=alt.Axis(tickCount=4, grid=False)),
        x2="key_end:Q",
        y=alt.Y("query:Q", title="query position i", scale=alt.Scale(domain=[0, T], reverse=True),
                axis=alt.Axis(tickCount=4, grid=False)),
        y2="query_end:Q",
        color=alt.Color("weight:Q", title="attention", scale=_pattern_scale()),
        tooltip=[alt.Tooltip("block:O"), alt.Tooltip("head:O"), alt.Tooltip("query:Q", title="query i"),
                 alt.Tooltip("key:Q", title="key j"), alt.Tooltip("weight:Q", format=".3f")],
    )
    if labels is None:
        return base.properties(width=165, height=165).facet(
            row=alt.Row("block:O", title="block", header=alt.Header(labelFontSize=12)),
            column=alt.Column("head:O", title="head", header=alt.Header(labelFontSize=12)),
            title="",
        ).configure_view(fill=ZERO_FILL, stroke=None).properties(autosize=PAD)
    params = _params("query", pin)
    cells = base.encode(opacity=alt.condition(_full(), alt.value(1), alt.value(DIM))).add_params(*params)
    rows = alt.Chart(data).transform_aggregate(groupby=["block", "head", "query"]).transform_calculate(
        query_end="datum.query + 1", start="0", end=str(T))
    y = alt.Y("query:Q", scale=alt.Scale(domain=[0, T], reverse=True))
    # a row's causal part (keys 0..i) takes the click, not only its drawn cells (most weights are too small to
    # draw); above the diagonal (the future) a click releases the pin
    targets = rows.mark_rect(fill="white", opacity=0.001).encode(
        x=alt.X("start:Q", scale=pos), x2="query_end:Q", y=y, y2="query_end:Q").add_params(*params)
    outline = rows.transform_filter(_active()).mark_rect(fill=None, stroke=PIN_STROKE, strokeWidth=1.5).encode(
        x=alt.X("start:Q", scale=pos), x2="end:Q", y=y, y2="query_end:Q")
    grid = alt.layer(targets, cells, outline).properties(width=165, height=165,
                                             view=alt.ViewBackground(fill=ZERO_FILL, stroke=None)).facet(
        row=alt.Row("block:O", title="block", header=alt.Header(labelFontSize=12)),
        column=alt.Column("head:O", title="head", header=alt.Header(labelFontSize=12)),
    )
    n_heads = patterns.shape[1]
    # as wide as the grid, not wider: Streamlit shrinks a chart wider than its column, and Vega then places
    # clicks as if it were not shrunk (they land off the row pointed at)
    strip = _strip(mean_frame(patterns), labels, "query", "key", 165 * n_heads + 20 * (n_heads - 1),
                   "mean attention", params)
    return alt.vconcat(grid, strip, spacing=14, title="").configure_view(stroke=None).properties(autosize=PAD)


@kept
@_shared_params
def head_heatmap(pattern: np.ndarray, labels: list[str], predicted: list[str] | None = None,
                 period: int | None = None, pin: tuple[int, ...] = (), keys: tuple[int, ...] = ()
                 ) -> alt.VConcatChart:
    """One head's pattern [T, T] with token labels on both axes; tooltips give positions, tokens and
    weight. With a period, the induction target j = i + 1 - L is outlined for comparison. Below, the
    token strip: click a query row (or a token) to pin it and read where this head sends it (pin: the
    queries pinned to begin with; keys: the keys pinned apart to begin with, alt-click).

    The data holds only (query, key, weight); token labels are looked up in the browser."""
    T = pattern.shape[-1]
    i, j = np.tril_indices(T)
    data = pd.DataFrame({"qi": i, "kj": j, "weight": pattern[i, j].round(4)})
    tick = [f"{p}·{labels[p]}" for p in range(T)]
    small = 7 if T > 48 else 9
    x_axis = alt.Axis(labelExpr=_lookup(tick, "value"), labelFontSize=small, labelAngle=-90 if T > 24 else 0)
    y_axis = alt.Axis(labelExpr=_lookup(tick, "value"), labelFontSize=small)
    tooltip = [alt.Tooltip("qi:O", title="query position i"), alt.Tooltip("q_tok:N", title="query token"),
               alt.Tooltip("kj:O", title="key position j"), alt.Tooltip("k_tok:N", title="key token"),
               alt.Tooltip("weight:Q", format=".3f", title="attention")]
    calc = {"q_tok": _lookup(labels, "qi"), "k_tok": _lookup(labels, "kj")}
    if predicted is not None:
        calc["pred"] = _lookup(predicted, "qi")
        tooltip.append(alt.Tooltip("pred:N", title="model's next-token guess at i"))
    positions = list(range(T))
    params = _params("qi", pin, keys=True)
    keys = pins.key_params("kj", keys)
    rect = alt.Chart(data).transform_calculate(**calc).mark_rect().encode(
        x=alt.X("kj:O", title="key (position · token)", axis=x_axis, scale=alt.Scale(domain=positions)),
        y=alt.Y("qi:O", title="query (position · token)", axis=y_axis, scale=alt.Scale(domain=positions)),
        color=alt.Color("weight:Q", title="attention", scale=_pattern_scale()),
        opacity=alt.condition(_full(), alt.value(1), alt.value(DIM)),
        tooltip=tooltip,
    ).add_params(*params, keys)
    pinned = alt.Chart(pd.DataFrame({"qi": positions})).transform_filter(_active()).mark_rect(
        fill=None, stroke=PIN_STROKE, strokeWidth=1.5).encode(x=alt.value(0), x2=alt.value(560), y="qi:O")
    key_cols = alt.Chart(pd.DataFrame({"kj": positions})).transform_filter(pins.keys_pinned()).mark_rect(
        fill=None, stroke=OKABE_ITO[2], strokeWidth=1.5).encode(x="kj:O", y=alt.value(0), y2=alt.value(560))
    layers = [rect, pinned, key_cols]
    if period:
        targets = pd.DataFrame({"qi": np.arange(period, T), "kj": np.arange(period, T) + 1 - period})
        layers.append(alt.Chart(targets).mark_rect(fill=None, stroke=OKABE_ITO[0], strokeWidth=0.8, opacity=0.9)
                      .encode(x="kj:O", y="qi:O"))
    heat = alt.layer(*layers).properties(width=560, height=560, view=alt.ViewBackground(fill=ZERO_FILL))
    # keys pinned apart: how much attention each query gives them, summed over the keys
    readers = alt.Chart(data).transform_filter(pins.keys_pinned()).transform_aggregate(
        weight="sum(weight)", groupby=["qi"]).mark_bar(color=OKABE_ITO[2]).encode(
        y=alt.Y("qi:O", scale=alt.Scale(domain=positions), axis=None),
        x=alt.X("weight:Q", title=HOW_TO_PIN_KEYS, scale=alt.Scale(domainMin=0),
                axis=alt.Axis(tickCount=2, format=".1f", titleFontSize=10, labelFontSize=8)),
        tooltip=[alt.Tooltip("qi:O", title="query position i"),
                 alt.Tooltip("weight:Q", format=".3f", title="attention on the pinned keys")],
    ).properties(width=90, height=560)
    heat = alt.hconcat(heat, readers, spacing=4)
    strip = _strip(data, labels, "qi", "kj", 560, "attention", params)
    return alt.vconcat(heat, strip, spacing=10, title="").properties(autosize=PAD)


# ---------------------------------------------------------------------------------------------
# The score table's colours (pandas Styler, no matplotlib needed)

_VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
            "#b5de2b", "#fde725"]


def viridis_hex(x: float) -> str:
    """Colour of x in [0, 1] on a 10-step viridis ramp (NaN -> light grey)."""
    if x is None or not np.isfinite(x):
        return "#eeeeee"
    return _VIRIDIS[int(np.clip(x, 0, 1) * (len(_VIRIDIS) - 1) + 0.5)]


def score_cell_style(x: float) -> str:
    """CSS for one score cell: viridis background, readable text on it."""
    bg = viridis_hex(x)
    dark = bg in _VIRIDIS[:6]
    return f"background-color: {bg}; color: {'white' if dark else 'black'}"


def styled_scores(df: pd.DataFrame, score_columns: list[str]):
    """The head-score table as a Styler: every score cell coloured by its value on [0, 1]."""
    return df.style.map(score_cell_style, subset=score_columns).format("{:.3f}", subset=score_columns, na_rep="–")


# ---------------------------------------------------------------------------------------------
# Offset mass and the period-shift probe


@kept
def offset_chart(offsets: pd.DataFrame, period: int | None = None, max_offset: int | None = None) -> alt.FacetChart:
    """Mean attention at each offset k = i - j, one line per head, one panel per block; with a period,
    rules mark k = L - 1 (the induction target, dashed) and k = L (the duplicate, dotted)."""
    data = offsets if max_offset is None else offsets[offsets["offset"] <= max_offset]
    data = numbered(data)
    data = data.assign(head=data["head"].astype(str))
    lines = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("offset:Q", title="offset k = i − j (positions back)"),
        y=alt.Y("mass:Q", title="mean attention A[i, i−k]", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("head:N", title="head", scale=HEAD_SCALE),
        tooltip=[alt.Tooltip("block:O"), alt.Tooltip("head:N"), "offset:Q", alt.Tooltip("mass:Q", format=".3f")],
    )
    layers = [lines]
    if period:
        marks = pd.DataFrame({"offset": [period - 1, period], "what": [f"L − 1 = {period - 1}", f"L = {period}"],
                              "dash": ["L − 1", "L"], "y": [0.97, 0.89]})
        rules = alt.Chart(marks).mark_rule(color="#444").encode(
            x="offset:Q", strokeDash=alt.StrokeDash("dash:N", legend=None, scale=alt.Scale(
                domain=["L − 1", "L"], range=[[5, 3], [1, 2]])), tooltip=[alt.Tooltip("what:N", title="marks")])
        labels = alt.Chart(marks).mark_text(align="left", dx=4, fontSize=10, color="#444").encode(
            x="offset:Q", y=alt.Y("y:Q", scale=alt.Scale(domain=[0, 1])), text="what:N")
        layers += [rules, labels]
    return alt.layer(*layers, data=data).properties(width=360, height=190).facet(
        column=alt.Column("block:O", title="block")).properties(autosize=PAD)


@kept
def sweep_chart(sweep: pd.DataFrame, period_min: int, period_max: int, chance: float,
                probe: int | None = None) -> alt.LayerChart:
    """Accuracy on the second and later copies at each probe period, training periods shaded."""
    data = sweep.melt(id_vars=["period"], value_vars=["acc_second_copy", "acc_later_copies"],
                      var_name="targets", value_name="accuracy")
    data["targets"] = data["targets"].map({"acc_second_copy": "second copy", "acc_later_copies": "later copies"})
    band = alt.Chart(pd.DataFrame({"a": [period_min - 0.5], "b": [period_max + 0.5], "t": ["training periods"]})) \
        .mark_rect(color="#999999", opacity=0.18).encode(x="a:Q", x2="b:Q", tooltip=[alt.Tooltip("t:N", title="")])
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("period:Q", title="probe period L (every sequence)"),
        y=alt.Y("accuracy:Q", title="next-token accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("targets:N", title="targets", scale=alt.Scale(range=[OKABE_ITO[2], OKABE_ITO[4]])),
        strokeDash=alt.StrokeDash("targets:N", title="targets", scale=alt.Scale(range=[[1, 0], [5, 3]])),
        tooltip=["period:Q", "targets:N", alt.Tooltip("accuracy:Q", format=".3f")],
    )
    chance_rule = alt.Chart(pd.DataFrame({"y": [chance]})).mark_rule(color="gray", strokeDash=[2, 2]).encode(
        y="y:Q", tooltip=[alt.Tooltip("y:Q", title="chance 1/V", format=".3f")])
    layers = [band, lines, chance_rule]
    if probe is not None:
        layers.append(alt.Chart(pd.DataFrame({"p": [probe]})).mark_rule(color=OKABE_ITO[5], strokeWidth=2).encode(
            x="p:Q", tooltip=[alt.Tooltip("p:Q", title="chosen probe period")]))
    return alt.layer(*layers).properties(height=230)


@kept
def probe_mass_chart(mass: pd.DataFrame) -> alt.Chart:
    """Per head: attention mass at offset probe-1 vs at the training periods' offsets L-1."""
    data = mass.assign(head_label=mass["label"],
                       label=[f"k = {k} (probe L − 1)" if r.startswith("probe") else f"k = {k} (trained L = {k + 1})"
                              for r, k in zip(mass["role"], mass["offset"])])
    order = list(dict.fromkeys(data.sort_values(["role", "offset"])["label"]))
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("head_label:N", title="head (block.head)", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("label:N", sort=order),
        y=alt.Y("mass:Q", title="attention at offset k", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("label:N", title="offset", sort=order, scale=alt.Scale(range=OKABE_ITO[4:] + OKABE_ITO[:4]),
                        legend=alt.Legend(labelLimit=200)),
        tooltip=["head_label:N", "role:N", "offset:Q", alt.Tooltip("mass:Q", format=".3f")],
    ).properties(height=220)
