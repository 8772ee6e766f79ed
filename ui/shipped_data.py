"""The shipped data: every page's default views of each shipped checkpoint, stored as plain files, and the one
place that reads them (`first`).

    checkpoints/data/<sha256>/<view>.view    e.g. data/3f0c…(16 hex digits)/attention.task_view.view
    checkpoints/data/no-model/<view>.view    views of plain values alone (ui.cache.per_code)

One file per checkpoint and view, keyed by three things and nothing else: the checkpoint's sha256 (its folder
is the first 16 hex digits, the header holds all 64), the view's registered name ("attention.task_view",
given where the view is declared: ui.cache.per_model) and the view's version (1 unless raised; INFO_VERSION
for a checkpoint's info). It holds one value for each argument set the pages' defaults ask of the view (the
model counted by its snapshot step). Neither the code's place (file, function, class: core.model.stored names
the classes) nor the libraries' versions are in the key: moving a page or renaming a function changes no
file here, and a host whose torch wheel reports `2.13.0` reads what `2.13.0+cpu` wrote. When a view's numbers
do change, tests/test_shipped_views.py recomputes every entry and says which version to raise;
`python -m ui.cache --ship` then writes what is missing or stale and leaves the rest.

A file is the sha256 of the rest, then ui.safe_form's payload: a JSON header (the key above and each value's
tree) and the arrays' bytes. Reading runs json.loads and np.frombuffer, never pickle, and needs no torch
(ui.state.ShippedModel: a page that reads shipped views loads no checkpoint). A damaged, foreign or stale file
is a miss: the view is computed, as for any model.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import threading
from pathlib import Path

from ui.safe_form import decode, encode, from_payload, to_payload

FORMAT = 2  # of the file (not of any value): raise it when the layout below changes
DATA_DIR = Path(__file__).resolve().parents[1] / "checkpoints" / "data"
NO_MODEL = "no-model"  # the folder of views of no model (a checkpoint's folder: its sha256's first 16 digits)
SUFFIX = ".view"
MISS = object()
NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")  # a view's name: "<where it is shown>.<what>"

INFO = "checkpoint.info"  # a checkpoint's info without its snapshots' weights (ui.state.ShippedModel.info)
INFO_VERSION = 1  # raise when core.model.info.info_view's output changes

_log = logging.getLogger(__name__)
read_shipped = True  # False: every view is computed (`--ship --fresh`, tests/test_shipped_views.py)


def folder_of(sha256: str | None) -> Path:
    """The folder of the views of the checkpoint whose bytes have `sha256` (None: of no model)."""
    return DATA_DIR / (NO_MODEL if sha256 is None else sha256[:16])


def path_of(sha256: str | None, name: str) -> Path:
    """<folder>/attention.task_view.view"""
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a view name (lower-case words joined by dots: 'attention.task_view')")
    return folder_of(sha256) / f"{name}{SUFFIX}"


class File:
    """One file read whole: its header fields and each entry's value tree, by argument key."""

    def __init__(self, path: Path):
        data = bytearray(path.read_bytes())  # mutable: the arrays decoded from it are writable, not copied
        payload = memoryview(data)[32:]
        if hashlib.sha256(payload).digest() != data[:32]:
            raise ValueError(f"{path.name}: checksum")
        header, self.buffers = from_payload(payload)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError(f"{path.name}: not a shipped-data file of format {FORMAT}")
        self.name, self.version, self.sha256 = header["name"], header["version"], header["sha256"]
        self.entries = {key: tree for key, tree in header["entries"]}

    def value(self, key: str):
        return decode((self.entries[key], self.buffers))

    def values(self) -> dict:
        return {key: self.value(key) for key in self.entries}


_read_lock = threading.Lock()
_files: dict[Path, tuple] = {}  # path -> (mtime_ns, size, File or None): each file parsed once per process


def _file(path: Path) -> File | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    seen = _files.get(path)
    if seen is not None and seen[:2] == (stat.st_mtime_ns, stat.st_size):
        return seen[2]
    try:
        got = File(path)
    except (OSError, ValueError, KeyError, TypeError):
        got = None
    with _read_lock:
        _files[path] = (stat.st_mtime_ns, stat.st_size, got)
    return got


def read(sha256: str | None, name: str, version: int, key: str):
    """The shipped value of view `name` at `version` for argument key `key` on the checkpoint whose bytes
    have `sha256` (None: a view of no model), or MISS."""
    f = _file(path_of(sha256, name))
    if f is None or f.name != name or f.version != version or f.sha256 != sha256 or key not in f.entries:
        return MISS
    try:
        return f.value(key)
    except Exception:  # noqa: BLE001 -- a value that does not decode (a stored name since removed): computed
        return MISS


def file_bytes(sha256: str | None, name: str, version: int, values: dict) -> bytes:
    """A file's bytes for `values` ({argument key: value}), the same bytes for the same values in any order."""
    buffers: list = []
    entries = [[key, encode(values[key], buffers)[0]] for key in sorted(values)]
    header = {"format": FORMAT, "name": name, "version": version, "sha256": sha256, "entries": entries}
    payload = to_payload((header, buffers))
    return hashlib.sha256(payload).digest() + payload


def write(sha256: str | None, name: str, version: int, values: dict) -> bool:
    """Write the file of view `name` on the checkpoint of `sha256` unless it holds these bytes already; True
    when written. Written beside and renamed: a reader sees the old file or the new one."""
    path = path_of(sha256, name)
    data = file_bytes(sha256, name, version, values)
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def shipped_paths() -> list[Path]:
    """Every file under DATA_DIR (a stray one is reported by tests/test_shipped_views.py)."""
    return sorted(p for p in DATA_DIR.rglob("*") if p.is_file()) if DATA_DIR.is_dir() else []


def describe(path: Path) -> File:
    """The file at `path`, parsed (ValueError when it is not a whole shipped-data file)."""
    return File(path)


def args_key(parts: list) -> str:
    """The argument key of a view's bound arguments [[name, value] or [name, "model", step], ...]."""
    return json.dumps(parts, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# The one read path: a value read from the shipped data where it can be there, else computed


@dataclasses.dataclass
class Call:
    """One value asked of the shipped data (`recorded`): a view of a shipped checkpoint or of no model."""
    view: str  # its name, "attention.task_view"
    version: int
    fn: object  # what computes it (the view's own function, not cached)
    args: tuple
    kwargs: dict
    checkpoint: str | None  # the shipped file it was asked of (a label: the key is its sha256), None for no model
    sha256: str | None
    key: str  # the argument key (args_key)
    value: object
    computed: bool  # False: read from the shipped data


recorded: list[Call] | None = None  # a list: every call is appended (the ship walk, tests, bench/page_times.py)


def first(name: str, version: int, checkpoint: str | None, sha256: str | None, key: str, fn, args: tuple = (),
          kwargs: dict | None = None):
    """fn(*args, **kwargs), read from the shipped data (view `name` at `version`, argument key `key`, on the
    checkpoint of `sha256`) when it is there."""
    kwargs = kwargs or {}
    value = read(sha256, name, version, key) if read_shipped else MISS
    computed = value is MISS
    if computed:
        if read_shipped:
            _log.info("%s on %s is not shipped (python -m ui.cache --ship): computed", name, checkpoint or "no model")
        value = fn(*args, **kwargs)
    if recorded is not None:
        recorded.append(Call(name, version, fn, args, kwargs, checkpoint, sha256, key, value, computed))
    return value
