"""Charts for the Causal experiments page: patch effects per head, per position, per path, and the
logit lens. Inputs are numpy arrays and pandas frames (core.causal.experiments: 0-based layer and head, and label).

Patch effects share one diverging scale clamped to [-1, 1] (0 = no recovery, white; 1 = full, orange;
below 0 = the patch made things worse, blue), so every heatmap on the page reads the same way.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from . import DIVERGING, SEQUENTIAL, numbered
from .kept import kept

PAD = alt.AutoSizeParams(type="pad")
# The widest position grid's plot, in px: with its axis and colour legend beside it (about 250 px) it fits the
# main column of a 1400 px window (940 px with the sidebar open); narrower windows scroll it (no chart here has
# a click selection, so scrolling loses nothing)
GRID_WIDTH = 660
CELL = 12  # px per position while the grid is narrower than GRID_WIDTH


def grid_width(T: int) -> int:
    """The plot width of a grid over T positions: CELL px a position, at least 300, at most GRID_WIDTH."""
    return min(GRID_WIDTH, max(300, CELL * T))
EFFECT_SCALE = alt.Scale(scheme=DIVERGING, domain=[-1, 1], clamp=True)
EFFECT_TITLE = "patch effect"


def _effect_cells(base: alt.Chart, keys: list[str], font_size: int,
                  legend: alt.Legend | None = None) -> list[alt.Chart]:
    """A heatmap's cells coloured by patch_effect on EFFECT_SCALE, with the value written in each
    (white on the dark ends); the tooltip names the cell by `keys` (Altair shorthands); legend: where the colour
    legend goes (None: Vega-Lite's, on the right)."""
    rect = base.mark_rect().encode(
        color=alt.Color("patch_effect:Q", title=EFFECT_TITLE, scale=EFFECT_SCALE,
                        **({"legend": legend} if legend is not None else {})),
        tooltip=[alt.Tooltip(k) for k in keys] + [alt.Tooltip("patch_effect:Q", format=".3f")])
    text = base.mark_text(fontSize=font_size).encode(
        text=alt.Text("patch_effect:Q", format=".2f"),
        color=alt.condition("abs(datum['patch_effect']) > 0.6", alt.value("white"), alt.value("black")))
    return [rect, text]


@kept
def head_effects(df: pd.DataFrame, title: str) -> alt.LayerChart:
    """df: layer, head, patch_effect (one row per head) -> block x head heatmap with the values written in."""
    data = numbered(df).astype({"block": str, "head": str})
    base = alt.Chart(data).encode(x=alt.X("head:O", title="head", axis=alt.Axis(labelAngle=0)),
                                  y=alt.Y("block:O", title="block"))
    # 52 px a head and the legend below: four heads fit the page's narrow column at 1400 px (305 px)
    return alt.layer(*_effect_cells(base, ["block:O", "head:O"], 11, legend=alt.Legend(orient="bottom")),
                     title=title).properties(
        width=int(52 * data["head"].nunique()), height=max(130, int(50 * data["block"].nunique())), autosize=PAD)


@kept
def position_effects(grid: np.ndarray, rows: list[str], title: str, row_title: str, period: int | None,
                     tokens: list[str] | None = None) -> alt.LayerChart:
    """grid [R, T] of patch effects: rows (labels `rows`) x position, with the copies' borders marked
    (rules at L and 2L when every sequence has period `period`). Unlike the other charts the colour scale
    runs to ±max|grid|, named in the legend: a single position's effect is often a few hundredths."""
    R, T = grid.shape
    r, p = np.indices((R, T)).reshape(2, -1)
    data = pd.DataFrame({"row": [rows[i] for i in r], "position": p, "effect": grid.reshape(-1).round(4)})
    tooltip = [alt.Tooltip("row:N", title=row_title), alt.Tooltip("position:O"),
               alt.Tooltip("effect:Q", title=EFFECT_TITLE, format=".3f")]
    if tokens is not None:
        data["token"] = [tokens[i] for i in p]
        tooltip.insert(2, alt.Tooltip("token:N", title="clean token"))
    m = float(np.nanmax(np.abs(grid))) if grid.size and np.isfinite(grid).any() else 0.0
    # one position carries little: scale to the grid
    scale = alt.Scale(scheme=DIVERGING, domain=[-(m or 1.0), m or 1.0])
    rect = alt.Chart(data).mark_rect().encode(
        x=alt.X("position:O", title="position", axis=alt.Axis(labelAngle=0, values=list(range(0, T, 4)))),
        y=alt.Y("row:N", title=row_title, sort=rows),
        color=alt.Color("effect:Q", title=f"{EFFECT_TITLE} (±{m:.2g})", scale=scale), tooltip=tooltip)
    layers = [rect]
    if period:
        marks = pd.DataFrame({"position": [period, 2 * period][: 1 + (2 * period < T)],
                              "what": ["second copy starts", "third copy starts"][: 1 + (2 * period < T)]})
        layers.append(alt.Chart(marks).mark_rule(color="black", strokeDash=[4, 3]).encode(
            x=alt.X("position:O"), tooltip=["what:N"]))
    return alt.layer(*layers, title=title).properties(width=grid_width(T), height=28 * R + 10,
                                                      autosize=PAD)


@kept
def path_effects(df: pd.DataFrame, title: str) -> alt.LayerChart:
    """df: sender, receiver (labels), patch_effect -> sender x receiver heatmap with the values written in."""
    base = alt.Chart(df).encode(
        x=alt.X("receiver:N", title="receiver", sort=list(dict.fromkeys(df["receiver"])), axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sender:N", title="sender", sort=list(dict.fromkeys(df["sender"]))))
    return alt.layer(*_effect_cells(base, ["sender:N", "receiver:N"], 11), title=title).properties(
        width=int(52 * df["receiver"].nunique()), height=int(34 * df["sender"].nunique()), autosize=PAD)


@kept
def lens_grid(df: pd.DataFrame, period: int | None, title: str) -> alt.LayerChart:
    """df: stage_label, position, prob, rank, token, target_token -> stage x position heatmap of the right
    token's probability (0..1), rank in the tooltip, rules at the copies' borders."""
    stages = list(dict.fromkeys(df["stage_label"]))
    T = int(df["position"].max()) + 1
    rect = alt.Chart(df).mark_rect().encode(
        x=alt.X("position:O", title="position (the prediction made there is for the next token)",
                axis=alt.Axis(labelAngle=0, values=list(range(0, T, 4)))),
        y=alt.Y("stage_label:N", title="read after", sort=stages),
        color=alt.Color("prob:Q", title="p(right token)", scale=alt.Scale(scheme=SEQUENTIAL, domain=[0, 1])),
        tooltip=[alt.Tooltip("stage_label:N", title="read after"), alt.Tooltip("position:O"),
                 alt.Tooltip("token:N", title="token here"), alt.Tooltip("target_token:N", title="right next token"),
                 alt.Tooltip("prob:Q", title="p(right token)", format=".3f"), alt.Tooltip("rank:Q", title="its rank")])
    layers = [rect]
    if period:
        # the target at t is read at position t - 1: the second copy's targets start at position L - 1
        marks = pd.DataFrame({"position": [period - 1], "what": ["first prediction of a second-copy token"]})
        layers.append(alt.Chart(marks).mark_rule(color="white", strokeDash=[4, 3]).encode(
            x=alt.X("position:O"), tooltip=["what:N"]))
    return alt.layer(*layers, title=title).properties(width=grid_width(T), height=30 * len(stages) + 10,
                                                      autosize=PAD)


@kept
def lens_by_copy(df: pd.DataFrame, value: str, title: str, value_title: str, log: bool = False) -> alt.Chart:
    """df: stage_label, copy, <value> -> one line per copy over the stages (the legend below: beside it the
    chart passed its half of the main column)."""
    stages = list(dict.fromkeys(df["stage_label"]))
    scale = alt.Scale(type="log") if log else alt.Scale(domain=[0, 1])
    return alt.Chart(df, title=title).mark_line(point=True).encode(
        x=alt.X("stage_label:N", title="read after", sort=stages, axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{value}:Q", title=value_title, scale=scale),
        # one legend for both channels (Vega-Lite merges them: same field, title and sort)
        color=alt.Color("copy:N", title="targets in the", sort=["first", "second", "later"],
                        legend=alt.Legend(orient="bottom")),
        strokeDash=alt.StrokeDash("copy:N", title="targets in the", sort=["first", "second", "later"],
                                  legend=alt.Legend(orient="bottom")),
        tooltip=["stage_label:N", "copy:N", alt.Tooltip(f"{value}:Q", format=".3f"), "n:Q"],
    ).properties(width=300, height=220, autosize=PAD)


@kept
def mechanism(df: pd.DataFrame, min_gap: float, title: str) -> alt.Chart:
    """df: core.causal.experiments.mechanism_over_training -> effect against training step, one line per sender,
    one panel per path; steps whose gap is below min_gap (ratios of small differences) are left out."""
    shown = df[df["gap"] >= min_gap].assign(path=lambda d: d["path"].map({"q": "query", "k": "keys", "v": "values"}))
    base = alt.Chart().encode(
        x=alt.X("step:Q", title="training step"),
        y=alt.Y("patch_effect:Q", title="noising effect into all of block 2 (1 = not needed)"),
        color=alt.Color("sender:N", title="sender"),
        tooltip=["step:Q", "sender:N", "path:N", alt.Tooltip("patch_effect:Q", format=".2f"),
                 alt.Tooltip("effect_low:Q", format=".2f"), alt.Tooltip("effect_high:Q", format=".2f"),
                 alt.Tooltip("gap:Q", title="M(clean) − M(corrupted)", format=".2f")])
    return alt.layer(base.mark_line(point=True), base.mark_errorband().encode(y="effect_low:Q", y2="effect_high:Q"),
                     data=shown).properties(width=300, height=200).facet(column=alt.Column("path:N", title=None)
                                                                         ).properties(title=title)
