"""ast.parse for a server with many script threads.

CPython 3.11 keeps the AST converter's recursion counter per interpreter, not per thread (gh-106905;
per thread from 3.12), so two threads parsing at once can fail with "SystemError: AST constructor
recursion depth mismatch". A cold server whose class opened nine pages at once showed it on a page
(the code panels fill their snippets with ast, ui/snippets/fill.py). Every parse the app makes goes
through this one lock; Streamlit's own parse of each page (its "magic") is switched off in
.streamlit/config.toml for the same reason.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename)
