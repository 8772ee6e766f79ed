"""The safe form of shipped data (ui/safe_form.py, read by ui/shipped_data.py): what is stored comes back equal,
nothing without a safe form is stored, a file that holds code is refused without running it, and reading
needs no torch."""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from core.model.stored import STORED
from core.model.task import TaskConfig
from ui import shipped_data
from ui.safe_form import Unstorable, decode, encode, from_payload, to_payload

from helpers import ROOT, assert_same

# ---------------------------------------------------------------------------------------------
# The safe form


def test_encode_decode_keeps_types_and_values():
    value = {
        "task": TaskConfig(),
        "arr": np.arange(6, dtype=np.float32).reshape(2, 3), "ints": np.array([1, 2], dtype=np.int64),
        "text": np.array(["ab", "c"]), "obj": np.array([None, "x", 3], dtype=object),
        "t": torch.randn(3, 4, dtype=torch.float64), "scalar": np.float64(0.25), "b": np.bool_(True),
        (1, "k"): [1, 2.5, None, "s", True, (3, 4)], 7: {2, 3}, 8: frozenset({1}),
        "frame": pd.DataFrame({"head": ["0.0", "1.1"], "score": [0.5, np.nan], "n": [1, 2]}, index=[3, 9]),
        "series": pd.Series([1.0, 2.0], index=pd.Index(["a", "b"], name="k"), name="s"),
        "bytes": b"ARROW1\x00\xff\x10", "empty": b"",  # a chart spec's data (ui/charts/kept.py)
    }
    assert_same(decode(encode(value)), value)
    assert type(decode(encode(b"\x00\x01"))) is bytes


def test_objects_without_a_safe_form_are_refused():
    class Local:
        pass

    with pytest.raises(Unstorable):
        encode({"x": Local()})

    @dataclasses.dataclass
    class NotCore:  # a dataclass outside core/ would decode by importing whatever module it names
        a: int = 1

    with pytest.raises(Unstorable, match="no stored name"):
        encode(NotCore())
    UnderCore = dataclasses.make_dataclass("UnderCore", [("a", int)], namespace={"__module__": "core.model.task"})
    with pytest.raises(Unstorable, match="core.model.stored"):  # under core, but not given a stored name
        encode(UnderCore(1))


def test_a_class_is_stored_by_its_stable_name_and_only_a_listed_name_decodes():
    """The tree names TaskConfig by its name in core.model.stored, not by its module; a tree naming a class by
    its module path, or a name the list does not hold, is refused (nothing is imported for it)."""
    tree, buffers = encode(TaskConfig())
    assert tree[:2] == ["dataclass", "TaskConfig"] and "core." not in json.dumps(tree)
    for forged in ("core.model.task:TaskConfig", "os:system", "NotAStoredName", ["TaskConfig"]):
        with pytest.raises(ValueError, match="refusing class"):
            decode((["dataclass", forged, {}], buffers))
        with pytest.raises(ValueError, match="refusing class"):
            decode((["enum", forged, 1], buffers))


def test_every_stored_name_is_a_class_under_core_that_stores_by_that_name():
    """Each entry of core.model.stored points at a dataclass, enum or named tuple defined under core where it
    says (a class moved without its line moved fails here), and names are one per class."""
    import enum

    assert len(set(STORED.values())) == len(STORED)
    for name, where in STORED.items():
        module, _, qualname = where.partition(":")
        cls = getattr(importlib.import_module(module), qualname)
        assert module.startswith("core.") and f"{cls.__module__}:{cls.__qualname__}" == where, name
        assert dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum) or hasattr(cls, "_fields"), name


@pytest.mark.parametrize("form", ["pickle", "torch.save"])
def test_a_shipped_file_that_holds_code_is_refused_and_never_run(tmp_path, monkeypatch, form):
    """A shipped-data file whose checksum is right but whose payload pickles a callable (as pickle or as
    torch.save): the reader runs json.loads and np.frombuffer only, the file reads as a miss, nothing runs."""
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    monkeypatch.setattr(shipped_data, "DATA_DIR", tmp_path)
    path = shipped_data.path_of(None, "test.view")
    path.parent.mkdir()
    if form == "pickle":
        payload = pickle.dumps({"value": Planted()})
    else:
        buf = io.BytesIO()
        torch.save({"value": Planted()}, buf)
        payload = buf.getvalue()
    path.write_bytes(hashlib.sha256(payload).digest() + payload)
    assert shipped_data.read(None, "test.view", 1, "[]") is shipped_data.MISS
    assert not marker.exists()
    good = shipped_data.file_bytes(None, "test.view", 1, {"[]": {"v": 1}})
    path.write_bytes(good)  # the same place, a real file: read
    assert shipped_data.read(None, "test.view", 1, "[]") == {"v": 1}


@pytest.mark.parametrize("damage", ["header past the end", "buffer past the end", "trailing bytes", "not a dict"])
def test_a_payload_that_does_not_add_up_is_refused(damage):
    payload = bytearray(to_payload(encode({"a": np.arange(4.0)})))
    n = int.from_bytes(payload[:8], "little")
    if damage == "header past the end":
        payload[:8] = (len(payload) + 1).to_bytes(8, "little")
    elif damage == "buffer past the end":
        payload = payload[:-1]
    elif damage == "trailing bytes":
        payload += b"\0"
    else:
        header = json.dumps([1, 2]).encode()
        payload = bytearray(len(header).to_bytes(8, "little") + header + payload[8 + n:])
    with pytest.raises(ValueError):
        from_payload(payload)


@pytest.mark.worker
def test_a_reader_of_shipped_data_needs_no_torch(tmp_path):
    """A value of arrays, frames and core dataclasses is written and read back in a process that never
    imports torch (what a reading server does)."""
    code = f"""
import sys, numpy as np, pandas as pd
from pathlib import Path
from ui import shipped_data
from core.model.stored import STORED
from core.model.task import TaskConfig
shipped_data.DATA_DIR = Path({str(tmp_path)!r})
v = {{"a": np.arange(6.0).reshape(2, 3), "f": pd.DataFrame({{"x": [1, 2]}}), "task": TaskConfig()}}
assert shipped_data.write("ab", "test.f", 1, {{"[]": v}})
got = shipped_data.read("ab", "test.f", 1, "[]")
assert got is not shipped_data.MISS and (got["a"] == v["a"]).all() and got["task"] == v["task"]
assert got["a"].flags.writeable and shipped_data.read("ab", "test.f", 2, "[]") is shipped_data.MISS
assert "torch" not in sys.modules, "torch was imported"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
