"""The shipped data: every page's default views of each shipped checkpoint, stored beside it as plain files.

    checkpoints/data/<checkpoint>/<view>.view   e.g. variable-period-2block/app_pages.attention._patterns.view
    checkpoints/data/no-model/<view>.view       views of plain values alone (ui.cache.per_code)

One file per checkpoint and view. It names the checkpoint's sha256, the view ("app_pages/attention.py:_patterns")
and the view's version, and holds one value for each argument set the pages' defaults ask of it (the model
counted by its snapshot step). A read hits only when the sha256 is that of the checkpoint as it is now and the
version is the view's version now (`per_model(version=N)`, 1 unless raised; INFO_VERSION for a checkpoint's
info). Nothing else is in the key, neither the code nor the libraries' versions: an edit that changes no
number changes no file here, and a host whose torch wheel reports `2.13.0` reads what `2.13.0+cpu` wrote.
When a view's numbers do change, tests/test_shipped_views.py recomputes every entry and says which
version to raise; `python -m ui.cache --ship` then writes what is missing or stale and leaves the rest.

A file is the sha256 of the rest, then ui.safe_form's payload: a JSON header (the names above and each
value's tree) and the arrays' bytes. Reading runs json.loads and np.frombuffer, never pickle, and needs
no torch (ui.state.ShippedModel: a page that reads shipped views loads no checkpoint). A damaged, foreign
or stale file is a miss: the view is computed, as for any model.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

from ui.safe_form import decode, encode, from_payload, to_payload

FORMAT = 1  # of the file (not of any value): raise it when the layout below changes
DATA_DIR = Path(__file__).resolve().parents[1] / "checkpoints" / "data"
NO_MODEL = "no-model"  # the folder of views of no model (a checkpoint's folder is its file's stem)
SUFFIX = ".view"
MISS = object()

INFO = "info"  # a checkpoint's info without its snapshots' weights (ui.state.ShippedModel.info)
INFO_VERSION = 1  # raise when info_view's output changes


def info_view(full_info: dict) -> dict:
    """What the pages read of a shipped checkpoint's info (core.model.checkpoints.read_checkpoint's): all of it,
    each snapshot's step and not its weights."""
    return {**full_info, "snapshots": [{"step": s["step"]} for s in full_info["snapshots"]]}


def folder_of(checkpoint: str | None) -> Path:
    """The folder of a checkpoint's views ("variable-period-2block.pt" -> data/variable-period-2block/)."""
    return DATA_DIR / (NO_MODEL if checkpoint is None else Path(checkpoint).stem)


def path_of(checkpoint: str | None, view: str) -> Path:
    """'app_pages/attention.py:_patterns' -> <folder>/app_pages.attention._patterns.view"""
    where, _, name = view.rpartition(":")
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", ".".join(filter(None, [where.removesuffix(".py").replace("/", "."), name])))
    return folder_of(checkpoint) / f"{stem}{SUFFIX}"


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
        self.view, self.version = header["view"], header["version"]
        self.checkpoint, self.sha256 = header["checkpoint"], header["sha256"]
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


def read(checkpoint: str | None, sha256: str | None, view: str, version: int, key: str):
    """The shipped value of `view` at `version` for argument key `key` on the checkpoint whose bytes have
    `sha256` (None, None: a view of no model), or MISS."""
    f = _file(path_of(checkpoint, view))
    if f is None or f.view != view or f.version != version or f.sha256 != sha256 or key not in f.entries:
        return MISS
    try:
        return f.value(key)
    except Exception:  # noqa: BLE001 -- a value that does not decode (a class since renamed): computed instead
        return MISS


def file_bytes(checkpoint: str | None, sha256: str | None, view: str, version: int, values: dict) -> bytes:
    """A file's bytes for `values` ({argument key: value}), the same bytes for the same values in any order."""
    buffers: list = []
    entries = [[key, encode(values[key], buffers)[0]] for key in sorted(values)]
    header = {"format": FORMAT, "view": view, "version": version, "checkpoint": checkpoint, "sha256": sha256,
              "entries": entries}
    payload = to_payload((header, buffers))
    return hashlib.sha256(payload).digest() + payload


def write(checkpoint: str | None, sha256: str | None, view: str, version: int, values: dict) -> bool:
    """Write the file of `view` on `checkpoint` unless it holds these bytes already; True when written.
    Written beside and renamed: a reader sees the old file or the new one."""
    path = path_of(checkpoint, view)
    data = file_bytes(checkpoint, sha256, view, version, values)
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
