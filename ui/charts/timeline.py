"""Timeline charts for the Train page (ui.timeline): the loss curve with the film strip's markers, the
film strip of two heads' patterns, the in-context-learning score and the loss by position.

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

from core.model.symbols import head_label

from . import OKABE_ITO
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


@kept
def strip(t: dict) -> alt.FacetChart:
    rows, labels = [], []
    for name, pats in t["patterns"].items():
        layer, head = t["heads"][name]
        label = f"{name} head {head_label(layer, head)}"
        labels.append(label)
        for f, step in enumerate(t["frames"]):
            P = pats[f]
            for i in range(P.shape[0]):
                for j in range(i + 1):
                    if P[i, j] >= 0.01:
                        rows.append({"head": label, "frame": f"{f + 1}: step {step}", "query": i, "key": j,
                                     "weight": float(P[i, j])})
    df = pd.DataFrame(rows)
    n = len(t["tokens"])
    order = [f"{f + 1}: step {s}" for f, s in enumerate(t["frames"])]
    return alt.Chart(df).mark_rect().encode(
        x=alt.X("key:O", axis=None), y=alt.Y("query:O", axis=None),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), legend=None),
        tooltip=["query:Q", "key:Q", alt.Tooltip("weight:Q", format=".2f")],
    ).properties(width=min(130, 2 * n), height=min(130, 2 * n)).facet(
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
    """The film strip as images, for a strip redrawn every second while a run trains (the shipped run's
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


def _tile_png(pattern: np.ndarray, scale: int) -> bytes:
    """One frame of a head as a PNG (_colour, each weight a scale x scale square), kept per content: the
    live strip's frames recur from one logged row to the next, so a new row encodes only its new tiles."""
    key = hashlib.blake2b(f"{pattern.dtype.str}{pattern.shape}{scale}".encode() + pattern.tobytes(),
                          digest_size=16).digest()
    with _pngs_lock:
        png = _pngs.get(key)
        if png is not None:
            _pngs.move_to_end(key)
            return png
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.kron(_colour(pattern), np.ones((scale, scale, 1), np.uint8))).save(buf, format="PNG")
    png = buf.getvalue()
    with _pngs_lock:
        _pngs[key] = png
        while len(_pngs) > MAX_PNGS:
            _pngs.popitem(last=False)
    return png


def strip_pngs(t: dict) -> dict[str, tuple[list[bytes], list[str]]]:
    """strip_tiles with every tile encoded as PNG (what st.image sends): {row label: (PNGs, captions)}."""
    out = {}
    for name, pats in t["patterns"].items():
        layer, head = t["heads"][name]
        captions = [f"{f + 1}: step {s}" for f, s in enumerate(t["frames"])]
        out[f"{name} head {head_label(layer, head)}"] = ([_tile_png(p, 2) for p in pats], captions)
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
        color=alt.Color("step:N", title=None, legend=alt.Legend(orient="top")),
        tooltip=["position:Q", alt.Tooltip("loss:Q", format=".3f"), "step:N"]).properties(height=220)
