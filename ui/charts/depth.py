"""Charts for "What depth can express": the Gram form, path contributions, score terms and
composition scores. Every builder returns an Altair chart."""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from core.model.symbols import head_label

from . import DIVERGING, OKABE_ITO, SEQUENTIAL
from .kept import kept

KIND_ORDER = ["direct", "head", "composed", "bias"]
KIND_TITLES = {"direct": "direct (embedding → unembedding)", "head": "one head",
               "composed": "two heads (V-composition)", "bias": "bias"}
KIND_COLOURS = [OKABE_ITO[4], OKABE_ITO[0], OKABE_ITO[5], OKABE_ITO[7]]


def _matrix_frame(M: np.ndarray, rows: list[str], cols: list[str]) -> pd.DataFrame:
    vals = np.asarray(M, dtype=float).tolist()
    return pd.DataFrame([{"row": rows[i], "col": cols[j], "value": vals[i][j]}
                         for i in range(len(rows)) for j in range(len(cols))])


@kept
def token_heatmap(M: np.ndarray, symbols: list[str], title: str, value_title: str, row_title: str,
                  col_title: str, domain: tuple[float, float] | None = None) -> alt.Chart:
    """Heatmap of a [V, V] token-by-token matrix (row token, column token) on a diverging scale, centred on 0
    unless `domain` is given."""
    data = _matrix_frame(M, symbols, symbols)
    if domain is None:
        m = float(np.abs(M).max()) or 1.0
        domain = (-m, m)
    scale = alt.Scale(scheme=DIVERGING, domain=list(domain), clamp=True)
    axis = alt.Axis(labelFontSize=8, labelAngle=0)
    return alt.Chart(data, title=title).mark_rect().encode(
        x=alt.X("col:N", sort=symbols, title=col_title, axis=axis),
        y=alt.Y("row:N", sort=symbols, title=row_title, axis=alt.Axis(labelFontSize=8)),
        color=alt.Color("value:Q", title=value_title, scale=scale),
        tooltip=[alt.Tooltip("row:N", title=row_title), alt.Tooltip("col:N", title=col_title),
                 alt.Tooltip("value:Q", format=".3f", title=value_title)],
    ).properties(width=alt.Step(5), height=alt.Step(5))


@kept
def path_bars(labels: list[str], kinds: list[str], values: list[float], x_title: str) -> alt.Chart:
    """Horizontal bars of each path's contribution, largest |value| first; paths beyond the first 25 are
    summed into one 'all other paths' bar so the bars still add up to the total."""
    rows = sorted(zip(labels, kinds, values), key=lambda r: -abs(r[2]))
    keep, rest = rows[:25], rows[25:]
    if rest:
        keep.append((f"{len(rest)} other paths", "composed" if all(k == "composed" for _, k, _ in rest) else "other",
                     sum(v for _, _, v in rest)))
    data = pd.DataFrame([{"path": l, "kind": KIND_TITLES.get(k, "other paths (summed)"), "value": v}
                         for l, k, v in keep])
    domain = [KIND_TITLES[k] for k in KIND_ORDER] + ["other paths (summed)"]
    colours = KIND_COLOURS + [OKABE_ITO[6]]
    bars = alt.Chart(data, title="").mark_bar().encode(
        y=alt.Y("path:N", sort=[r[0] for r in keep], title="path"),
        x=alt.X("value:Q", title=x_title),
        color=alt.Color("kind:N", title="kind of path", scale=alt.Scale(domain=domain, range=colours),
                        legend=alt.Legend(labelLimit=320)),
        tooltip=["path:N", "kind:N", alt.Tooltip("value:Q", format=".3f")],
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#444").encode(x="x:Q")
    return (bars + zero).properties(width=420, height=alt.Step(20))


@kept
def score_term_heatmap(terms: np.ndarray, q_labels: list[str], k_labels: list[str], title: str,
                       value_title: str) -> alt.Chart:
    """Heatmap [query path, key path] of contributions to an attention score (or a margin)."""
    data = _matrix_frame(terms, q_labels, k_labels)
    m = float(np.abs(terms).max()) or 1.0
    base = alt.Chart(data, title=title).encode(
        x=alt.X("col:N", sort=k_labels, title="key side: path into the key (source position)",
                axis=alt.Axis(labelAngle=-40)),
        y=alt.Y("row:N", sort=q_labels, title="query side: path into the query"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(scheme=DIVERGING, domain=[-m, m])),
        tooltip=[alt.Tooltip("row:N", title="query path"), alt.Tooltip("col:N", title="key path"),
                 alt.Tooltip("value:Q", format=".3f", title=value_title)])
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("value:Q", format=".1f"),
        color=alt.condition(f"abs(datum.value) > {0.6 * m}", alt.value("white"), alt.value("black")))
    return (rect + text).properties(width=alt.Step(44), height=alt.Step(26))


@kept
def composition_heatmap(scores: np.ndarray, baseline: float | None, title: str) -> alt.Chart:
    """[block-1 head, block-2 head] composition scores, with the random baseline in the title."""
    H1, H2 = scores.shape
    rows = [head_label(0, h) for h in range(H1)]
    cols = [head_label(1, h) for h in range(H2)]
    data = _matrix_frame(scores, rows, cols)
    sub = f"random-matrix baseline {baseline:.3f}" if baseline is not None and not math.isnan(baseline) else ""
    base = alt.Chart(data, title=alt.Title(title, subtitle=sub)).encode(
        x=alt.X("col:N", sort=cols, title="block-2 head (reads)"),
        y=alt.Y("row:N", sort=rows, title="block-1 head (writes)"))
    top = float(np.max(scores)) or 1.0
    rect = base.mark_rect().encode(
        color=alt.Color("value:Q", title="score", scale=alt.Scale(scheme=SEQUENTIAL, domain=[0, top])),
        tooltip=[alt.Tooltip("row:N", title="writer"), alt.Tooltip("col:N", title="reader"),
                 alt.Tooltip("value:Q", format=".3f")])
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("value:Q", format=".2f"),
        color=alt.condition(f"datum.value > {0.55 * top}", alt.value("black"), alt.value("white")))
    return (rect + text).properties(width=alt.Step(44), height=alt.Step(32))
