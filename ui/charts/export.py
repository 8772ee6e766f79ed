"""Every chart leaves the app as a figure: SVG, a PNG at print resolution and its data as CSV.

vl-convert renders the chart's Vega-Lite spec without a browser or a network (Streamlit's own chart toolbar
offers a 72-ppi PNG only). Nothing is converted while a page draws: each download button's data is a function
that Streamlit calls when the student clicks it, so a page pays for the buttons, not for the figures
(bench/export_cost.py measures both). A file is named after the page, the model, the head and the training
step on screen, the pinned tokens, and the chart's title.

A chart with selections (the pinned queries of ui/charts/attention.py) is exported as the student sees it: the
selection the browser last reported for the chart's key is written into the spec's parameter as its value, so
the figure shows the same tokens pinned.
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


def figure_spec(chart, selected: dict | None = None) -> dict:
    """The chart's Vega-Lite spec with every dataset written into it (what vl-convert reads). `selected`: a point
    selection's chosen points by its name ({"pin": [{"query": 3}]}), written as that parameter's value."""
    spec = copy.deepcopy(chart) if isinstance(chart, dict) else chart.to_dict()
    datasets = spec.get("datasets") or {}
    spec["datasets"] = {name: _frame_of(data).to_dict(orient="records") for name, data in datasets.items()}
    spec.pop("usermeta", None)
    spec.setdefault("background", "white")
    if selected:
        _select(spec, selected)
    return _plain(spec)


def _select(spec, selected: dict) -> None:
    """Every point-selection parameter named in `selected` starts at its points (none chosen: no value)."""
    if isinstance(spec, list):
        for part in spec:
            _select(part, selected)
        return
    if not isinstance(spec, dict):
        return
    for param in spec.get("params") or []:
        if isinstance(param, dict) and param.get("name") in selected and "select" in param:
            points = [p for p in selected[param["name"]] if isinstance(p, dict)]
            if points:
                param["value"] = points
            else:
                param.pop("value", None)
    for key, value in spec.items():
        if key not in ("params", "datasets", "data"):
            _select(value, selected)


def selection_reader(state_key: str | None):
    """A function that returns the selection the browser last reported for the chart drawn with key `state_key`
    ({param name: [points]}, or None), callable from the thread that makes a deferred download (which has no
    script context: the session's state is held here while the page draws)."""
    if not state_key:
        return lambda: None
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    state = ctx.session_state if ctx is not None else None

    def read():
        try:
            value = state[state_key] if state is not None else None
        except (KeyError, AttributeError, TypeError):
            return None
        chosen = (value or {}).get("selection") if hasattr(value, "get") else None
        return {k: v for k, v in chosen.items() if isinstance(v, list)} if hasattr(chosen, "items") else None
    return read


def pinned_part(selected: dict | None) -> str | None:
    """'pin-3+7' for the pinned queries 3 and 7 of a selection (any field), or None."""
    points = (selected or {}).get("pin") or []
    values = sorted({v for p in points if isinstance(p, dict) for v in p.values() if isinstance(v, int)})
    return "pin-" + "+".join(map(str, values)) if values else None


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


def svg(chart, selected: dict | None = None) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(figure_spec(chart, selected)).encode()


def png(chart, scale: float = PNG_SCALE, selected: dict | None = None) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(figure_spec(chart, selected), scale=scale)


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


def _stem(chart, n: int, pinned: str | None = None) -> str:
    from ui.share import PAGE_PARAMS

    run = st.session_state.get(RUN_KEY) or {"page": "lab", "model": ""}
    page = run["page"]
    head_key = PAGE_PARAMS.get(page, {}).get("head")
    head = st.session_state.get(head_key) if head_key else None
    step = st.session_state.get(STEP_KEYS[page]) if page in STEP_KEYS else None
    step = step if isinstance(step, int) and step >= 0 else None  # ui.steps.FINAL is the finished model
    model = re.sub(r" \((shipped|trained|uploaded)\)$", "", run["model"])
    return file_stem(page, model, f"head-{head}" if head else None, f"step-{step}" if step is not None else None,
                     pinned, title_of(chart) or f"chart-{n + 1}")


def controls(where, chart, digest: str, state_key: str | None = None) -> None:
    """An Export popover under the chart: SVG, PNG and CSV, each made when its button is clicked. `state_key`: the
    key the chart was drawn with, whose selection (the pinned tokens) the figures show."""
    seen = _drawn_this_run()
    n = seen[digest]
    seen[digest] += 1
    key = f"export_{digest}_{n}"
    selected = selection_reader(state_key)
    stem = _stem(chart, sum(seen.values()) - 1, pinned_part(selected()))
    with where.popover("Export", icon=":material/download:", key=f"{key}_menu"):
        st.caption("The chart as a figure (SVG, or PNG at 216 ppi) or its data (CSV), made when you click"
                   + ("; the figure shows the tokens pinned now." if state_key else "."))
        st.download_button("SVG", lambda: svg(chart, selected=selected()), f"{stem}.svg", "image/svg+xml",
                           key=f"{key}_svg", on_click="ignore")
        st.download_button("PNG", lambda: png(chart, selected=selected()), f"{stem}.png", "image/png",
                           key=f"{key}_png", on_click="ignore")
        st.download_button("CSV", lambda: csv(chart), f"{stem}.csv", "text/csv", key=f"{key}_csv",
                           on_click="ignore")
