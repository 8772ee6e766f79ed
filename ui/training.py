"""The server's one pool of training processes (core.runs.RunPool) and this session's name in it.

The pool lives at module level, so every session of this server process shares it; a session's runs
are found by its owner name, which no other session knows. A session that Streamlit no longer
counts as active (the tab was closed) loses its runs after core.runs.OWNER_GRACE seconds.
"""
from __future__ import annotations

import atexit
import threading
import uuid

import streamlit as st

from core.runs import RunPool
from core.slots import capacity_from_env

_pool: RunPool | None = None
_problem: str | None = None
_lock = threading.Lock()


def _session_id(owner: str) -> str:
    return owner.split("|", 1)[0]


def _session_alive(owner: str) -> bool:
    """Whether the Streamlit session that owns a run is still connected (always, without a runtime)."""
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(_session_id(owner))


def run_pool() -> RunPool:
    """The pool of this server process, created on first use (capacity: ATTENTION_LAB_MAX_TRAININGS)."""
    global _pool, _problem
    with _lock:
        if _pool is None:
            capacity, _problem = capacity_from_env()
            _pool = RunPool(capacity, is_alive=_session_alive)
            atexit.register(_pool.shutdown)
        return _pool


def pool_problem() -> str | None:
    """Why ATTENTION_LAB_MAX_TRAININGS was ignored, if it was."""
    run_pool()
    return _problem


def session_owner() -> str:
    """This session's owner name in the pool: "<Streamlit session id>|<random>"."""
    if "train_owner" not in st.session_state:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        st.session_state["train_owner"] = f"{ctx.session_id if ctx else 'local'}|{uuid.uuid4().hex}"
    return st.session_state["train_owner"]
