"""ui/cache.py's per_model: a view is computed once per model key and argument values, the model itself (its
weights, its info) is never hashed, and each view is registered under one name."""
from __future__ import annotations

import numpy as np
import pytest

from ui.cache import per_model
from ui.state import LabModel

from helpers import tiny_model


def entry(key: str, model=None) -> LabModel:
    return LabModel(key, key, tiny_model(1, seed=0) if model is None else model, {"task": None}, "trained")


@pytest.fixture
def counted():
    calls = []

    @per_model(name="test.counted", show_spinner=False, max_entries=8)
    def view(e: LabModel, period: int) -> tuple:
        calls.append((e.key, period))
        return e.key, period, float(e.model.W_E.detach().sum())

    yield view, calls
    view.clear()


def test_a_view_is_reused_for_the_same_model_key_and_recomputed_for_another(counted):
    view, calls = counted
    a, b = entry("session:a"), entry("session:b")
    first = view(a, 4)
    assert view(a, 4) == first and len(calls) == 1  # same key, same arguments: from the cache
    assert view(entry("session:a", a.model), 4) == first and len(calls) == 1  # a new entry object, same key
    view(a, 5)
    assert calls[-1] == ("session:a", 5)  # another argument value: computed
    view(b, 4)
    assert calls[-1] == ("session:b", 4) and len(calls) == 3  # another model: computed


def test_the_model_is_not_hashed():
    """A model object st.cache_data cannot hash (a lambda) passes: only the key counts."""
    @per_model(name="test.unhashed")
    def view(e: LabModel) -> str:
        return e.key

    try:
        assert view(entry("shipped:x.pt", model=lambda: None)) == "shipped:x.pt"
    finally:
        view.clear()


def test_max_entries_bounds_the_cache():
    """per_model's max_entries reaches st.cache_data: with 1 it keeps one view."""
    calls = []

    @per_model(name="test.bounded", max_entries=1)
    def view(e: LabModel) -> str:
        calls.append(e.key)
        return e.key

    try:
        a, b = entry("session:a"), entry("session:b")
        view(a), view(b), view(a)
        assert calls == ["session:a", "session:b", "session:a"]  # b pushed a out
    finally:
        view.clear()


SESSION_CALLS: list = []  # the script below appends every computation; it runs in this process


def _session_script():
    import streamlit as st
    import test_cache
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from ui.cache import per_model
    from ui.state import LabModel

    from helpers import tiny_model

    @per_model(name="test.session")
    def view(e: LabModel, period: int) -> dict:
        test_cache.SESSION_CALLS.append(e.key)
        return {"key": e.key, "period": period}

    mine = LabModel("session:mine", "mine", tiny_model(0, seed=0), {"task": None}, "trained")
    got = view(mine, 4)
    st.session_state["first"] = dict(got)
    got["period"] = None  # a caller may change what it got: the cached view is not changed
    st.session_state["again"] = view(mine, 4)
    st.session_state["session_id"] = get_script_run_ctx().session_id


def test_a_sessions_own_views_are_cached_for_that_session_only_and_go_when_it_disconnects():
    """The views of a session's own model are in a session-scoped cache, which Streamlit
    clears when the session disconnects (AppSession.clear_session_caches, called here as the
    session manager does). Two reruns compute once; after the disconnect's clearing the view is
    computed again, so nothing of it was in the server-wide cache either."""
    from streamlit.runtime.caching import clear_session_data_cache
    from streamlit.testing.v1 import AppTest

    SESSION_CALLS.clear()
    alice = AppTest.from_function(_session_script)
    alice.run()
    alice.run()
    assert not alice.exception and SESSION_CALLS == ["session:mine"]
    assert alice.session_state["again"] == alice.session_state["first"] == {"key": "session:mine", "period": 4}
    clear_session_data_cache(alice.session_state["session_id"])
    alice.run()
    assert not alice.exception and SESSION_CALLS == ["session:mine", "session:mine"]


# ---------------------------------------------------------------------------------------------
# The shipped data behind per_model (ui/shipped_data.py)

import ast  # noqa: E402
import importlib.metadata  # noqa: E402
import os  # noqa: E402

import ui.cache as cache  # noqa: E402
from ui import shipped_data  # noqa: E402
from ui.model_keys import shipped_key  # noqa: E402
from ui.state import shipped_digest  # noqa: E402

from helpers import ROOT, SHIPPED, TWO_BLOCK, assert_same  # noqa: E402


@pytest.fixture
def data(tmp_path, monkeypatch):
    """An empty checkpoints/data/ and the calls that reach past the memory cache, recorded."""
    monkeypatch.setattr(shipped_data, "DATA_DIR", tmp_path / "data")
    monkeypatch.setattr(shipped_data, "recorded", [])
    return tmp_path / "data"


def shipped(file=TWO_BLOCK, model=None, sha256=None) -> LabModel:
    """An entry of a shipped checkpoint (its file and its bytes' sha256), with a stand-in model."""
    return LabModel(shipped_key(file), file, tiny_model(1, seed=0) if model is None else model, {"task": None},
                    "shipped", file, None, sha256 or shipped_digest(file))


def _view(calls: list, version: int = 1, scale: float = 1.0):
    @per_model(name="test.planted", version=version)
    def planted(e: LabModel, period: int) -> dict:
        calls.append((e.key, period))
        return {"sum": np.float32(e.model.W_E.detach().sum().item() * scale), "period": period,
                "rows": np.arange(period, dtype=np.float32) * scale}
    return planted


def _ship_calls(*views_and_args) -> dict:
    """What `python -m ui.cache --ship` writes after a walk that made these calls (the real checkpoints' info too)."""
    shipped_data.recorded = []
    for view, args in views_and_args:
        view.clear()
        view(*args)
    return cache.write_shipped(shipped_data.recorded)


def test_a_shipped_view_is_read_for_its_checkpoint_and_version_and_nothing_else_counts(data, monkeypatch):
    """Written once, a shipped view is read by a new process (the memory cache gone) without computing; a
    new version or a checkpoint with other bytes computes it; the code and the libraries' versions are not
    in the key: a host whose torch reports `2.13.0` reads what `2.13.0+cpu` wrote."""
    calls = []
    view = _view(calls)
    got = _ship_calls((view, (shipped(), 4)))
    path = shipped_data.path_of(shipped_digest(TWO_BLOCK), "test.planted")
    assert got["written"] == [path] and path.parent.name == shipped_digest(TWO_BLOCK)[:16] and len(calls) == 1
    first = view(shipped(), 4)
    view.clear()
    shipped_data.recorded = []
    assert_same(view(shipped(), 4), first)
    assert len(calls) == 1 and [c.computed for c in shipped_data.recorded] == [False]  # read, not computed

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.13.0" if name == "torch" else real(name))
    view.clear()
    assert_same(view(shipped(), 4), first) and len(calls) == 1

    view.clear()  # a new process whose code says version 2 (the same function: st.cache_data counts it one)
    bumped = _view(calls, version=2)
    bumped(shipped(), 4)
    assert len(calls) == 2  # another version: computed
    view.clear()
    view(shipped(), 5)
    assert len(calls) == 3  # another argument: not shipped
    view.clear()
    view(shipped(sha256="0" * 64), 4)
    assert len(calls) == 4  # the checkpoint made again: its old data is not read
    view.clear()


def test_an_edit_that_changes_no_number_writes_no_file_and_a_view_no_page_asks_for_goes(data):
    """Shipping again after a walk that read every view leaves every file as it was (its bytes and its
    modification time); a view no walk asks for any more is removed; a new argument rewrites its file."""
    calls = []
    view, other = _view(calls), _view(calls, scale=2.0)  # one function to st.cache_data, two files (two checkpoints)
    _ship_calls((view, (shipped(), 4)), (other, (shipped(SHIPPED[0]), 3)))
    files = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in shipped_data.shipped_paths()}
    assert len(files) == 2  # one file per checkpoint and view
    again = _ship_calls((view, (shipped(), 4)), (other, (shipped(SHIPPED[0]), 3)))
    assert again["written"] == [] and again["removed"] == [] and again["unchanged"] == len(files)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in shipped_data.shipped_paths()} == files

    fewer = _ship_calls((view, (shipped(), 4)), (view, (shipped(), 6)))
    assert fewer["removed"] == [shipped_data.path_of(shipped_digest(SHIPPED[0]), "test.planted")]
    assert fewer["written"] == [shipped_data.path_of(shipped_digest(TWO_BLOCK), "test.planted")]
    assert sorted(shipped_data.describe(fewer["written"][0]).entries) == [
        '[["e","model",null],["period",4]]', '[["e","model",null],["period",6]]']


def test_a_damaged_or_foreign_file_is_computed_and_a_sessions_own_model_is_never_shipped(data):
    calls = []
    view = _view(calls)
    _ship_calls((view, (shipped(), 4)))
    path = shipped_data.path_of(shipped_digest(TWO_BLOCK), "test.planted")
    good = path.read_bytes()
    for damaged in (good[:-3], good[:40] + bytes([good[40] ^ 1]) + good[41:], b"", good[32:]):
        path.write_bytes(damaged)
        view.clear()
        n = len(calls)
        view(shipped(), 4)
        assert len(calls) == n + 1  # computed, no error
    path.write_bytes(good)
    os.utime(path)
    view.clear()
    shipped_data.recorded = []
    view(LabModel("session:mine", "mine", tiny_model(1), {"task": None}, "trained"), 4)
    assert shipped_data.recorded == []  # neither read nor recorded for the shipped data
    assert shipped_data.read(None, "test.planted", 1, "[]") is shipped_data.MISS


def test_the_ui_modules_import_one_another_without_a_cycle():
    """Every import in ui/ (at the top or inside a function) points one way: a cycle hidden by an import
    inside a function still makes each module half-built while the other imports it."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in (ROOT / "ui").rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[name] = {d for d in deps if d in modules and d not in (name, "ui")}
    assert "ui.state" in graph["ui.cache"] and "ui.shipped_data" in graph["ui.state"]  # the walk sees imports
    done, cycles = set(), []

    def visit(name, path):
        for dep in sorted(graph[name]):
            if dep in path:
                cycles.append(" -> ".join([*path[path.index(dep):], dep]))
            elif dep not in done:
                visit(dep, [*path, dep])
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    assert not cycles, cycles


# ---------------------------------------------------------------------------------------------
# A view's name: given where it is declared, held by one function


def test_a_view_name_is_held_by_one_function():
    """Declaring the same function again (a page's script run) keeps its name; another function asking for
    a name already held is an error where it is declared, and so is a name that is not one."""
    def declare():
        @per_model(name="test.held")
        def view(e: LabModel) -> str:
            return e.key
        return view

    assert declare().view == declare().view == cache.VIEWS["test.held"]

    with pytest.raises(ValueError, match="registered twice"):
        @per_model(name="test.held")
        def another(e: LabModel) -> str:
            return e.key
    with pytest.raises(ValueError, match="registered twice"):
        @cache.per_code(name="test.held")
        def plain(x: int) -> int:
            return x
    with pytest.raises(ValueError, match="info"):
        @per_model(name=shipped_data.INFO)
        def info(e: LabModel) -> str:
            return e.key
    for bad in ("task_view", "Attention.task_view", "attention/task_view", "attention.task view"):
        with pytest.raises(ValueError, match="not a view name"):
            @per_model(name=bad)
            def named(e: LabModel) -> str:
                return e.key


def _declared_views() -> list[tuple[str, int, str]]:
    """(file, line, name) of every per_model/per_code declaration in the pages and ui/, None for a name that
    is not a string literal."""
    found = []
    for path in [*(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            for dec in getattr(node, "decorator_list", []):
                if isinstance(dec, ast.Call) and getattr(dec.func, "id", None) in ("per_model", "per_code"):
                    name = next((k.value for k in dec.keywords if k.arg == "name"), None)
                    found.append((str(path.relative_to(ROOT)), dec.lineno,
                                  name.value if isinstance(name, ast.Constant) else None))
    return found


def test_every_view_of_the_pages_declares_its_own_literal_name():
    """The pages' views are declared across files that one process runs in any order: every name is written
    where its view is (a string, no computed name) and no two declarations share one, so a clash shows here
    rather than on whichever page a visitor opens second."""
    declared = _declared_views()
    assert len(declared) >= 30, declared  # the scan sees the pages' views
    assert not [d for d in declared if d[2] is None], [d for d in declared if d[2] is None]
    names = [d[2] for d in declared]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert all(shipped_data.NAME.fullmatch(n) for n in names), names
