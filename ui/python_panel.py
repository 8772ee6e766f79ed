""""In Python" panels: the exact `core` calls behind a panel, for the widget values on screen.

A page builds a `Snippet` with a builder from the ui/snippets/ package (one module per page) and
shows it with one call:

    python_panel(snippets.attention_scores(entry, period, seed, text), shows={"scores": table}, where=col)

`shows` holds the numbers the panel draws (the same objects the page just rendered). Every snippet
shown in a run is also kept, in order, in st.session_state["python_snippets"]: the page's notebook
(ui/notebook.py) is made from that list, and tests/test_python_panels.py runs each snippet in a
fresh interpreter from the repository root and compares its `checks` with `shows`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

RUN_KEY = "python_snippets"
RECORD_KEY = "python_snippets_record"  # set by tests: keep the shown numbers too (they cost memory)


@dataclass
class Snippet:
    """title: one sentence saying what the code computes (the notebook's text cell); code: runnable
    from the repository root; checks: name -> an expression, evaluated after `code` has run, whose
    value is what the page shows under the same name."""

    title: str
    code: str
    checks: dict[str, str] = field(default_factory=dict)


def plain(value: Any) -> Any:
    """Numbers, arrays and frames as JSON-ready nested lists of floats (strings kept)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    return value if value is None or isinstance(value, str) else str(value)


def begin_run() -> None:
    """Called by dashboard.py before a page runs: the page's snippets start afresh."""
    import streamlit as st

    st.session_state[RUN_KEY] = []


def python_panel(snippet: Snippet, shows: dict[str, Any] | None = None, where=None) -> None:
    """Draw the snippet in a closed expander (in `where`, a column or container, if given) and
    record it with the numbers the page shows."""
    import streamlit as st

    where = where or st
    with where.expander("🐍 In Python", expanded=False):
        st.caption(snippet.title + " Run it from the repository root (`python` or a notebook).")
        st.code(snippet.code, language="python")
    record = st.session_state.get(RECORD_KEY)
    st.session_state.setdefault(RUN_KEY, []).append(
        {"title": snippet.title, "code": snippet.code, "checks": dict(snippet.checks),
         "shows": {k: plain(v) for k, v in (shows or {}).items()} if record else {}})
