"""`per_model` and `per_code`: the caches of what a page computes, and the command that ships the defaults.

A view of a model (its patterns, circuits, patch effects, headline numbers) is computed once per model and
argument values. The function takes the model's entry (ui.state.LabModel) as an argument, counted by its
`key` alone (ui/model_keys.py: one set of weights per key), so the weights and the info are never hashed:

    @per_model(show_spinner="Probing every period…", max_entries=16)
    def sweep(entry: LabModel):
        return analysis.sweep_view(entry.model, entry.task)

Two layers, each kept because a measurement needs it (docs/DESIGN.md "Caching" gives the figures):

- memory, st.cache_data: a view of a shipped checkpoint (or of plain values, `per_code`) in the cache every
  session shares; a view of a session's own model (trained or uploaded, and its snapshots) in a
  session-scoped one, which Streamlit drops when the session disconnects (the global cache would keep it
  for the server's life, and nobody else can ask for it). Outside a script run (tests, benches) both go
  to the global cache.
- shipped data, checkpoints/data/ (ui/shipped_data.py): on a memory miss, a view of a shipped checkpoint
  is read from there when that checkpoint's bytes and the view's version are the ones it was shipped for.
  Every page's defaults on every shipped checkpoint are there, so a server on a fresh clone (a hosted app
  woken from sleep) computes none of them and, reading them, imports no torch.

A view's `version` (1 unless raised) is its part of the shipped data's key: raise it when the view's
numbers change (tests/test_shipped_views.py recomputes every shipped entry and says so), then

    python -m ui.cache --ship           # write the shipped data that is missing or stale, keep the rest
    python -m ui.cache --ship --fresh   # compute every entry again (another CPU, a doubt)
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import sys
from pathlib import Path

import streamlit as st

from ui import shipped_data
from ui.model_keys import shipped_file, split_step_key
from ui.state import ROOT, LabModel, ShippedModel, shipped_digest, shipped_files

_log = logging.getLogger(__name__)
read_shipped = True  # False: every view is computed (`--ship --fresh`, tests/test_shipped_views.py)


@dataclasses.dataclass
class Call:
    """One view asked of a shipped checkpoint (or of no model) past the memory cache (`recorded`)."""
    view: str  # "app_pages/attention.py:_patterns"
    version: int
    fn: object  # the view's own function (not cached)
    args: tuple
    kwargs: dict
    checkpoint: str | None  # the shipped file, None for a view of plain values alone
    sha256: str | None
    key: str  # the argument key in the shipped data (shipped_data.args_key)
    value: object
    computed: bool  # False: read from the shipped data


recorded: list[Call] | None = None  # a list: every such call is appended (the ship walk, tests, bench/page_times.py)


def view_name(fn) -> str:
    """'app_pages/attention.py:_patterns': the file (in the repository) and the qualified name of a view."""
    source = Path(fn.__code__.co_filename).resolve()
    where = source.relative_to(ROOT).as_posix() if source.is_relative_to(ROOT) else source.name
    return f"{where}:{fn.__qualname__}"


def _plain(value) -> bool:
    if value is None or type(value) in (bool, int, float, str):
        return True
    return type(value) in (tuple, list) and all(_plain(v) for v in value)


def shipped_place(fn, args: tuple, kwargs: dict, model_free: bool = False) -> tuple | None:
    """(checkpoint, its sha256, argument key) of fn(*args, **kwargs) in the shipped data, or None when it
    cannot be there: a session's own model, two checkpoints, an argument that is not a plain value, or (unless
    model_free, a per_code view) no model at all."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    parts, files = [], set()
    for name, value in bound.arguments.items():
        if isinstance(value, LabModel):
            base, step = split_step_key(value.key)
            file = shipped_file(base)
            if file is None:
                return None
            files.add(file)
            parts.append([name, "model", step])
        elif _plain(value):
            parts.append([name, value])
        else:
            return None
    if len(files) > 1 or not (files or model_free):
        return None
    file = next(iter(files), None)
    digest = None if file is None else shipped_digest(file)
    if file is not None and digest is None:
        return None
    return file, digest, shipped_data.args_key(parts)


def _shipped_first(fn, version: int, model_free: bool = False):
    """fn, read from the shipped data first where it can be there."""
    name = view_name(fn)

    @functools.wraps(fn)
    def view(*args, **kwargs):
        place = shipped_place(fn, args, kwargs, model_free)
        value = shipped_data.MISS
        if place is not None and read_shipped:
            value = shipped_data.read(place[0], place[1], name, version, place[2])
        computed = value is shipped_data.MISS
        if computed:
            if place is not None and read_shipped:
                _log.info("%s on %s is not shipped (python -m ui.cache --ship): computed", name, place[0] or "no model")
            value = fn(*args, **kwargs)
        if recorded is not None and place is not None:
            recorded.append(Call(name, version, fn, args, kwargs, *place, value, computed))
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


def _entry_key(entry: LabModel) -> str:
    return entry.key


def per_model(*, show_spinner: bool | str = False, max_entries: int | None = None, version: int = 1):
    """st.cache_data(show_spinner, max_entries) for a function of model entries and plain values: each LabModel
    argument counts by its key, every other argument as st.cache_data hashes it. A shipped model's view is read
    from the shipped data at `version` first; a session's own model's views are in a session-scoped cache."""
    options = {"show_spinner": show_spinner, "max_entries": max_entries,
               "hash_funcs": {LabModel: _entry_key, ShippedModel: _entry_key}}
    shared, own = st.cache_data(**options), st.cache_data(scope="session", **options)

    def wrap(fn):
        shipped, session = shared(_shipped_first(fn, version)), own(fn)

        @functools.wraps(fn)
        def view(*args, **kwargs):
            return (session if _in_a_session() and own_model(fn, args, kwargs) else shipped)(*args, **kwargs)

        def clear():
            shipped.clear()
            if _in_a_session():
                session.clear()

        view.clear, view.version, view.view_name = clear, version, view_name(fn)
        return view
    return wrap


def per_code(*, show_spinner: bool | str = False, max_entries: int | None = None, version: int = 1):
    """st.cache_data for a view of plain values alone, the same whatever model is picked (the Archetypes page's
    generated patterns), shipped like per_model's views under checkpoints/data/no-model/."""
    def wrap(fn):
        view = st.cache_data(show_spinner=show_spinner, max_entries=max_entries)(_shipped_first(fn, version, True))
        view.version, view.view_name = version, view_name(fn)
        return view
    return wrap


# ---------------------------------------------------------------------------------------------
# Shipping: every page's defaults on every shipped checkpoint, into checkpoints/data/


def forget_in_memory() -> None:
    """Drop what this process holds that a new server would not: views, loaded models, kept charts."""
    from ui.charts import kept

    st.cache_data.clear()
    st.cache_resource.clear()
    kept.clear()


def walk(files: list[str] | None = None) -> list[dict]:
    """Open every page on each shipped checkpoint (all by default) in AppTest, as a visitor who changes no
    widget does. Returns one row per checkpoint and page: its exception, if any."""
    from streamlit.testing.v1 import AppTest

    from ui.model_keys import shipped_key
    from ui.pages import ALL_PAGES

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


def recorded_walk(fresh: bool = False) -> tuple[list[dict], list[Call]]:
    """walk() from empty memory caches, every shipped view it asks for recorded (fresh: computed, not read)."""
    global recorded, read_shipped
    forget_in_memory()
    recorded, read_shipped = [], not fresh
    try:
        rows = walk()
    finally:
        calls, recorded, read_shipped = recorded, None, True
        forget_in_memory()
    return rows, calls


def write_shipped(calls: list[Call], fresh: bool = False) -> dict:
    """checkpoints/data/ made to hold exactly the views in `calls` and every shipped checkpoint's info. A file
    all of whose entries were read from it, and only those, is left as it is (so an edit that changes no
    number changes no file); the others are written; a file no call names is removed. Returns the paths
    written and removed, and how many files were left as they were."""
    from core.model.checkpoints import read_checkpoint
    from ui.state import CHECKPOINT_DIR

    groups: dict[tuple, dict] = {}
    for c in calls:
        g = groups.setdefault((c.checkpoint, c.view), {"version": c.version, "sha256": c.sha256, "values": {},
                                                       "read": True})
        g["values"].setdefault(c.key, c.value)
        g["read"] &= not c.computed
    for row in shipped_files():
        file = row["file"]
        digest = shipped_digest(file)
        info = shipped_data.MISS if fresh else shipped_data.read(file, digest, shipped_data.INFO,
                                                                 shipped_data.INFO_VERSION, "[]")
        read = info is not shipped_data.MISS
        if not read:
            info = shipped_data.info_view(read_checkpoint(CHECKPOINT_DIR / file)[1])
        groups[(file, shipped_data.INFO)] = {"version": shipped_data.INFO_VERSION, "sha256": digest,
                                            "values": {"[]": info}, "read": read}
    written, unchanged, keep = [], 0, set()
    for (checkpoint, view), g in groups.items():
        path = shipped_data.path_of(checkpoint, view)
        keep.add(path)
        if g["read"] and _entries(path) == set(g["values"]):
            unchanged += 1
        elif shipped_data.write(checkpoint, g["sha256"], view, g["version"], g["values"]):
            written.append(path)
        else:
            unchanged += 1
    removed = [p for p in shipped_data.shipped_paths() if p not in keep]
    for p in removed:
        p.unlink()
    for folder in sorted(shipped_data.DATA_DIR.glob("*/"), reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return {"written": written, "removed": removed, "unchanged": unchanged}


def _entries(path: Path) -> set | None:
    try:
        return set(shipped_data.describe(path).entries)
    except (OSError, ValueError):
        return None


def ship(fresh: bool = False) -> dict:
    """The shipped data made current: a recorded walk, then write_shipped (nothing written when a page
    failed). Returns the walk's rows and write_shipped's counts."""
    rows, calls = recorded_walk(fresh)
    if any(r["exception"] for r in rows):
        return {"rows": rows, "written": [], "removed": [], "unchanged": 0}
    return {"rows": rows, **write_shipped(calls, fresh)}


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="The shipped data of the pages' default views (checkpoints/data/).")
    p.add_argument("--ship", action="store_true", help="write every page's default views of every shipped "
                   "checkpoint that are missing or stale in checkpoints/data/, and remove what no page asks for")
    p.add_argument("--fresh", action="store_true", help="with --ship: compute every view again, read none")
    args = p.parse_args(argv)
    if not args.ship:
        p.print_help()
        return 0
    logging.disable(logging.CRITICAL)
    got = ship(fresh=args.fresh)
    for row in got["rows"]:
        if row["exception"]:
            print(f"{row['checkpoint']:<32} {row['page']:<28} {row['exception']}")
    if any(r["exception"] for r in got["rows"]):
        print(f"{shipped_data.DATA_DIR} left as it was: a page failed")
        return 1
    for verb in ("written", "removed"):
        for path in got[verb]:
            print(f"{verb}: {path.relative_to(ROOT)}")
    paths = shipped_data.shipped_paths()
    print(f"{len(got['written'])} written, {len(got['removed'])} removed, {got['unchanged']} unchanged; "
          f"{len(paths)} files, {sum(p.stat().st_size for p in paths) / 2**20:.2f} MB in "
          f"{shipped_data.DATA_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    # the module the pages import, not this __main__ copy of it: recorded_walk sets that one's `recorded`
    from ui import cache

    sys.exit(cache.main())
