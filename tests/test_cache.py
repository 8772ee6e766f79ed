"""ui/cache.py's per_model: a view is computed once per model key and argument values, and the
model itself (its weights, its info) is never hashed."""
from __future__ import annotations

import pytest

from ui.cache import per_model
from ui.state import LabModel

from helpers import tiny_model


def entry(key: str, model=None) -> LabModel:
    return LabModel(key, key, tiny_model(1, seed=0) if model is None else model, {"task": None}, "trained")


@pytest.fixture
def counted():
    calls = []

    @per_model(show_spinner=False, max_entries=8)
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
    @per_model()
    def view(e: LabModel) -> str:
        return e.key

    try:
        assert view(entry("shipped:x.pt", model=lambda: None)) == "shipped:x.pt"
    finally:
        view.clear()


def test_max_entries_bounds_the_cache():
    """per_model's max_entries reaches st.cache_data: with 1 it keeps one view."""
    calls = []

    @per_model(max_entries=1)
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

    @per_model()
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
    """Issue #30: the views of a session's own model are in a session-scoped cache, which Streamlit
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
