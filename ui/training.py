"""The server's one pool of training processes (core.pool.runs.RunPool) and this session's name in it.

The pool lives at module level, so every session of this server process shares it; a session's runs
are found by its owner name, which no other session knows. A session that Streamlit no longer
counts as active (the tab was closed) loses its runs after core.pool.runs.OWNER_GRACE seconds.
"""
from __future__ import annotations

import atexit
import threading
import uuid
from typing import TYPE_CHECKING

import streamlit as st

from core.pool.slots import capacity_from_env
from ui import task_pages
from ui.quiz import BY_RUN, record_before, recorded, restore_before
from ui.state import TrainedModel, add_session_entry, new_session_key, pick_on_next_run
from ui.train_form import settings_from_state

if TYPE_CHECKING:
    from core.pool.runs import LiveRun, RunPool

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
    """The pool of this server process, created on first use (capacity: ATTENTION_LAB_MAX_TRAININGS; its
    workers are Ray actors when ATTENTION_LAB_RAY_ADDRESS is set, core.pool.ray_backend)."""
    global _pool, _problem
    from core.pool.ray_backend import backend_from_env
    from core.pool.runs import RunPool  # here: a server whose visitors only read never imports it, nor torch

    with _lock:
        if _pool is None:
            capacity, _problem = capacity_from_env()
            _pool = RunPool(capacity, is_alive=_session_alive, backend=backend_from_env())  # Ray if configured
            atexit.register(_pool.shutdown)
        return _pool


def ensure_monitor() -> None:
    """The pool's monitor thread, started again if it died (ui/setup.py, every script run once this module is
    imported); nothing before the pool exists."""
    if _pool is not None:
        _pool.ensure_monitor()


def pool_problem() -> str | None:
    """Why ATTENTION_LAB_MAX_TRAININGS was ignored, if it was."""
    return capacity_from_env()[1] if _pool is None else _problem


def capacity() -> int:
    """How many trainings the pool runs at once (0: training is off), without making the pool."""
    return capacity_from_env()[0] if _pool is None else _pool.capacity


def session_owner() -> str:
    """This session's owner name in the pool: "<Streamlit session id>|<random>"."""
    if "train_owner" not in st.session_state:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        st.session_state["train_owner"] = f"{ctx.session_id if ctx else 'local'}|{uuid.uuid4().hex}"
    return st.session_state["train_owner"]


# ---------------------------------------------------------------------------------------------
# The Train page's buttons (callbacks)


def register(run: LiveRun) -> bool:
    """Put a finished or stopped run's model in the sidebar picker (once) and pick it; True if it did now."""
    if run.checkpoint is None or run.registered_key:
        return False
    n = 1 + sum(1 for m in st.session_state.get("lab_models", {}).values() if m.source == "trained")
    label = f"trained #{n}: {run.settings.label()}, step {run.step}"
    entry = add_session_entry(TrainedModel(new_session_key(), label, run.checkpoint, run.info), select=False)
    run.registered_key = entry.key
    pick_on_next_run(entry.key)
    return True


def start() -> None:
    old, settings = st.session_state.get("train_run"), settings_from_state()
    if (old is not None and old.active) or settings.problem():
        return
    run = st.session_state["train_run"] = run_pool().start(settings, session_owner())  # ends this session's old run
    if task_pages.own(settings.kind, "train_result") is None:  # the task whose results grade the Train page's
        record_before(run.id)  # predictions: the ones made before this press are this run's


def start_own_copy() -> None:
    """Train the settings of the run this session follows (another session's) in a training of its own."""
    old = st.session_state.get("train_run")
    if old is None or not old.shared:
        return
    run = st.session_state["train_run"] = run_pool().start(old.settings, session_owner(), private=True)
    if old.id in st.session_state.get(BY_RUN, {}):  # the same settings trained again: the same predictions
        st.session_state[BY_RUN][run.id] = {"given": dict(recorded(old.id)), "grades": {}}


def shared_note(run: LiveRun) -> str:
    """One line: this run is another session's training (or its finished result), not one of its own."""
    if run.shared == "finished":
        return ("These settings, this seed and this code were already trained on this server, so you got that "
                "run at once: the very model your own training would make.")
    return ("These settings, this seed and this code are already training on this server, so you are watching "
            "that run: it ends with the very model your own training would make.")


STOP_ANSWER = 0.4  # seconds the Stop button waits for the model before the page answers "Stopping…": the worker
# finishes its step and sends the model in about 0.3 s at the defaults; after a longer step (a large batch) the
# page says "Stopping…" and its live fragment draws the model when it lands (bench/train_page_time.py)


def stop() -> None:
    run = st.session_state.get("train_run")
    if run is not None:
        run_pool().stop(run, wait_seconds=STOP_ANSWER)
        register(run)


def reset() -> None:
    run = st.session_state.pop("train_run", None)
    if run is not None:
        if run.active and recorded(run.id):  # discarded before it could grade them: the next run's again
            restore_before(run.id)
        run_pool().discard(run)


def follow_series(key: str, drawn_key: str, draw) -> None:
    """The body of a page's once-a-second fragment for the background series (core.series.run_series) in
    st.session_state[key]: draw(series); when it has ended, rerun the whole page once, so that its buttons
    are enabled again (`drawn_key` remembers whether the last drawing saw it active)."""
    series = st.session_state.get(key)
    if series is None:
        return
    draw(series)
    if not series.active and st.session_state.get(drawn_key):
        st.session_state[drawn_key] = False
        st.rerun()
    st.session_state[drawn_key] = series.active
