"""Charts built once per content: a builder's chart for the same inputs is kept, with the spec it is sent as.

A warm page rerun draws the same charts from the same views, and building an Altair chart, then
converting it to the Vega-Lite spec Streamlit sends (schema validation, the data to Arrow), was about
half of such a run's server CPU (bench/page_times.py measures what keeping them saves). So:

    @kept
    def pattern_grid(patterns): ...                  # ui/charts/*.py: a builder
    draw(st, charts.pattern_grid(patterns), width="content")   # a page: in place of st.altair_chart

`@kept` keys a builder's result (a chart, or any value a pure function makes that nobody modifies, such
as a sentence read off a table) by a digest of its arguments' content (numbers and strings by value,
arrays, tensors and frames by their bytes, dtypes and labels), so the same inputs give back the same
chart object, from any session, and different inputs can never give an old chart. `draw` sends that
chart's converted spec, converting once per chart. An argument kept cannot digest (anything else) means
the chart is built and converted as before. Builders must be pure (a chart depends on its arguments
only) and the charts they return are never modified after (a page adds nothing to them); compositions
of other builders' charts are made inside a builder, from builders that are not `@kept`.

Sessions asking for the same chart at once (a class opening pages on a new server) wait for one build and
one conversion, then share them: building and converting in every session made 20 readers' first pages
take 9.5 s at the 95th percentile, 6.8 s with the wait (bench/class.py).

Memory: at most MAX_CHARTS charts and MAX_BYTES of their specs' data, least recently used out first.

A chart that changes only in its data, such as a live run's curves with a new logged row, is sent from a
kept template instead (`swapped`): its spec converted once per shape (the builder's other arguments), and
per call only its datasets replaced, which is the spec Altair would give for the new data.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import sys
import threading
from collections import OrderedDict

import numpy as np
import pandas as pd

from ui.charts import export

MAX_CHARTS = 256
# of the Arrow data in the kept specs; each chart also holds the frame it was built from, about as large again.
# Every chart of a walk through all pages on the default model: 52 charts, 1.6 MB of specs (1.5 MB of frames)
MAX_BYTES = 12 * 2**20


class Undigestable(TypeError):
    """An argument `digest` has no content form for: the chart is not kept."""


def _update(h, value) -> None:
    t = type(value)
    if value is None or t in (bool, int, float, str):
        h.update(f"{t.__name__}:{value!r};".encode())
    elif t in (tuple, list):
        h.update(f"{t.__name__}{len(value)}(".encode())
        for v in value:
            _update(h, v)
        h.update(b")")
    elif t is dict:
        h.update(f"dict{len(value)}(".encode())
        for k, v in value.items():
            _update(h, k)
            _update(h, v)
        h.update(b")")
    elif isinstance(value, np.generic):
        h.update(f"np:{value.dtype.str}:{value.item()!r};".encode())
    elif isinstance(value, np.ndarray):
        h.update(f"nd:{value.dtype.str}:{value.shape}(".encode())
        if value.dtype.kind == "O":
            h.update("\x1f".join(f"{type(v).__name__}:{v!r}" for v in value.ravel().tolist()).encode())
        elif value.dtype.kind in "biufcUSMm":
            h.update(np.ascontiguousarray(value).tobytes())
        else:
            raise Undigestable(f"ndarray of dtype {value.dtype}")
        h.update(b")")
    elif "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):  # no torch: no tensor
        torch = sys.modules["torch"]
        if value.requires_grad or value.dtype not in (torch.float32, torch.float64, torch.float16, torch.int64,
                                                      torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
            raise Undigestable(f"tensor of dtype {value.dtype}")
        h.update(b"tensor")
        _update(h, value.detach().cpu().numpy())
    elif isinstance(value, pd.DataFrame):
        h.update(b"frame(")
        _update(h, value.index)
        for name in value.columns:
            column = value[name]
            if isinstance(column, pd.DataFrame):
                raise Undigestable("a frame with repeated column names")
            _update(h, name)
            _update(h, column)
        h.update(b")")
    elif isinstance(value, pd.Series):
        h.update(f"series:{value.dtype}(".encode())
        if isinstance(value.dtype, pd.CategoricalDtype):  # the categories' order is the axis order
            _update(h, (list(value.dtype.categories), value.dtype.ordered))
        _update(h, value.name)
        _update(h, value.index)
        _update(h, value.to_numpy())
        h.update(b")")
    elif isinstance(value, pd.RangeIndex):
        h.update(f"range:{value.start}:{value.stop}:{value.step};".encode())
        _update(h, value.name)
    elif isinstance(value, pd.Index) and not isinstance(value, pd.MultiIndex):
        h.update(f"index:{value.dtype}(".encode())
        _update(h, value.name)
        _update(h, value.to_numpy())
        h.update(b")")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"dc:{t.__module__}.{t.__qualname__}(".encode())
        for f in dataclasses.fields(value):
            _update(h, f.name)
            _update(h, getattr(value, f.name))
        h.update(b")")
    else:
        raise Undigestable(f"no content digest for {t.__module__}.{t.__qualname__}")


def digest(*values) -> str:
    """A digest of values' content: equal for equal content (same types, dtypes, shapes, labels, values)."""
    h = hashlib.blake2b(digest_size=20)
    _update(h, values)
    return h.hexdigest()


@dataclasses.dataclass
class _Kept:
    chart: object
    sent: dict | None = None  # the converted spec, once drawn
    size: int = 0  # bytes of its Arrow data
    converting: threading.Lock = dataclasses.field(default_factory=threading.Lock)  # one conversion at a time


_lock = threading.Lock()
_charts: OrderedDict[str, _Kept] = OrderedDict()  # by builder and argument digest, most recent last
_by_id: dict[int, _Kept] = {}  # the same entries by id(chart), for draw
_building: dict[str, threading.RLock] = {}  # a lock per key being built: sessions asking at once wait for one build
_bytes = 0


def _evict() -> None:
    global _bytes
    while _charts and (len(_charts) > MAX_CHARTS or _bytes > MAX_BYTES):
        _, old = _charts.popitem(last=False)
        _by_id.pop(id(old.chart), None)
        _bytes -= old.size


def kept(builder):
    """Keep `builder`'s chart per content of its arguments (the module docstring)."""
    name = f"{builder.__module__}.{builder.__qualname__}"

    @functools.wraps(builder)
    def build(*args, **kwargs):
        global _bytes
        try:
            key = name + ":" + digest(args, sorted(kwargs.items()))
        except Undigestable:
            return builder(*args, **kwargs)
        with _lock:
            entry = _charts.get(key)
            if entry is not None:
                _charts.move_to_end(key)
                return entry.chart
            gate = _building.setdefault(key, threading.RLock())
        with gate:  # a class opening a page on a new server: one session builds, the others take its chart
            try:
                with _lock:
                    entry = _charts.get(key)
                    if entry is not None:
                        return entry.chart
                entry = _Kept(builder(*args, **kwargs))
                with _lock:
                    if key not in _charts:
                        _charts[key] = entry
                        _by_id[id(entry.chart)] = entry
                        _bytes += entry.size
                        _evict()
                    return _charts[key].chart if key in _charts else entry.chart
            finally:
                with _lock:
                    if _building.get(key) is gate:
                        del _building[key]
    build.uncached = builder
    return build


def sent_form(chart):
    """The Vega-Lite spec, its data as Arrow, that st.altair_chart would send for `chart` (a dict); the
    chart itself where Streamlit has no such converter (draw then sends it with st.altair_chart)."""
    try:
        from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec
    except ImportError:
        return chart
    return _convert_altair_to_vega_lite_spec(chart)


def _size(spec: dict) -> int:
    return sum(len(v) for v in (spec.get("datasets") or {}).values() if isinstance(v, bytes))


def draw(where, chart, **kwargs):
    """where.altair_chart(chart, **kwargs), from the chart's kept spec when `kept` built it.
    A spec (a dict from sent_form) is drawn as it is."""
    global _bytes
    if isinstance(chart, dict):
        spec = chart
    else:
        with _lock:
            entry = _by_id.get(id(chart))
            entry = entry if entry is not None and entry.chart is chart else None
            spec = None if entry is None else entry.sent
        if spec is None:
            with entry.converting if entry is not None else contextlib.nullcontext():
                spec = None if entry is None else entry.sent  # converted while this session waited
                if spec is None:
                    spec = sent_form(chart)
                    if not isinstance(spec, dict):
                        return where.altair_chart(chart, **kwargs)
                    if entry is not None:
                        with _lock:
                            if entry.sent is None and _by_id.get(id(chart)) is entry:
                                entry.sent, entry.size = spec, _size(spec)
                                _bytes += entry.size
                                _evict()
    # st.vega_lite_chart moves the datasets out of the spec it gets (and may patch it): a copy
    drawn = where.vega_lite_chart(spec=on_canvas_if_gradient(copy.deepcopy(spec)), **kwargs)
    export.controls(where, spec, _spec_digest(spec), kwargs.get("key") if kwargs.get("on_select") else None)
    return drawn


def _spec_digest(spec: dict) -> str:
    """A short digest of a sent spec: its layout and its datasets' names (Streamlit names each by its content)."""
    layout = {k: v for k, v in spec.items() if k != "datasets"}
    text = json.dumps([layout, sorted(spec.get("datasets") or {})], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


_CONTINUOUS = ("quantitative", "temporal")
_COLOUR_CHANNELS = ("color", "fill", "stroke")


def has_gradient_legend(spec) -> bool:
    """Whether any view of the Vega-Lite spec colours by a continuous field with a legend, which Vega draws
    as a gradient."""
    if isinstance(spec, list):
        return any(has_gradient_legend(s) for s in spec)
    if not isinstance(spec, dict):
        return False
    for channel in _COLOUR_CHANNELS:
        enc = (spec.get("encoding") or {}).get(channel)
        if isinstance(enc, dict) and enc.get("type") in _CONTINUOUS and enc.get("legend", {}) is not None:
            return True
    return any(has_gradient_legend(spec.get(k)) for k in ("layer", "hconcat", "vconcat", "concat", "spec"))


def on_canvas_if_gradient(spec: dict) -> dict:
    """The spec drawn on a canvas when it has a gradient legend. Vega's SVG renderer points a gradient's fill at
    the page's address as it was when the chart was drawn (url(<address>#gradient_0), vega/vega#3948); once the
    address bar's query changes (ui/share.py keeps it in step with the page's settings), that reference no longer
    resolves and the colour bar is drawn empty. A canvas has no such reference."""
    if has_gradient_legend(spec):
        meta = spec.setdefault("usermeta", {})
        meta.setdefault("embedOptions", {})["renderer"] = "canvas"
    return spec


MAX_TEMPLATES = 32


def _dataset(frame) -> tuple[str, bytes]:
    """The name and Arrow bytes Streamlit's Altair converter gives a chart's frame (its data transformer)."""
    from streamlit import dataframe_util
    from streamlit.util import calc_hash

    data = dataframe_util.convert_anything_to_arrow_bytes(frame)
    return calc_hash(data), data


def _renamed(node, names: dict[str, str]):
    """A copy of a spec's tree with every `{"data": {"name": old}}` reference renamed by `names`."""
    if isinstance(node, dict):
        out = {k: _renamed(v, names) for k, v in node.items()}
        data = out.get("data")
        if isinstance(data, dict) and data.get("name") in names and len(data) == 1:
            out["data"] = {"name": names[data["name"]]}
        return out
    if isinstance(node, list):
        return [_renamed(v, names) for v in node]
    return node


@dataclasses.dataclass
class _Template:
    spec: dict  # the converted spec without its datasets
    names: dict[str, str]  # the dataset name of each role's frame in spec


_templates: OrderedDict[str, _Template | None] = OrderedDict()  # None: this shape's spec cannot be swapped


def _template(chart, frames: dict) -> _Template | None:
    spec = sent_form(chart)
    if not isinstance(spec, dict):
        return None
    names = {role: _dataset(frame)[0] for role, frame in frames.items()}
    # every dataset must be one role's frame, and no two roles' frames alike (a name must tell its role)
    if len(set(names.values())) != len(names) or set(names.values()) != set(spec.get("datasets") or {}):
        return None
    return _Template({k: v for k, v in spec.items() if k != "datasets"}, names)


def swapped(chart_of, frames: dict, *shape):
    """The spec `sent_form(chart_of(frames, *shape))`, from a template of chart_of's spec converted once per
    `shape` and per set of roles in `frames` ({role: the frame one layer draws}; a None frame leaves the
    role out), with each role's dataset replaced by its frame now. chart_of must give Altair each frame as
    it is (the datasets are named by their content, as Streamlit names them), draw nothing else from data
    and depend on nothing but its arguments; where its spec does not come out so (a dataset no role's frame
    gives), each call builds and converts the chart instead."""
    frames = {role: frame for role, frame in frames.items() if frame is not None}
    try:
        key = f"{chart_of.__module__}.{chart_of.__qualname__}:{digest(shape, sorted(frames))}"
    except Undigestable:
        return sent_form(chart_of(frames, *shape))
    with _lock:
        known = key in _templates
        template = _templates.get(key)
        if known:
            _templates.move_to_end(key)
    if not known:
        template = _template(chart_of(frames, *shape), frames)
        with _lock:
            _templates[key] = template
            while len(_templates) > MAX_TEMPLATES:
                _templates.popitem(last=False)
    if template is None:
        return sent_form(chart_of(frames, *shape))
    names, datasets = {}, {}
    for role, frame in frames.items():
        name, data = _dataset(frame)
        names[template.names[role]] = name
        datasets[name] = data
    spec = _renamed(template.spec, names)
    spec["datasets"] = datasets
    return spec


def clear() -> None:
    """Forget every kept chart and template (tests)."""
    global _bytes
    with _lock:
        _charts.clear()
        _by_id.clear()
        _templates.clear()
        _bytes = 0
