"""`per_model`: the one cache for what a page computes from a model.

A view of a model (its patterns, circuits, patch effects, headline numbers) is computed once per
model and argument values, and kept with st.cache_data. The function takes the model's entry
(ui.state.LabModel) as an argument, and the cache counts the entry by its `key` alone: the key is
unique on the server ("shipped:<file>", "session:<uuid>", "<key>@step<N>" for a snapshot's weights,
ui/steps.py) and stands for one set of weights, so the weights and the info dict are never hashed
(hashing every tensor would cost more than many of the views).

    @per_model(show_spinner="Probing every period…", max_entries=16)
    def sweep(entry: LabModel):
        return analysis.sweep_view(entry.model, entry.task)

Views of a session's own models (trained or uploaded, keys "session:...", and their snapshots' steps)
are kept in a session-scoped st.cache_data instead (issue #30): nobody else can ask for them, and
Streamlit drops them when the session disconnects, where the global cache would keep them for the
server's life (only max_entries bounded them, and most views name none). Outside a script run
(tests, benches) they go to the global cache, as before.

Views of shipped checkpoints (and of their snapshots) are also kept on disk (core/disk_cache.py),
shared by every session, every server process and every restart (issue #30). The disk key names the
file's sha256, the code that computes the view (every file under core/ and the view's own file) and
the argument values, so a regenerated checkpoint or a changed analysis is a new key. The folder is
$ATTENTION_LAB_CACHE, else .cache/attention-lab/ in the repository. An unwritable folder or a full
disk leaves the view in memory only; a damaged entry is computed again.

    python -m ui.cache --warm    # fill the folder with every page's default views of the shipped files
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
from pathlib import Path

import streamlit as st

from core.disk_cache import MISS, DiskStore, Unstorable, code_digest
from ui.model_keys import shipped_file
from ui.state import ROOT, LabModel, shipped_digest
from ui.steps import split_step_key

_log = logging.getLogger(__name__)
_CORE_FILES = sorted((ROOT / "core").rglob("*.py"))
_store: DiskStore | None = None
recorded: list | None = None  # a list: every disk-backed call is appended (fn, args, kwargs, key); tests


def cache_folder() -> Path:
    return Path(os.environ.get("ATTENTION_LAB_CACHE") or ROOT / ".cache" / "attention-lab")


def store() -> DiskStore:
    """The disk store of this process (made again when $ATTENTION_LAB_CACHE changes)."""
    global _store
    folder = cache_folder()
    if _store is None or _store.folder != folder:
        _store = DiskStore(folder)
    return _store


def _entry_key(entry: LabModel) -> str:
    return entry.key


def _model_id(entry: LabModel) -> str | None:
    """What names a shipped model's weights on disk: its file's sha256 (and the snapshot step);
    None for a session's own model, which is never stored."""
    base, step = split_step_key(entry.key)
    file = shipped_file(base)
    if file is None:
        return None
    digest = shipped_digest(file)
    return None if digest is None else f"{digest}@{step}"


def _plain(value) -> bool:
    if value is None or type(value) in (bool, int, float, str):
        return True
    return type(value) in (tuple, list) and all(_plain(v) for v in value)


@functools.cache
def _code_id(source_file: str) -> str:
    return code_digest([*_CORE_FILES, source_file])


def disk_key(fn, args: tuple, kwargs: dict) -> str | None:
    """The disk key of fn(*args, **kwargs), or None when a model is not shipped or an argument is
    not a plain value."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    parts, any_model = [], False
    for name, value in bound.arguments.items():
        if isinstance(value, LabModel):
            model_id = _model_id(value)
            if model_id is None:
                return None
            parts.append([name, "model", model_id])
            any_model = True
        elif _plain(value):
            parts.append([name, value])
        else:
            return None
    if not any_model:
        return None
    source = fn.__code__.co_filename
    try:
        where = str(Path(source).resolve().relative_to(ROOT))
    except ValueError:
        where = source
    return json.dumps([where, fn.__qualname__, _code_id(source), parts])


def _disk_backed(fn):
    @functools.wraps(fn)
    def view(*args, **kwargs):
        key = disk_key(fn, args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        if recorded is not None:
            recorded.append((fn, args, kwargs, key))
        disk = store()
        value = disk.get(key)
        if value is not MISS:
            return value
        value = fn(*args, **kwargs)
        try:
            if not disk.put(key, value):
                _log.info("view cache %s not writable: %s stays in memory", disk.folder, fn.__qualname__)
        except Unstorable as e:
            _log.warning("%s is kept in memory only: %s", fn.__qualname__, e)
        return value
    return view


def _in_a_session() -> bool:
    """Whether this is a script run of a session (a session-scoped cache raises anywhere else)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def own_model(fn, args: tuple, kwargs: dict) -> bool:
    """Whether a model argument of fn(*args, **kwargs) is a session's own ("session:...", at any step)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    return any(isinstance(v, LabModel) and shipped_file(split_step_key(v.key)[0]) is None
               for v in bound.arguments.values())


def per_model(*, show_spinner: bool | str = False, max_entries: int | None = None):
    """st.cache_data(show_spinner, max_entries) for a function of model entries and plain values:
    each LabModel argument counts by its key, every other argument as st.cache_data hashes it. A
    shipped model's views are read from and written to the disk store first; a session's own model's
    views are in a session-scoped cache (the module docstring says why)."""
    options = {"show_spinner": show_spinner, "max_entries": max_entries, "hash_funcs": {LabModel: _entry_key}}
    shared, own = st.cache_data(**options), st.cache_data(scope="session", **options)

    def wrap(fn):
        shipped, session = shared(_disk_backed(fn)), own(fn)

        @functools.wraps(fn)
        def view(*args, **kwargs):
            return (session if _in_a_session() and own_model(fn, args, kwargs) else shipped)(*args, **kwargs)

        def clear():
            shipped.clear()
            if _in_a_session():
                session.clear()

        view.clear = clear
        return view
    return wrap


def warm(files: list[str] | None = None) -> list[dict]:
    """Open every page on each shipped checkpoint (all by default) in AppTest, so every page's
    default views are on disk. Returns one row per checkpoint and page: its exception, if any."""
    from streamlit.testing.v1 import AppTest

    from ui.model_keys import shipped_key
    from ui.pages import ALL_PAGES
    from ui.state import shipped_files

    rows = []
    for file in files or [r["file"] for r in shipped_files()]:
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
        at.run()
        at.selectbox(key="picked_model").set_value(shipped_key(file))
        for page in ALL_PAGES:
            if page.file is not None:
                at.switch_page(page.file)
            at.run()
            rows.append({"checkpoint": file, "page": page.file or "home",
                         "exception": str(at.exception[0].value)[:200] if at.exception else None})
    return rows


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="The disk cache of the shipped checkpoints' views.")
    p.add_argument("--warm", action="store_true", help="open every page on every shipped checkpoint")
    p.add_argument("files", nargs="*", help="only these checkpoint files (default: every shipped one)")
    args = p.parse_args(argv)
    print(f"cache folder: {cache_folder()}")
    if not args.warm:
        return 0
    logging.disable(logging.CRITICAL)
    bad = 0
    for row in warm(args.files or None):
        bad += row["exception"] is not None
        print(f"{row['checkpoint']:<32} {row['page']:<28} {row['exception'] or 'ok'}")
    entries = len(list(cache_folder().glob("*.pt")))
    print(f"{entries} entries in {cache_folder()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
