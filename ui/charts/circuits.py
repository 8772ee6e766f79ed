"""Charts for the Circuits page: W_QK / W_OV heatmaps and their singular values, the rotary positional
profile, the OV copying matrix, composition scores against their random baseline and ablation tables.

Inputs are the numpy arrays and frames of core.reading.analysis (0-based layer and head, and label).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from core.model.symbols import head_label

from . import DIVERGING, OKABE_ITO, numbered
from .kept import kept

PAD = alt.AutoSizeParams(type="pad")  # fixed-size charts: Streamlit's default "fit" squeezes them to nothing


def _symmetric(M: np.ndarray) -> list[float]:
    """A colour domain centred on 0 that ignores the most extreme 0.5% (so one outlier does not wash out the rest)."""
    m = float(np.quantile(np.abs(M), 0.995)) if M.size else 1.0
    return [-(m or 1.0), m or 1.0]


@kept
def matrix_heatmap(M: np.ndarray, title: str, row_title: str, col_title: str, value_title: str,
                   labels: list[str] | None = None, size: int = 300) -> alt.Chart:
    """A signed matrix [R, C] as a heatmap on a diverging scale centred on 0 (clamped at the 99.5%
    quantile of |M|). With labels (tokens), both axes are labelled with them; else with indices."""
    R, C = M.shape
    i, j = np.indices((R, C)).reshape(2, -1)
    data = pd.DataFrame({"r": i, "c": j, "v": M.reshape(-1).round(4)})
    tooltip = [alt.Tooltip("r:Q", title=row_title), alt.Tooltip("c:Q", title=col_title),
               alt.Tooltip("v:Q", title=value_title, format=".3f")]
    if labels is not None:
        data["rl"] = [labels[a] for a in i]
        data["cl"] = [labels[b] for b in j]
        tooltip = [alt.Tooltip("rl:N", title=row_title), alt.Tooltip("cl:N", title=col_title), tooltip[2]]
    scale = alt.Scale(scheme=DIVERGING, domain=_symmetric(M), clamp=True)
    if labels is None:
        x_axis = y_axis = alt.Axis(labels=False, ticks=False)
    else:
        x_axis = alt.Axis(labelExpr=_label_expr(labels), labelFontSize=7, labelAngle=0)
        y_axis = alt.Axis(labelExpr=_label_expr(labels), labelFontSize=7)
    enc = dict(x=alt.X("c:O", title=col_title, axis=x_axis), y=alt.Y("r:O", title=row_title, axis=y_axis),
               color=alt.Color("v:Q", title=value_title, scale=scale), tooltip=tooltip)
    return alt.Chart(data, title=title).mark_rect().encode(**enc).properties(width=size, height=size, autosize=PAD)


def _label_expr(labels: list[str]) -> str:
    """Vega expression mapping an index to its label."""
    quoted = ",".join("'" + l.replace("\\", "\\\\").replace("'", "\\'") + "'" for l in labels)
    return f"[{quoted}][datum.value]"


@kept
def singular_values_chart(s: np.ndarray, d_head: int, title: str) -> alt.LayerChart:
    """Singular values by index; a rule marks d_head, past which they are exactly 0 (rank <= d_head)."""
    data = pd.DataFrame({"index": np.arange(1, len(s) + 1), "sigma": s})
    bars = alt.Chart(data).mark_bar(color=OKABE_ITO[4]).encode(
        x=alt.X("index:Q", title="singular value number", scale=alt.Scale(domain=[0, len(s) + 1], nice=False)),
        y=alt.Y("sigma:Q", title="singular value"),
        tooltip=["index:Q", alt.Tooltip("sigma:Q", format=".4f", title="singular value")],
    )
    rule = alt.Chart(pd.DataFrame({"x": [d_head + 0.5], "t": [f"d_head = {d_head}"]})).mark_rule(
        color=OKABE_ITO[5], strokeDash=[4, 3]).encode(x="x:Q", tooltip=[alt.Tooltip("t:N", title="")])
    text = alt.Chart(pd.DataFrame({"x": [d_head + 0.5], "t": [f"d_head = {d_head}"]})).mark_text(
        align="left", dx=4, y=10, color=OKABE_ITO[5]).encode(x="x:Q", text="t:N")
    return alt.layer(bars, rule, text, title=title).properties(width=300, height=150, autosize=PAD)


@kept
def profile_chart(profiles: dict[str, np.ndarray], period_min: int, period_max: int) -> alt.LayerChart:
    """Rotary positional profile: score a head gives a key t positions back, for each (q, k) source;
    the offsets L-1 of the training periods are shaded."""
    data = pd.concat([pd.DataFrame({"offset": np.arange(len(p)), "score": p, "source": name})
                      for name, p in profiles.items()])
    band_edges = {"a": [period_min - 1.5], "b": [period_max - 0.5], "t": ["L − 1 for training periods"]}
    band = alt.Chart(pd.DataFrame(band_edges)) \
        .mark_rect(color="#999999", opacity=0.18).encode(x="a:Q", x2="b:Q", tooltip=[alt.Tooltip("t:N", title="")])
    lines = alt.Chart(data).mark_line().encode(
        x=alt.X("offset:Q", title="offset t = i − j (positions back)"),
        y=alt.Y("score:Q", title="score q·k / √d_head"),
        color=alt.Color("source:N", title="query and key", scale=alt.Scale(range=[OKABE_ITO[4], OKABE_ITO[0]])),
        tooltip=["source:N", "offset:Q", alt.Tooltip("score:Q", format=".3f")],
    )
    return alt.layer(band, lines).properties(height=200)


@kept
def composition_chart(df: pd.DataFrame, baseline: dict[str, float]) -> alt.Chart:
    """Writer head x reader head heatmap for each kind (Q, K, V); the colour is the score divided by
    the random baseline (1 = no more than chance), cells print the score."""
    data = df.assign(kind_title=df["kind"].map(lambda k: f"{k}-composition (random: {baseline[k]:.3f})"))
    top = max(2.0, float(np.ceil(data["ratio"].max()))) if len(data) else 2.0
    base = alt.Chart(data).encode(
        x=alt.X("reader:N", title="reader head (later block.head)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("writer:N", title="writer head (earlier block.head)"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("ratio:Q", title="score ÷ random baseline",
                        scale=alt.Scale(scheme=DIVERGING, domainMid=1, domain=[0, top])),
        tooltip=["kind:N", "writer:N", "reader:N", alt.Tooltip("score:Q", format=".3f"),
                 alt.Tooltip("baseline:Q", format=".3f", title="random baseline"),
                 alt.Tooltip("ratio:Q", format=".2f", title="÷ baseline")],
    )
    text = base.mark_text(fontSize=9).encode(text=alt.Text("score:Q", format=".2f"),
                                             color=alt.value("black"))
    return alt.layer(rect, text).properties(width=200, height=200).facet(
        column=alt.Column("kind_title:N", title=None, sort=[t for t in data["kind_title"].unique()])
    ).properties(autosize=PAD)


@kept
def ablation_heatmap(df: pd.DataFrame, value: str, title: str, value_title: str) -> alt.LayerChart:
    """Block x head table of one ablation delta, diverging around 0 (orange = the metric went up)."""
    data = numbered(df).astype({"block": str, "head": str})
    m = float(data[value].abs().max()) or 1.0
    base = alt.Chart(data).encode(x=alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)),
                                  y=alt.Y("block:O", title="block"))
    rect = base.mark_rect().encode(
        color=alt.Color(f"{value}:Q", title=value_title, scale=alt.Scale(scheme=DIVERGING, domain=[-m, m])),
        tooltip=[alt.Tooltip("block:O"), alt.Tooltip("head:O"),
                 alt.Tooltip(f"{value}:Q", format=".4f", title=value_title)],
    )
    text = base.mark_text(fontSize=12).encode(
        text=alt.Text(f"{value}:Q", format=".2f"),
        color=alt.condition(f"abs(datum['{value}']) > {0.6 * m}", alt.value("white"), alt.value("black")))
    return alt.layer(rect, text, title=title).properties(width=int(60 * data["head"].nunique()),
                                            height=int(50 * data["block"].nunique()), autosize=PAD)


@kept
def copying_bars(df: pd.DataFrame, vocab: int) -> alt.LayerChart:
    """ov_diag_top1 of every head and every block's sum (bars, rows from W_E), the same on the effective
    embedding (black ticks), with chance 1/V marked."""
    data = df.assign(which=[head_label(l, h, all_mark="Σ") for l, h in zip(df["layer"], df["head"])],
                     kind=["sum of the block's heads" if h == "all" else "one head" for h in df["head"]])
    data = data[["which", "kind", "ov_diag_top1", "ov_diag_top5", "ov_copying_eig", "ov_diag_top1_effective",
                 "ov_copying_eig_effective"]]
    tips = ["which:N", *(alt.Tooltip(f"{c}:Q", format=".3f") for c in data.columns[2:])]
    bars = alt.Chart(data).mark_bar().encode(
        x=alt.X("which:N", title="head (block.head; Σ = the block's heads summed)", sort=list(data["which"]),
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("ov_diag_top1:Q", title="diagonal on top", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("kind:N", title="", scale=alt.Scale(range=[OKABE_ITO[4], OKABE_ITO[0]])),
        tooltip=tips,
    )
    ticks = alt.Chart(data).mark_tick(color="black", thickness=2).encode(
        x=alt.X("which:N", sort=list(data["which"])), y="ov_diag_top1_effective:Q", tooltip=tips)
    chance = alt.Chart(pd.DataFrame({"y": [1 / vocab], "t": [f"chance 1/V = {1 / vocab:.3f}"]})).mark_rule(
        color="gray", strokeDash=[2, 2]).encode(y="y:Q", tooltip=[alt.Tooltip("t:N", title="")])
    return alt.layer(bars, ticks, chance).properties(height=200)
