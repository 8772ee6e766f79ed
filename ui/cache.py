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

    python -m ui.cache --warm    # prune it, then fill it with every page's default views of the shipped files
                                 # (and their charts' specs, ui/charts/kept.py)
    python -m ui.cache --prune   # only prune: stale entries, then the least recently used past the bound

The views of every page's defaults on every shipped file are also shipped, in checkpoints/views/ (a
read-only base under the folder, core.disk_cache.DiskStore): a server on a fresh clone, such as a hosted
app woken from sleep, reads them instead of computing them. They are made by the same walk as --warm,
from an empty folder, whenever the shipped files or the code behind them change (tests/test_shipped_views.py
fails while they are stale):

    python -m ui.cache --ship    # checkpoints/views/ afresh

A view of plain values alone, the same whatever model is picked, is `per_code`: stored and shipped the same
way, under its code and arguments. A shipped model's info (config, task, training history, snapshot steps)
is a view too (`shipped_info`), so
a page that reads stored views loads no checkpoint and imports no torch (ui.state.ShippedModel,
core/model/lazy.py).

Entries are never read once their code or file has changed, so the folder is pruned by their tags
(core.disk_cache.DiskStore.prune): once per server, on a thread of its own, after its first script run
and a few quiet seconds (ui/setup.py), and by --warm and --prune. What is left is bounded in bytes
(core.disk_cache.MAX_BYTES).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import streamlit as st

from core.disk_cache import MISS, SUFFIX, TAG_END, DiskStore, Unstorable, code_digest, file_digest
from ui.model_keys import shipped_file
from ui.state import CHECKPOINT_DIR, ROOT, LabModel, ShippedModel, shipped_digest
from ui.steps import split_step_key

_log = logging.getLogger(__name__)
_CORE_FILES = sorted((ROOT / "core").rglob("*.py"))
_store: DiskStore | None = None
SHIPPED_VIEWS = CHECKPOINT_DIR / "views"
shipped_views: Path | None = SHIPPED_VIEWS  # the store's read-only base (None: tests that start from nothing)
recorded: list | None = None  # a list: every disk-backed call is appended (fn, args, kwargs, key, tag); tests
computed: dict | None = None  # a dict: each view computed on a miss, by disk key (tests compare the stored copy)


_run = threading.local()  # per script run (its thread): whether the chart specs it converts are stored


def store_chart_specs(on: bool) -> None:
    """Whether the chart specs this script run converts are stored in the folder (ui/charts/kept.py;
    dashboard.py: while a shipped model is picked, whose charts any session and any later server process
    draws again; a session's own model's never are). Here, not in kept.py, so that dashboard.py does not
    import Altair for pages without charts. Stored specs are read by every run."""
    _run.store = on


def chart_specs_stored() -> bool:
    return getattr(_run, "store", False)


def cache_folder() -> Path:
    return Path(os.environ.get("ATTENTION_LAB_CACHE") or ROOT / ".cache" / "attention-lab")


def store() -> DiskStore:
    """The disk store of this process, over the shipped views (made again when $ATTENTION_LAB_CACHE or
    `shipped_views` changes)."""
    global _store
    folder = cache_folder()
    if _store is None or _store.folder != folder or _store.base != shipped_views:
        _store = DiskStore(folder, base=shipped_views)
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
def _core_id(files: tuple) -> str:
    return code_digest(files)


@functools.cache
def _code_id(source_file: str) -> str:
    """The code a view defined in `source_file` depends on: every file under core/ (read and hashed once
    per process, not once per source file: 40 sources x 80 files was about 1 CPU-s of a new process's
    first pages) and its own file."""
    return hashlib.sha256(f"{_core_id(tuple(_CORE_FILES))} {code_digest([source_file])}".encode()).hexdigest()


def disk_entry(fn, args: tuple, kwargs: dict, model_free: bool = False) -> tuple[str, str] | None:
    """(key, tag) of fn(*args, **kwargs) on disk, or None when a model is not shipped or an argument
    is not a plain value. The tag names what makes the entry stale (entry_tag). model_free: a function of
    plain values alone (per_code) is stored too, under its code and arguments."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    parts, digests = [], set()
    for name, value in bound.arguments.items():
        if isinstance(value, LabModel):
            model_id = _model_id(value)
            if model_id is None:
                return None
            parts.append([name, "model", model_id])
            digests.add(model_id.split("@", 1)[0])
        elif _plain(value):
            parts.append([name, value])
        else:
            return None
    if not digests and not model_free:
        return None
    source = fn.__code__.co_filename
    try:
        where = str(Path(source).resolve().relative_to(ROOT))
    except ValueError:
        where = source
    code = _code_id(source)
    return json.dumps([where, fn.__qualname__, code, parts]), entry_tag(code, digests)


def disk_key(fn, args: tuple, kwargs: dict) -> str | None:
    """The disk key of fn(*args, **kwargs) (disk_entry's), or None."""
    entry = disk_entry(fn, args, kwargs)
    return None if entry is None else entry[0]


TAG_CHARS = 12  # hex digits of the code and file digests in an entry's tag


def entry_tag(code: str, digests: set[str]) -> str:
    """The tag "<code>-<file>": the view's code id and the sha256 of the one checkpoint file it reads, cut to
    TAG_CHARS ("multi" for a view of several files, which prune judges by its code alone)."""
    file = next(iter(digests))[:TAG_CHARS] if len(digests) == 1 else "multi"
    return f"{code[:TAG_CHARS]}-{file}"


_CHART_CODE = [ROOT / "ui" / "charts" / "kept.py", ROOT / "ui" / "charts" / "__init__.py"]


@functools.cache
def _chart_libraries() -> str:
    """Altair's and Streamlit's versions, read from their metadata (prune asks for chart tags, and must not
    import Altair)."""
    from importlib.metadata import version

    return f"altair {version('altair')} streamlit {version('streamlit')}"


@functools.cache
def _chart_code(source: str) -> str:
    """What makes a chart spec from a builder in `source`: that file, ui/charts/kept.py and
    ui/charts/__init__.py (which patches Altair), and Altair's and Streamlit's versions."""
    return hashlib.sha256(f"chart-spec {code_digest([Path(source), *_CHART_CODE])} {_chart_libraries()}".encode()
                          ).hexdigest()


def chart_spec_entry(source: str, key: str) -> tuple[str, str]:
    """(disk key, tag) of the spec a builder in `source` makes for its arguments' `key` (ui/charts/kept.py):
    the key names that code and the arguments' content digest, no model; the tag is "<code>-multi", so
    prune keeps the entry while that code is unchanged (core/ makes the arguments, not the spec)."""
    code = _chart_code(source)
    return f"{code}:{key}", entry_tag(code, set())


def _chart_sources() -> list[Path]:
    return sorted((ROOT / "ui" / "charts").glob("*.py"))


def _view_sources() -> list[Path]:
    """Every file that may define a view (a per_model function): the pages and ui/."""
    return sorted([*(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").rglob("*.py")])


def live_tag():
    """A test for prune: whether a tag names current code (of a file _view_sources lists) and a
    shipped file as it is on disk now (read here, not through the server's loaded models, so it runs
    on any thread)."""
    from ui.state import CHECKPOINT_DIR, shipped_files

    codes = {_code_id(str(f))[:TAG_CHARS] for f in _view_sources()}
    codes |= {_chart_code(str(f))[:TAG_CHARS] for f in _chart_sources()}
    files = {"multi"}
    for row in shipped_files():
        with contextlib.suppress(OSError):
            files.add(file_digest(CHECKPOINT_DIR / row["file"])[:TAG_CHARS])

    def live(tag: str | None) -> bool:
        code, _, file = (tag or "").partition("-")
        return code in codes and file in files
    return live


def stale_shipped_views() -> list[str]:
    """The names of checkpoints/views/'s entries whose tag names older code or a regenerated file (never read:
    `--ship` makes them again)."""
    live = live_tag()
    return sorted(f.name for f in SHIPPED_VIEWS.glob(f"*{SUFFIX}") if not live(f.name.rsplit(TAG_END, 1)[0]))


def forget_in_memory() -> None:
    """Drop what this process holds that a new server would not: views, loaded models, kept charts (a spec
    is stored only when it is converted, so a chart already in memory would never reach the folder)."""
    from ui.charts import kept

    st.cache_data.clear()
    st.cache_resource.clear()
    kept.clear()


def prune(max_bytes: int | None = None, disk: DiskStore | None = None) -> dict:
    """Remove the folder's stale entries (older code, regenerated files, entries from before tags),
    then the least recently used past max_bytes (core.disk_cache.MAX_BYTES)."""
    kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
    return (disk or store()).prune(live_tag(), **kwargs)


def prune_in_background(quiet=None) -> None:
    """prune() of the current folder on a daemon thread (ui/setup.py's lab_script, once per server):
    a first visitor does not wait for it. A reader that loses an entry to it computes the view again.
    `quiet`: a test polled every second; the prune starts once it says yes (ui/setup.py: no script run
    for a few seconds, so that it does not take the interpreter from a class's first pages)."""
    disk = store()

    def run():
        while quiet is not None and not quiet():
            time.sleep(1.0)
        try:
            _log.info("view cache %s pruned: %s", disk.folder, prune(disk=disk))
        except Exception:  # noqa: BLE001 -- pruning is housekeeping: the cache works without it
            _log.exception("could not prune the view cache")

    threading.Thread(target=run, name="attention-lab-cache-prune", daemon=True).start()


def _disk_backed(fn, model_free: bool = False):
    @functools.wraps(fn)
    def view(*args, **kwargs):
        entry = disk_entry(fn, args, kwargs, model_free)
        if entry is None:
            return fn(*args, **kwargs)
        key, tag = entry
        if recorded is not None:
            recorded.append((fn, args, kwargs, key, tag))
        disk = store()
        value = disk.get(key, tag)
        if value is not MISS:
            return value
        value = fn(*args, **kwargs)
        if computed is not None:
            computed[key] = value
        try:
            if not disk.put(key, value, tag):
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
    options = {"show_spinner": show_spinner, "max_entries": max_entries,
               "hash_funcs": {LabModel: _entry_key, ShippedModel: _entry_key}}
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


def per_code(*, show_spinner: bool | str = False, max_entries: int | None = None):
    """st.cache_data for a view of plain values alone, the same whatever model is picked (the Archetypes page's
    generated patterns), also kept on disk and shipped like per_model's views: under its code and argument
    values, tagged "<code>-multi" (stale once the code changes)."""
    def wrap(fn):
        return st.cache_data(show_spinner=show_spinner, max_entries=max_entries)(_disk_backed(fn, model_free=True))
    return wrap


@per_model()
def shipped_info(entry: LabModel) -> dict:
    """A shipped checkpoint's info (core.model.checkpoints.read_checkpoint's) with each snapshot's step and
    not its weights: what the sidebar and the pages read of a shipped model (ui.state.ShippedModel), stored
    with its views, so that a server reading them loads no checkpoint and imports no torch."""
    info = entry.full_info
    return {**info, "snapshots": [{"step": s["step"]} for s in info["snapshots"]]}


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


def ship(folder: Path = SHIPPED_VIEWS) -> list[dict]:
    """Make `folder` (the shipped views) afresh: warm()'s walk over every shipped file into an empty
    folder with no base under it, so that every view is computed by the code as it is now. The old
    folder is replaced only when every page opened without an exception. Returns warm()'s rows."""
    global shipped_views
    new = folder.with_name(folder.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    env, base = os.environ.get("ATTENTION_LAB_CACHE"), shipped_views
    os.environ["ATTENTION_LAB_CACHE"], shipped_views = str(new), None
    forget_in_memory()
    try:
        rows = warm()
    finally:
        shipped_views = base
        if env is None:
            os.environ.pop("ATTENTION_LAB_CACHE")
        else:
            os.environ["ATTENTION_LAB_CACHE"] = env
        forget_in_memory()
    if any(r["exception"] for r in rows):
        shutil.rmtree(new, ignore_errors=True)
        return rows
    if not new.is_dir():  # with no base under it, the walk computes every view: this is a bug, not a state
        raise RuntimeError(f"the walk stored nothing in {new}: were the views read from somewhere else?")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for entry in new.glob(f"*{SUFFIX}"):  # the entries only (the walk also builds ext/ under it)
        entry.rename(folder / entry.name)
    shutil.rmtree(new)
    return rows


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="The disk cache of the shipped checkpoints' views.")
    p.add_argument("--warm", action="store_true", help="open every page on every shipped checkpoint")
    p.add_argument("--prune", action="store_true", help="remove stale entries and bound the folder's size")
    p.add_argument("--ship", action="store_true",
                   help=f"make {SHIPPED_VIEWS.relative_to(ROOT)}/ afresh: every page's default views of every "
                        "shipped checkpoint, computed by the code as it is now")
    p.add_argument("files", nargs="*", help="only these checkpoint files (default: every shipped one)")
    args = p.parse_args(argv)
    if args.ship:
        if args.files:
            p.error("--ship walks every shipped checkpoint: name no files")
        logging.disable(logging.CRITICAL)
        rows = ship()
        for row in rows:
            print(f"{row['checkpoint']:<32} {row['page']:<28} {row['exception'] or 'ok'}")
        if any(r["exception"] for r in rows):
            print(f"{SHIPPED_VIEWS} left as it was: a page failed")
            return 1
        files = list(SHIPPED_VIEWS.glob(f"*{SUFFIX}"))
        print(f"{len(files)} entries, {sum(f.stat().st_size for f in files) / 2**20:.2f} MB in {SHIPPED_VIEWS}")
        return 0
    print(f"cache folder: {cache_folder()}")
    if args.warm or args.prune:
        print("pruned: " + ", ".join(f"{k} {v}" for k, v in prune().items()))
    if not args.warm:
        return 0
    logging.disable(logging.CRITICAL)
    bad = 0
    for row in warm(args.files or None):
        bad += row["exception"] is not None
        print(f"{row['checkpoint']:<32} {row['page']:<28} {row['exception'] or 'ok'}")
    entries = len(list(cache_folder().glob(f"*{SUFFIX}")))
    print(f"{entries} entries in {cache_folder()}")
    return 1 if bad else 0


if __name__ == "__main__":
    # the module the pages import, not this __main__ copy of it: ship() switches that one's shipped_views off
    from ui import cache

    sys.exit(cache.main())
