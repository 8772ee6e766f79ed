"""`per_model` and `per_code`: the caches of what a page computes, each view registered under a stable name, and
the command that ships the defaults.

A view of a model (its patterns, circuits, patch effects, headline numbers) is computed once per model and
argument values. It is declared with its name and, once its numbers change, its version; the function takes
the model's entry (ui.state.LabModel) as an argument, counted by its `key` alone (ui/model_keys.py: one set of
weights per key), so the weights and the info are never hashed:

    @per_model(name="attention.sweep", show_spinner="Probing every period…", max_entries=16)
    def sweep(entry: LabModel):
        return analysis.sweep_view(entry.model, entry.task)

The name ("<page or section>.<what>", unique: a second declaration of it is an error) is the view's identity in
the shipped data; the function's own name and the file it sits in are not, so renaming or moving either
changes nothing stored. A value may hold numbers, strings, arrays, frames and the core classes that
core.model.stored names (`--ship` says which class to add there).

Two layers, each kept because a measurement needs it (docs/DESIGN.md "Caching" gives the figures):

- memory, st.cache_data: a view of a shipped checkpoint (or of plain values, `per_code`) in the cache every
  session shares; a view of a session's own model (trained or uploaded, and its snapshots) in a
  session-scoped one, which Streamlit drops when the session disconnects (the global cache would keep it
  for the server's life, and nobody else can ask for it). Outside a script run (tests, benches) both go
  to the global cache.
- shipped data, checkpoints/data/ (ui/shipped_data.py): on a memory miss, a view of a shipped checkpoint
  is read from there when it holds the view's name and version for that checkpoint's sha256. Every page's
  defaults on every shipped checkpoint (the Markov runs too) are there, so a server on a fresh clone (a
  hosted app woken from sleep) computes none of them and, reading them, imports no torch.

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
from ui.safe_form import Unstorable
from ui.state import ROOT, LabModel, ShippedModel, TrainedModel, shipped_models


@dataclasses.dataclass(frozen=True)
class View:
    """A registered view: its name and version (the shipped data's key) and where it is declared."""
    name: str
    version: int
    declared: tuple  # (file, qualified name) of the function: a page script run again declares it again


VIEWS: dict[str, View] = {}  # every view declared so far in this process, by name


def register(name: str, version: int, fn) -> View:
    """Register `fn` as view `name` at `version`. ValueError when the name is not a view name or another
    function holds it (declaring the same function again, as a page's script run does, replaces it)."""
    if not shipped_data.NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a view name (lower-case words joined by dots: 'attention.task_view')")
    if name == shipped_data.INFO:
        raise ValueError(f"{name!r} is the shipped checkpoints' info (ui.shipped_data.INFO): take another name")
    if type(version) is not int or version < 1:
        raise ValueError(f"view {name}: version {version!r} is not a positive int")
    view = View(name, version, (fn.__code__.co_filename, fn.__qualname__))
    held = VIEWS.get(name)
    if held is not None and held.declared != view.declared:
        raise ValueError(f"view name {name!r} is registered twice: by {held.declared[1]} in {held.declared[0]} "
                         f"and by {view.declared[1]} in {view.declared[0]}")
    VIEWS[name] = view
    return view


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
    parts, models = [], set()
    for name, value in bound.arguments.items():
        if isinstance(value, LabModel):
            if value.sha256 is None:
                return None
            models.add((value.file, value.sha256))
            parts.append([name, "model", value.step])
        elif _plain(value):
            parts.append([name, value])
        else:
            return None
    if len(models) > 1 or not (models or model_free):
        return None
    file, digest = next(iter(models), (None, None))
    return file, digest, shipped_data.args_key(parts)


def _shipped_first(fn, view: View, model_free: bool = False):
    """fn, read from the shipped data first where it can be there."""
    @functools.wraps(fn)
    def shipped(*args, **kwargs):
        place = shipped_place(fn, args, kwargs, model_free)
        if place is None:
            return fn(*args, **kwargs)
        return shipped_data.first(view.name, view.version, *place, fn, args, kwargs)
    return shipped


def _in_a_session() -> bool:
    """Whether this is a script run of a session (a session-scoped cache raises anywhere else)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def own_model(fn, args: tuple, kwargs: dict) -> bool:
    """Whether a model argument of fn(*args, **kwargs) is a session's own (not a shipped file, at any step)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    return any(isinstance(v, LabModel) and v.file is None for v in bound.arguments.values())


def _entry_key(entry: LabModel) -> str:
    return entry.key


def per_model(*, name: str, version: int = 1, show_spinner: bool | str = False, max_entries: int | None = None):
    """st.cache_data(show_spinner, max_entries) for a function of model entries and plain values, registered as
    view `name` at `version`: each LabModel argument counts by its key, every other argument as st.cache_data
    hashes it. A shipped model's view is read from the shipped data first; a session's own model's views are in
    a session-scoped cache."""
    options = {"show_spinner": show_spinner, "max_entries": max_entries,
               "hash_funcs": {LabModel: _entry_key, ShippedModel: _entry_key, TrainedModel: _entry_key}}
    shared, own = st.cache_data(**options), st.cache_data(scope="session", **options)

    def wrap(fn):
        registered = register(name, version, fn)
        shipped, session = shared(_shipped_first(fn, registered)), own(fn)

        @functools.wraps(fn)
        def view(*args, **kwargs):
            return (session if _in_a_session() and own_model(fn, args, kwargs) else shipped)(*args, **kwargs)

        def clear():
            shipped.clear()
            if _in_a_session():
                session.clear()

        view.clear, view.view = clear, registered
        return view
    return wrap


def per_code(*, name: str, version: int = 1, show_spinner: bool | str = False, max_entries: int | None = None):
    """st.cache_data for a view of plain values alone, the same whatever model is picked (the Archetypes page's
    generated patterns), registered and shipped like per_model's views (under checkpoints/data/no-model/)."""
    def wrap(fn):
        registered = register(name, version, fn)
        view = st.cache_data(show_spinner=show_spinner, max_entries=max_entries)(
            _shipped_first(fn, registered, True))
        view.view = registered
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


def _causal_settings() -> list[dict]:
    """The Causal page's sequence source, corruption and researcher view, every combination, the defaults (the
    first of each) first: a first change of any of them on a shipped checkpoint then reads its views."""
    import itertools

    from ui.share import SEQ_MODES

    choices = {"cz_source": list(SEQ_MODES["causal"].values()), "cz_corruption": ["first-copy", "resample"],
               "cz_advanced": [False, True]}
    return [dict(zip(choices, combo)) for combo in itertools.product(*choices.values())]


# page file -> the widget settings whose views are shipped besides a visitor's defaults: each a dict of widget key ->
# value, the page's defaults first (set back after the others), each dict setting the same keys
SHIPPED_SETTINGS: dict[str, list[dict]] = {"app_pages/causal.py": _causal_settings()}


def walk(files: list[str] | None = None, visit=None, visit_setting=None) -> list[dict]:
    """Open every page on each shipped checkpoint (all of them, the Markov runs too, by default) in AppTest, as
    a visitor who changes no widget does, then with each of the page's SHIPPED_SETTINGS; every question's answer
    is drawn (ATTENTION_LAB_PREDICT=off, as after a skip: ui/quiz.py). `visit(entry, page, at)` is called after
    each page's default run (a reader of what the page drew: bench/page_text.py), `visit_setting(entry, page,
    setting, at)` after each run at one of its SHIPPED_SETTINGS. Returns one row per checkpoint, page and setting:
    its exception, if any."""
    import os

    from streamlit.testing.v1 import AppTest

    from ui.pages import ALL_PAGES

    before = os.environ.get("ATTENTION_LAB_PREDICT")
    os.environ["ATTENTION_LAB_PREDICT"] = "off"
    try:
        rows = []
        for entry in shipped_models():
            if files is not None and entry.file not in files:
                continue
            at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
            at.run()
            at.selectbox(key="picked_model").set_value(entry.key)
            for page in ALL_PAGES:
                if page.file is not None:
                    at.switch_page(page.file)
                at.run()
                if visit is not None:
                    visit(entry, page, at)
                rows.append({"checkpoint": entry.file, "page": page.file or "home",
                             "exception": str(at.exception[0].value)[:200] if at.exception else None})
                settings = SHIPPED_SETTINGS.get(page.file, [])
                for setting in settings[1:]:
                    for key, value in setting.items():
                        at.session_state[key] = value
                    at.run()
                    if visit_setting is not None:
                        visit_setting(entry, page, setting, at)
                    rows.append({"checkpoint": entry.file, "page": f"{page.file} {setting}",
                                 "exception": str(at.exception[0].value)[:200] if at.exception else None})
                for key, value in (settings[0] if settings else {}).items():  # back to the defaults
                    at.session_state[key] = value
    finally:
        if before is None:
            os.environ.pop("ATTENTION_LAB_PREDICT", None)
        else:
            os.environ["ATTENTION_LAB_PREDICT"] = before
    return rows


def recorded_walk(fresh: bool = False, files: list[str] | None = None, visit=None,
                  visit_setting=None) -> tuple[list[dict], list]:
    """walk() from empty memory caches, every value it asks of the shipped data recorded (shipped_data.Call;
    fresh: computed, not read)."""
    forget_in_memory()
    shipped_data.recorded, shipped_data.read_shipped = [], not fresh
    try:
        rows = walk(files, visit, visit_setting)
    finally:
        calls, shipped_data.recorded, shipped_data.read_shipped = shipped_data.recorded, None, True
        forget_in_memory()
    return rows, calls


def write_shipped(calls: list) -> dict:
    """checkpoints/data/ made to hold exactly the values in `calls` (shipped_data.Call: views and each
    checkpoint's info). A file all of whose entries were read from it, and only those, is left as it is (so an
    edit that changes no number changes no file); the others are written; a file no call names is removed.
    Returns the paths written and removed, and how many files were left as they were."""
    groups: dict[tuple, dict] = {}
    for c in calls:
        g = groups.setdefault((c.sha256, c.view), {"version": c.version, "values": {}, "read": True})
        if g["version"] != c.version:
            raise ValueError(f"view {c.view} asked at versions {g['version']} and {c.version} in one walk")
        g["values"].setdefault(c.key, c.value)
        g["read"] &= not c.computed
    for (sha256, name), g in groups.items():  # every file's form first: a value with none stops before a write
        try:
            shipped_data.file_bytes(sha256, name, g["version"], g["values"])
        except Unstorable as e:
            raise Unstorable(f"view {name}: {e}") from None
    written, unchanged, keep = [], 0, set()
    for (sha256, name), g in groups.items():
        path = shipped_data.path_of(sha256, name)
        keep.add(path)
        if g["read"] and _entries(path) == set(g["values"]):
            unchanged += 1
        elif shipped_data.write(sha256, name, g["version"], g["values"]):
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
    return {"rows": rows, **write_shipped(calls)}


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
    try:
        got = ship(fresh=args.fresh)
    except Unstorable as e:
        print(f"{shipped_data.DATA_DIR.relative_to(ROOT)} left as it was: {e}")
        return 1
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
    # the module the pages import, not this __main__ copy of it: its views registry is the pages' one
    from ui import cache

    sys.exit(cache.main())
