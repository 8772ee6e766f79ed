"""A folder of computed values, shared by every process that reads the same files (issue #30).

What a page computes from a shipped checkpoint cannot change until the file or the code does, so it
is stored once on disk under a key that names both, and every session and every restart reads it.

Safety: an entry is never unpickled. A value is first turned into a tree of plain containers and
tensors (`encode`), saved with torch.save and read back with torch.load(weights_only=True), which
refuses anything else; dataclasses come back only for classes defined under `core.` (`decode`). A
file is named by its key's sha256 and starts with the sha256 of the rest: a truncated or corrupt entry
reads as a miss, and the caller computes the value again. The rest is the value alone, so an unchanged
value stored under a new key (new code that computes the same) is the same bytes: git keeps the shipped
views of ui/cache.py once, however often their keys change.

Failure never reaches the caller: an unwritable folder or a full disk makes `put` return False, and
the value lives on in the caller's memory cache.

Pruning: an entry's file name begins with the caller's `tag`, which names what makes the entry stale
(for ui/cache.py: the code that computes the view and the checkpoint file it reads). A key made by
older code, or from a file since regenerated, is never asked for again; `prune(live)` removes every
entry whose tag `live` rejects (files from before tags existed, without one, too), then the least
recently used entries past `max_bytes`, reading only the folder's listing (no entry is opened).

A store may have a `base`: a folder read first and never written (ui/cache.py: the views shipped beside
the checkpoints). Its entries are checked like any other; a damaged one is a miss, left in place.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import importlib
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

FORMAT = 2  # bump when encode's tree or an entry's file changes
_REPOSITORY = Path(__file__).resolve().parents[1]
MISS = object()
TAG_END = "--"  # between an entry's tag and its key's hash in the file name
MAX_BYTES = 64 * 2**20  # prune's default bound on the folder (every default view of the shipped files: 2.4 MB)
TMP_AGE = 3600.0  # a temporary file this old (seconds) belongs to a writer that died
_SAFE_MODULES = ("core.",)  # dataclasses and enums decode only from these packages


class Unstorable(TypeError):
    """The value holds an object `encode` has no safe form for (it stays in memory only)."""


# ---------------------------------------------------------------------------------------------
# Values <-> trees of plain containers and tensors


def _class_path(cls) -> str:
    path = f"{cls.__module__}:{cls.__qualname__}"
    if not cls.__module__.startswith(_SAFE_MODULES):
        raise Unstorable(f"{path} is not under {_SAFE_MODULES}")
    return path


def _safe_class(path: str):
    module, _, qualname = path.partition(":")
    if not module.startswith(_SAFE_MODULES):
        raise ValueError(f"refusing class {path}")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def encode(value):
    """A tree of None/bool/int/float/str, tagged tuples, lists and tensors that stands for `value`.
    Every container becomes a tuple whose first item names its kind, so decode can tell them apart."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, enum.Enum):
        return ("enum", _class_path(type(value)), encode(value.value))
    if isinstance(value, np.generic):
        return ("np_scalar", value.dtype.str, value.item())
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf" and value.dtype.byteorder in "=|<":
            return ("ndarray", torch.from_numpy(np.ascontiguousarray(value).copy()))
        if value.dtype.kind in "US":
            return ("ndarray_text", value.dtype.str, list(value.shape), value.ravel().tolist())
        if value.dtype.kind == "O":
            return ("ndarray_obj", list(value.shape), [encode(v) for v in value.ravel().tolist()])
        raise Unstorable(f"ndarray of dtype {value.dtype}")
    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach().clone())
    if type(value) is bytes:  # a chart spec's Arrow data (ui/charts/kept.py)
        return ("bytes", torch.frombuffer(bytearray(value), dtype=torch.uint8) if value else
                torch.empty(0, dtype=torch.uint8))
    if isinstance(value, pd.DataFrame):
        if not value.columns.is_unique:
            raise Unstorable("a DataFrame with repeated column names")
        return ("dataframe", encode(list(value.columns)), encode(value.index),
                [encode(value[c].to_numpy()) for c in value.columns], [str(t) for t in value.dtypes])
    if isinstance(value, pd.Series):
        return ("series", encode(value.to_numpy()), encode(value.index), encode(value.name), str(value.dtype))
    if isinstance(value, pd.RangeIndex):
        return ("range_index", value.start, value.stop, value.step, encode(value.name))
    if isinstance(value, pd.Index) and not isinstance(value, pd.MultiIndex):
        return ("index", encode(value.to_numpy()), encode(value.name), str(value.dtype))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ("dataclass", _class_path(type(value)),
                {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)})
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ("namedtuple", _class_path(type(value)), [encode(v) for v in value])
    if type(value) is tuple:
        return ("tuple", [encode(v) for v in value])
    if type(value) is list:
        return ("list", [encode(v) for v in value])
    if type(value) is dict:
        return ("dict", [[encode(k), encode(v)] for k, v in value.items()])
    if type(value) in (set, frozenset):
        return ("set" if type(value) is set else "frozenset", [encode(v) for v in value])
    raise Unstorable(f"no safe form for {type(value).__module__}.{type(value).__qualname__}")


def decode(tree):
    """The value `encode` turned into `tree`."""
    if not isinstance(tree, tuple):
        return tree
    kind, *rest = tree
    if kind == "tensor":
        return rest[0]
    if kind == "ndarray":
        return rest[0].numpy()
    if kind == "bytes":
        return rest[0].numpy().tobytes()
    if kind == "ndarray_text":
        dtype, shape, items = rest
        return np.array(items, dtype=dtype).reshape(shape)
    if kind == "ndarray_obj":
        shape, items = rest
        out = np.empty(len(items), dtype=object)
        out[:] = [decode(v) for v in items]
        return out.reshape(shape)
    if kind == "np_scalar":
        return np.dtype(rest[0]).type(rest[1])
    if kind == "tuple":
        return tuple(decode(v) for v in rest[0])
    if kind == "list":
        return [decode(v) for v in rest[0]]
    if kind == "dict":
        return {decode(k): decode(v) for k, v in rest[0]}
    if kind in ("set", "frozenset"):
        return (set if kind == "set" else frozenset)(decode(v) for v in rest[0])
    if kind == "dataframe":
        columns, index, values, dtypes = rest
        columns = decode(columns)
        frame = pd.DataFrame({c: pd.Series(decode(v), dtype=t) for c, v, t in zip(columns, values, dtypes)},
                             columns=columns)
        frame.index = decode(index)
        return frame
    if kind == "series":
        values, index, name, dtype = rest
        return pd.Series(decode(values), index=decode(index), name=decode(name), dtype=dtype)
    if kind == "range_index":
        start, stop, step, name = rest
        return pd.RangeIndex(start, stop, step, name=decode(name))
    if kind == "index":
        values, name, dtype = rest
        return pd.Index(decode(values), name=decode(name), dtype=dtype)
    if kind == "enum":
        return _safe_class(rest[0])(decode(rest[1]))
    if kind == "namedtuple":
        return _safe_class(rest[0])(*(decode(v) for v in rest[1]))
    if kind == "dataclass":
        cls = _safe_class(rest[0])
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"{rest[0]} is not a dataclass")
        obj = object.__new__(cls)  # no __init__/__post_init__: the fields are restored as they were
        for name, v in rest[1].items():
            object.__setattr__(obj, name, decode(v))
        return obj
    raise ValueError(f"unknown kind {kind!r}")


# ---------------------------------------------------------------------------------------------
# Keys


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def code_digest(files) -> str:
    """sha256 over the given source files (path and bytes) and the versions of the numeric
    libraries: a change to any of them is a new key, so an entry made by older code is never read.
    A file in the repository is named by its path in it, so a folder filled in one checkout serves
    another of the same code (absolute paths made two checkouts prune each other's entries)."""
    h = hashlib.sha256(f"format {FORMAT} torch {torch.__version__} numpy {np.__version__} "
                       f"pandas {pd.__version__}".encode())
    for path in sorted({Path(p).resolve() for p in files}):
        name = path.relative_to(_REPOSITORY).as_posix() if path.is_relative_to(_REPOSITORY) else str(path)
        h.update(name.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# The folder


class DiskStore:
    """Entries in `folder`, one file per key, named by the key's sha256: sha256(payload) + payload,
    payload = torch.save of {"value": encode(value)}. Written to a temporary file and renamed, so a
    reader sees a whole entry or none."""

    def __init__(self, folder: Path, max_entries: int = 2000, base: Path | None = None):
        self.folder = Path(folder)
        # A folder read before `folder` and never written, pruned or repaired (ui/cache.py: the views
        # shipped beside the checkpoints, so that a server on a fresh clone computes none of them)
        self.base = None if base is None else Path(base)
        self.writable = True  # False after a write failed: from then on values stay in memory
        # Views of free text (a student's own sentence) are keyed by it too: past max_entries files
        # new values stay in memory, so visitors cannot fill the disk
        self.max_entries = max_entries
        self._entries: int | None = None  # counted on the first put

    def path(self, key: str, tag: str = "") -> Path:
        """`tag` (letters, digits and "-" only) leads the name, so prune can read it from the listing."""
        if tag and (TAG_END in tag or not all(c.isalnum() or c == "-" for c in tag)):
            raise ValueError(f"a tag is letters, digits and single '-' only, got {tag!r}")
        name = hashlib.sha256(key.encode()).hexdigest()[:40]
        return self.folder / (f"{tag}{TAG_END}{name}.pt" if tag else f"{name}.pt")

    def get(self, key: str, tag: str = ""):
        """The stored value, from `base` first, or MISS (absent, corrupt, stale or unreadable: then an
        entry of `folder` is removed). A hit in `folder` marks the entry used now (its modification
        time), for prune's size bound."""
        path = self.path(key, tag)
        if self.base is not None:
            value = self._read(self.base / path.name)
            if value is not MISS:
                return value
        return self._read(path, own=True)

    @staticmethod
    def _read(path: Path, own: bool = False):
        try:
            data = path.read_bytes()
        except OSError:
            return MISS
        if own:
            with contextlib.suppress(OSError):
                os.utime(path)
        try:
            digest, payload = data[:32], data[32:]
            if hashlib.sha256(payload).digest() != digest:
                raise ValueError("checksum")
            return decode(torch.load(io.BytesIO(payload), weights_only=True)["value"])
        except Exception:  # noqa: BLE001 - any damage to the file is a miss
            if own:
                with contextlib.suppress(OSError):
                    path.unlink()
            return MISS

    def put(self, key: str, value, tag: str = "") -> bool:
        """Store `value` (under `tag`, see prune); False when it has no safe form or the folder cannot take it."""
        if not self.writable:
            return False
        if self._entries is None:
            self._entries = len(list(self.folder.glob("*.pt"))) if self.folder.is_dir() else 0
        if self._entries >= self.max_entries:
            return False
        tree = encode(value)  # raises Unstorable before anything touches the disk
        buf = io.BytesIO()
        torch.save({"value": tree}, buf)
        payload = buf.getvalue()
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".pt")
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(payload).digest())
                f.write(payload)
            os.replace(tmp, self.path(key, tag))
            self._entries += 1
            return True
        except OSError:
            self.writable = False
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            return False

    def prune(self, live, max_bytes: int = MAX_BYTES, tmp_age: float = TMP_AGE) -> dict:
        """Remove every entry whose tag `live(tag)` rejects (an untagged file has tag None), then the
        least recently used ones until the rest take at most `max_bytes`, and temporary files older
        than `tmp_age` seconds (a writer that died). Returns the counts: stale, evicted, kept, bytes."""
        out = {"stale": 0, "evicted": 0, "kept": 0, "bytes": 0}
        try:
            files = list(os.scandir(self.folder))
        except OSError:
            return out
        now, kept = time.time(), []
        for f in files:
            with contextlib.suppress(OSError):
                if not f.is_file(follow_symlinks=False) or not f.name.endswith(".pt"):
                    continue
                st = f.stat(follow_symlinks=False)
                if f.name.startswith(".tmp-"):
                    if now - st.st_mtime > tmp_age:
                        os.unlink(f.path)
                    continue
                tag = f.name.rsplit(TAG_END, 1)[0] if TAG_END in f.name else None
                if not live(tag):
                    os.unlink(f.path)
                    out["stale"] += 1
                else:
                    kept.append((st.st_mtime, st.st_size, f.path))
        kept.sort(reverse=True)  # newest first
        total = 0
        for _, size, path in kept:
            if total + size > max_bytes:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    out["evicted"] += 1
                    continue
            total += size
            out["kept"] += 1
        out["bytes"] = total
        self._entries = None  # counted again on the next put
        return out
