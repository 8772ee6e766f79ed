"""A folder of computed values, shared by every process that reads the same files (issue #30).

What a page computes from a shipped checkpoint cannot change until the file or the code does, so it
is stored once on disk under a key that names both, and every session and every restart reads it.

Safety: an entry is never unpickled. A value is first turned into a tree of JSON values and numbered
byte buffers (`encode`): every container a list whose first item names its kind, every array's bytes
a buffer. An entry holds the JSON text and the buffers, and reading it runs json.loads and
np.frombuffer, nothing else; dataclasses come back only for classes defined under `core.` (`decode`).
Neither needs torch: a server whose pages read stored views never imports it (issue #30: torch is
half a reading server's memory and most of its first page's time); torch is imported only to decode
an entry that holds a tensor. A file is named by its key's sha256 and starts with the sha256 of the
rest: a truncated or corrupt entry reads as a miss, and the caller computes the value again. The rest
is the value alone, so an unchanged value stored under a new key (new code that computes the same) is
the same bytes: git keeps the shipped views of ui/cache.py once, however often their keys change.

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
import functools
import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FORMAT = 3  # bump when encode's tree or an entry's file changes
_REPOSITORY = Path(__file__).resolve().parents[1]
MISS = object()
SUFFIX = ".view"  # an entry's file name ends so
_OLD_SUFFIXES = (".pt",)  # entries of formats 1 and 2 (torch.save): prune removes them
TAG_END = "--"  # between an entry's tag and its key's hash in the file name
MAX_BYTES = 64 * 2**20  # prune's default bound on the folder (every default view of the shipped files: 2.4 MB)
TMP_AGE = 3600.0  # a temporary file this old (seconds) belongs to a writer that died
_SAFE_MODULES = ("core.",)  # dataclasses and enums decode only from these packages
_ALIGN = 16  # every buffer starts at a multiple of this in the payload (numpy reads it in place)


class Unstorable(TypeError):
    """The value holds an object `encode` has no safe form for (it stays in memory only)."""


# ---------------------------------------------------------------------------------------------
# Values <-> a tree of JSON values and byte buffers


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


def encode(value) -> tuple:
    """(tree, buffers) that stand for `value`: the tree holds None/bool/int/float/str and lists, every
    container a list whose first item names its kind (so decode can tell them apart); an array's bytes
    are a buffer, named in the tree by its index."""
    buffers: list[bytes] = []
    return _encode(value, buffers), buffers


def _array(value: np.ndarray, buffers: list) -> list:
    buffers.append(np.ascontiguousarray(value).tobytes())
    return ["ndarray", value.dtype.str, list(value.shape), len(buffers) - 1]


def _encode(value, buffers: list):
    if value is None or type(value) in (bool, int, float, str):
        return value
    # torch and pandas are looked up, not imported: a value cannot hold their objects unless they are loaded
    torch, pd = sys.modules.get("torch"), sys.modules.get("pandas")
    if isinstance(value, enum.Enum):
        return ["enum", _class_path(type(value)), _encode(value.value, buffers)]
    if isinstance(value, np.generic):
        return ["np_scalar", value.dtype.str, value.item()]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf" and value.dtype.byteorder in "=|<":
            return _array(value, buffers)
        if value.dtype.kind in "US":
            return ["ndarray_text", value.dtype.str, list(value.shape), value.ravel().tolist()]
        if value.dtype.kind == "O":
            return ["ndarray_obj", list(value.shape), [_encode(v, buffers) for v in value.ravel().tolist()]]
        raise Unstorable(f"ndarray of dtype {value.dtype}")
    if torch is not None and isinstance(value, torch.Tensor):
        try:
            array = value.detach().cpu().numpy()
        except TypeError as e:  # a dtype numpy lacks (bfloat16)
            raise Unstorable(f"a tensor of dtype {value.dtype}") from e
        return ["tensor", _array(array, buffers)]
    if type(value) is bytes:  # a chart spec's Arrow data (ui/charts/kept.py)
        buffers.append(value)
        return ["bytes", len(buffers) - 1]
    if pd is not None and isinstance(value, pd.DataFrame):
        if not value.columns.is_unique:
            raise Unstorable("a DataFrame with repeated column names")
        return ["dataframe", _encode(list(value.columns), buffers), _encode(value.index, buffers),
                [_encode(value[c].to_numpy(), buffers) for c in value.columns], [str(t) for t in value.dtypes]]
    if pd is not None and isinstance(value, pd.Series):
        return ["series", _encode(value.to_numpy(), buffers), _encode(value.index, buffers),
                _encode(value.name, buffers), str(value.dtype)]
    if pd is not None and isinstance(value, pd.RangeIndex):
        return ["range_index", value.start, value.stop, value.step, _encode(value.name, buffers)]
    if pd is not None and isinstance(value, pd.Index) and not isinstance(value, pd.MultiIndex):
        return ["index", _encode(value.to_numpy(), buffers), _encode(value.name, buffers), str(value.dtype)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ["dataclass", _class_path(type(value)),
                {f.name: _encode(getattr(value, f.name), buffers) for f in dataclasses.fields(value)}]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ["namedtuple", _class_path(type(value)), [_encode(v, buffers) for v in value]]
    if type(value) is tuple:
        return ["tuple", [_encode(v, buffers) for v in value]]
    if type(value) is list:
        return ["list", [_encode(v, buffers) for v in value]]
    if type(value) is dict:
        return ["dict", [[_encode(k, buffers), _encode(v, buffers)] for k, v in value.items()]]
    if type(value) in (set, frozenset):
        return ["set" if type(value) is set else "frozenset", [_encode(v, buffers) for v in value]]
    raise Unstorable(f"no safe form for {type(value).__module__}.{type(value).__qualname__}")


def decode(encoded: tuple):
    """The value `encode` turned into (tree, buffers). The buffers may be memoryviews of a bytearray:
    the arrays are then read in place (writable, no copy)."""
    tree, buffers = encoded
    return _decode(tree, buffers)


def _decode(tree, buffers):
    if not isinstance(tree, list):
        return tree
    kind, *rest = tree
    if kind == "ndarray":
        dtype, shape, i = rest
        return np.frombuffer(buffers[i], dtype=np.dtype(dtype)).reshape(shape)
    if kind == "tensor":
        import torch  # only here: a reading server imports torch for no stored view (issue #30)

        array = _decode(rest[0], buffers)
        return torch.from_numpy(array if array.flags.writeable else array.copy())
    if kind == "bytes":
        return bytes(buffers[rest[0]])
    if kind == "ndarray_text":
        dtype, shape, items = rest
        return np.array(items, dtype=dtype).reshape(shape)
    if kind == "ndarray_obj":
        shape, items = rest
        out = np.empty(len(items), dtype=object)
        out[:] = [_decode(v, buffers) for v in items]
        return out.reshape(shape)
    if kind == "np_scalar":
        return np.dtype(rest[0]).type(rest[1])
    if kind == "tuple":
        return tuple(_decode(v, buffers) for v in rest[0])
    if kind == "list":
        return [_decode(v, buffers) for v in rest[0]]
    if kind == "dict":
        return {_decode(k, buffers): _decode(v, buffers) for k, v in rest[0]}
    if kind in ("set", "frozenset"):
        return (set if kind == "set" else frozenset)(_decode(v, buffers) for v in rest[0])
    if kind in ("dataframe", "series", "range_index", "index"):
        return _decode_pandas(kind, rest, buffers)
    if kind == "enum":
        return _safe_class(rest[0])(_decode(rest[1], buffers))
    if kind == "namedtuple":
        return _safe_class(rest[0])(*(_decode(v, buffers) for v in rest[1]))
    if kind == "dataclass":
        cls = _safe_class(rest[0])
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"{rest[0]} is not a dataclass")
        obj = object.__new__(cls)  # no __init__/__post_init__: the fields are restored as they were
        for name, v in rest[1].items():
            object.__setattr__(obj, name, _decode(v, buffers))
        return obj
    raise ValueError(f"unknown kind {kind!r}")


def _decode_pandas(kind: str, rest: list, buffers):
    import pandas as pd

    if kind == "dataframe":
        columns, index, values, dtypes = rest
        columns = _decode(columns, buffers)
        frame = pd.DataFrame({c: pd.Series(_decode(v, buffers), dtype=t) for c, v, t in zip(columns, values, dtypes)},
                             columns=columns)
        frame.index = _decode(index, buffers)
        return frame
    if kind == "series":
        values, index, name, dtype = rest
        return pd.Series(_decode(values, buffers), index=_decode(index, buffers), name=_decode(name, buffers),
                         dtype=dtype)
    if kind == "range_index":
        start, stop, step, name = rest
        return pd.RangeIndex(start, stop, step, name=_decode(name, buffers))
    values, name, dtype = rest
    return pd.Index(_decode(values, buffers), name=_decode(name, buffers), dtype=dtype)


def to_payload(encoded: tuple) -> bytes:
    """An entry's bytes after its checksum: the header's length (8 bytes, little-endian), the header (JSON:
    the tree and each buffer's length), then the buffers, each padded to _ALIGN bytes."""
    tree, buffers = encoded
    header = json.dumps({"value": tree, "buffers": [len(b) for b in buffers]}, separators=(",", ":")).encode()
    parts = [len(header).to_bytes(8, "little"), header]
    size = 8 + len(header)
    for b in buffers:
        pad = -size % _ALIGN
        parts += [b"\0" * pad, b]
        size += pad + len(b)
    return b"".join(parts)


def from_payload(payload) -> tuple:
    """(tree, buffers) of to_payload's bytes (the buffers: memoryviews of `payload`). Raises ValueError when
    the bytes are not such a payload."""
    view = memoryview(payload)
    n = int.from_bytes(view[:8], "little")
    header = json.loads(bytes(view[8:8 + n]))
    if not isinstance(header, dict) or set(header) != {"value", "buffers"}:
        raise ValueError("not an entry")
    buffers, at = [], 8 + n
    for length in header["buffers"]:
        at += -at % _ALIGN
        if type(length) is not int or length < 0 or at + length > len(view):
            raise ValueError("a buffer past the end")
        buffers.append(view[at:at + length])
        at += length
    if at != len(view):
        raise ValueError("bytes after the last buffer")
    return header["value"], buffers


# ---------------------------------------------------------------------------------------------
# Keys


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.cache
def _libraries() -> str:
    """The versions of the numeric libraries, read from their metadata (not by importing torch)."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("torch", "numpy", "pandas"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} absent")
    return " ".join(out)


def code_digest(files) -> str:
    """sha256 over the given source files (path and bytes) and the versions of the numeric
    libraries: a change to any of them is a new key, so an entry made by older code is never read.
    A file in the repository is named by its path in it, so a folder filled in one checkout serves
    another of the same code (absolute paths made two checkouts prune each other's entries)."""
    h = hashlib.sha256(f"format {FORMAT} {_libraries()}".encode())
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
    payload = to_payload(encode(value)). Written to a temporary file and renamed, so a
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
        return self.folder / (f"{tag}{TAG_END}{name}{SUFFIX}" if tag else f"{name}{SUFFIX}")

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
            with open(path, "rb") as f:
                data = bytearray(f.read())  # mutable: the arrays decoded from it are writable, not copied
        except OSError:
            return MISS
        if own:
            with contextlib.suppress(OSError):
                os.utime(path)
        try:
            payload = memoryview(data)[32:]
            if hashlib.sha256(payload).digest() != data[:32]:
                raise ValueError("checksum")
            return decode(from_payload(payload))
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
            self._entries = len(list(self.folder.glob(f"*{SUFFIX}"))) if self.folder.is_dir() else 0
        if self._entries >= self.max_entries:
            return False
        payload = to_payload(encode(value))  # raises Unstorable before anything touches the disk
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=SUFFIX)
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
                if not f.is_file(follow_symlinks=False) or not f.name.endswith((SUFFIX, *_OLD_SUFFIXES)):
                    continue
                st = f.stat(follow_symlinks=False)
                if f.name.startswith(".tmp-"):
                    if now - st.st_mtime > tmp_age:
                        os.unlink(f.path)
                    continue
                if f.name.endswith(_OLD_SUFFIXES):  # an entry of an older format, never read again
                    os.unlink(f.path)
                    out["stale"] += 1
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
