"""The safe form of a stored value: what checkpoints/data/ holds (ui/shipped_data.py), and nothing is unpickled.

A value is turned into a tree of JSON values and numbered byte buffers (`encode`): every container a list
whose first item names its kind, every array's bytes a buffer. Reading runs json.loads and np.frombuffer,
nothing else. A dataclass, enum or named tuple is stored under its stable name (core.model.stored.STORED), never
its module, and comes back only for a name listed there (`decode`): moving a class stales nothing. Neither
needs torch: a server whose pages read stored views never imports it (torch is half a reading server's
memory and most of its first page's time); torch is imported only to decode a value that holds a tensor.

`to_payload`/`from_payload` lay a tree and its buffers out as bytes: the header's length, the header
(JSON), then the buffers, each aligned so that numpy reads it in place.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import sys

import numpy as np

from core.model.stored import NAMES, STORED

_ALIGN = 16  # every buffer starts at a multiple of this in the payload (numpy reads it in place)


class Unstorable(TypeError):
    """The value holds an object `encode` has no safe form for."""


# ---------------------------------------------------------------------------------------------
# Values <-> a tree of JSON values and byte buffers


def _stored_name(cls) -> str:
    """The stable name of a class a value may hold (core.model.stored)."""
    where = f"{cls.__module__}:{cls.__qualname__}"
    if where not in NAMES:
        raise Unstorable(f"{where} has no stored name: add it to core.model.stored.STORED")
    return NAMES[where]


def _stored_class(name: str):
    """The class stored under `name`; ValueError for a name core.model.stored does not list."""
    where = STORED.get(name) if isinstance(name, str) else None
    if where is None or not where.startswith("core."):
        raise ValueError(f"refusing class {name!r}: not a stored name (core.model.stored)")
    module, _, qualname = where.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def encode(value, buffers: list | None = None) -> tuple:
    """(tree, buffers) that stand for `value`: the tree holds None/bool/int/float/str and lists, every
    container a list whose first item names its kind (so decode can tell them apart); an array's bytes
    are a buffer, named in the tree by its index. With `buffers`, the value's buffers are appended to it
    (several values' trees over one list of buffers)."""
    buffers = [] if buffers is None else buffers
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
        return ["enum", _stored_name(type(value)), _encode(value.value, buffers)]
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
    if type(value) is bytes:
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
        return ["dataclass", _stored_name(type(value)),
                {f.name: _encode(getattr(value, f.name), buffers) for f in dataclasses.fields(value)}]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return ["namedtuple", _stored_name(type(value)), [_encode(v, buffers) for v in value]]
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
        import torch  # only here: a reading server imports torch for no stored view

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
        return _stored_class(rest[0])(_decode(rest[1], buffers))
    if kind == "namedtuple":
        return _stored_class(rest[0])(*(_decode(v, buffers) for v in rest[1]))
    if kind == "dataclass":
        cls = _stored_class(rest[0])
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

