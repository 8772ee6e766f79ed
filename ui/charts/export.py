"""Every chart leaves the app as a figure: SVG, a PNG at print resolution and its data as CSV.

vl-convert renders the chart's Vega-Lite spec without a browser or a network (Streamlit's own chart toolbar
offers a 72-ppi PNG only). Nothing is converted while a page draws: each download button's data is a function
that Streamlit calls when the student clicks it, so a page pays for the buttons, not for the figures
(bench/export_cost.py measures both). A file is named after the page, the model, the head and the training
step on screen, and the chart's title.
"""
from __future__ import annotations

import copy
import re
from collections import Counter

import pandas as pd
import streamlit as st

PNG_SCALE = 3  # Vega draws at 72 ppi: 216 ppi, print resolution
RUN_KEY = "_export_run"  # the page and model this session's figures are named after
STEP_KEYS = {"attention": "att_step", "circuits": "cir_step"}  # ui.steps' training-step slider of a page


def begin_run(page: str, model_label: str | None) -> None:
    """Called by dashboard.py before a page runs: what the figures drawn in this run are named after."""
    st.session_state[RUN_KEY] = {"page": page, "model": model_label or "no-model"}


def _drawn_this_run() -> Counter:
    """How often each chart was drawn in this script run (a fragment's run counts afresh), so that two draws of one
    chart get two sets of buttons and a rerun gives each the same keys again."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:
        return Counter()
    mark = getattr(ctx, "_lab_exports", None)
    if mark is None or mark[0] is not ctx.cursors:  # ScriptRunContext.reset gives every run new cursors
        mark = (ctx.cursors, Counter())
        ctx._lab_exports = mark
    return mark[1]


def _frame_of(dataset) -> pd.DataFrame:
    """A dataset of a spec as Streamlit sends it (Arrow bytes) or as Altair writes it (a list of records)."""
    if isinstance(dataset, (bytes, bytearray)):
        import pyarrow as pa

        return pa.ipc.open_stream(dataset).read_all().to_pandas()
    return pd.DataFrame(dataset)


def figure_spec(chart) -> dict:
    """The chart's Vega-Lite spec with every dataset written into it (what vl-convert reads)."""
    spec = copy.deepcopy(chart) if isinstance(chart, dict) else chart.to_dict()
    datasets = spec.get("datasets") or {}
    spec["datasets"] = {name: _frame_of(data).to_dict(orient="records") for name, data in datasets.items()}
    spec.pop("usermeta", None)
    spec.setdefault("background", "white")
    return _plain(spec)


def _plain(value):
    """JSON-safe: numpy scalars and timestamps as Python values, NaN as None."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def svg(chart) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(figure_spec(chart)).encode()


def png(chart, scale: float = PNG_SCALE) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(figure_spec(chart), scale=scale)


def csv(chart) -> bytes:
    """The chart's data: one table, or several one after the other with a `dataset` column naming each."""
    spec = figure_spec(chart)
    frames = [pd.DataFrame(rows).assign(dataset=name) for name, rows in spec["datasets"].items()]
    if not frames:
        return b""
    if len(frames) == 1:
        return frames[0].drop(columns="dataset").to_csv(index=False).encode()
    return pd.concat(frames, ignore_index=True).to_csv(index=False).encode()


def title_of(chart) -> str:
    spec = chart if isinstance(chart, dict) else chart.to_dict()
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return str(title or "")


def file_stem(*parts) -> str:
    """'attention_variable-period-2block_head-2.1_step-300_every-head': the non-empty parts, joined, made safe."""
    words = [re.sub(r"[^A-Za-z0-9.+-]+", "-", str(p)).strip("-").lower() for p in parts if p not in (None, "")]
    return "_".join(w for w in words if w)[:120] or "chart"


def _stem(chart, n: int) -> str:
    from ui.share import PAGE_PARAMS

    run = st.session_state.get(RUN_KEY) or {"page": "lab", "model": ""}
    page = run["page"]
    head_key = PAGE_PARAMS.get(page, {}).get("head")
    head = st.session_state.get(head_key) if head_key else None
    step = st.session_state.get(STEP_KEYS[page]) if page in STEP_KEYS else None
    step = step if isinstance(step, int) and step >= 0 else None  # ui.steps.FINAL is the finished model
    model = re.sub(r" \((shipped|trained|uploaded)\)$", "", run["model"])
    return file_stem(page, model, f"head-{head}" if head else None, f"step-{step}" if step is not None else None,
                     title_of(chart) or f"chart-{n + 1}")


def controls(where, chart, digest: str) -> None:
    """An Export popover under the chart: SVG, PNG and CSV, each made when its button is clicked."""
    seen = _drawn_this_run()
    n = seen[digest]
    seen[digest] += 1
    key = f"export_{digest}_{n}"
    stem = _stem(chart, sum(seen.values()) - 1)
    with where.popover("Export", icon=":material/download:", key=f"{key}_menu"):
        st.caption("The chart as a figure (SVG, or PNG at 216 ppi) or its data (CSV), made when you click.")
        st.download_button("SVG", lambda: svg(chart), f"{stem}.svg", "image/svg+xml", key=f"{key}_svg",
                           on_click="ignore")
        st.download_button("PNG", lambda: png(chart), f"{stem}.png", "image/png", key=f"{key}_png",
                           on_click="ignore")
        st.download_button("CSV", lambda: csv(chart), f"{stem}.csv", "text/csv", key=f"{key}_csv",
                           on_click="ignore")
