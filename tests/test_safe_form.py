"""The disk cache of shipped checkpoints' views (core/disk_cache.py behind ui/cache.py's per_model,
issue #30): what is stored equals a fresh computation, a damaged or unsafe entry is computed again,
and a folder that cannot take entries leaves the page working from memory."""
from __future__ import annotations

import dataclasses
import errno
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st
import torch

import ui.cache as cache
from core.disk_cache import MISS, DiskStore, Unstorable, decode, encode, from_payload, to_payload
from core.model.task import TaskConfig
from ui.model_keys import shipped_key
from ui.state import LabModel

from helpers import ROOT, SHIPPED, TWO_BLOCK, assert_same, tiny_model

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

    with pytest.raises(Unstorable):
        encode(NotCore())


@pytest.mark.parametrize("form", ["pickle", "torch.save"])
def test_an_entry_that_holds_code_is_refused_and_never_run(tmp_path, form):
    """A file whose checksum is right but whose payload pickles a callable (as pickle or as torch.save, the
    form of entries before format 3): the reader runs json.loads and np.frombuffer only, the entry reads
    as a miss and is removed, nothing runs."""
    marker = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    disk = DiskStore(tmp_path / "c")
    disk.folder.mkdir()
    if form == "pickle":
        payload = pickle.dumps({"value": Planted()})
    else:
        buf = io.BytesIO()
        torch.save({"value": Planted()}, buf)
        payload = buf.getvalue()
    disk.path("k").write_bytes(hashlib.sha256(payload).digest() + payload)
    assert disk.get("k") is MISS
    assert not marker.exists() and not disk.path("k").exists()


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
def test_a_reader_of_stored_views_needs_no_torch(tmp_path):
    """The point of format 3 (issue #30): a value of arrays, frames and core dataclasses is written and read
    back in a process that never imports torch."""
    code = f"""
import sys, numpy as np, pandas as pd
from core.disk_cache import DiskStore, MISS
from core.model.task import TaskConfig
d = DiskStore({str(tmp_path)!r})
v = {{"a": np.arange(6.0).reshape(2, 3), "f": pd.DataFrame({{"x": [1, 2]}}), "task": TaskConfig()}}
assert d.put("k", v)
got = d.get("k")
assert got is not MISS and (got["a"] == v["a"]).all() and got["task"] == v["task"] and got["a"].flags.writeable
assert "torch" not in sys.modules, "torch was imported"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


# ---------------------------------------------------------------------------------------------
# per_model with the disk behind it


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def counted():
    calls = []

    @cache.per_model()
    def view(e: LabModel, period: int) -> dict:
        calls.append((e.key, period))
        return {"sum": e.model.W_E.detach().sum() * period, "period": period}

    yield view, calls
    view.clear()


def shipped(file=TWO_BLOCK) -> LabModel:
    return LabModel(shipped_key(file), file, tiny_model(1, seed=0), {"task": None}, "shipped")


def test_a_shipped_view_is_read_from_disk_after_the_memory_cache_is_gone(folder, counted):
    view, calls = counted
    first = view(shipped(), 4)
    assert len(list(folder.glob("*.view"))) == 1
    view.clear()  # a restart: the memory cache is empty
    assert_same(view(shipped(), 4), first)
    assert len(calls) == 1  # from the disk
    view(shipped(), 5)
    assert len(calls) == 2  # another argument value is another entry


def test_a_view_of_plain_values_is_stored_under_its_code_alone(folder):
    """per_code (the Archetypes page's generated patterns): no model in the key, the tag "<code>-multi", read
    back after the memory cache is gone; another argument is another entry."""
    calls = []

    @cache.per_code()
    def pattern(n: int) -> np.ndarray:
        calls.append(n)
        return np.arange(n, dtype=np.float32)

    try:
        first = pattern(4)
        (path,) = folder.glob("*.view")
        assert path.name.split("--")[0].endswith("-multi")
        pattern.clear()
        assert_same(pattern(4), first)
        assert calls == [4]  # from the disk
        pattern(5)
        assert calls == [4, 5] and len(list(folder.glob("*.view"))) == 2
    finally:
        pattern.clear()


def test_a_session_model_never_reaches_the_disk(folder, counted):
    view, calls = counted
    view(LabModel("session:abc", "mine", tiny_model(1), {"task": None}, "trained"), 4)
    assert calls and not folder.exists()


def test_the_key_names_the_file_content_the_step_and_the_code(monkeypatch, counted):
    view, _ = counted
    raw = view.__wrapped__
    base = cache.disk_key(raw, (shipped(), 4), {})
    assert cache.disk_key(raw, (shipped(), 4), {}) == base
    assert cache.disk_key(raw, (), {"e": shipped(), "period": 4}) == base  # however the arguments are passed
    step = LabModel(shipped().key + "@step100", "", tiny_model(1), {}, "shipped")
    assert cache.disk_key(raw, (step, 4), {}) != base
    other = SHIPPED[0] if SHIPPED[0] != TWO_BLOCK else SHIPPED[1]
    assert cache.disk_key(raw, (shipped(other), 4), {}) != base
    monkeypatch.setitem(cache.shipped_digest.__globals__["_SHIPPED_DIGESTS"], TWO_BLOCK, "0" * 64)
    assert cache.disk_key(raw, (shipped(), 4), {}) != base  # a regenerated file is a new key
    monkeypatch.undo()
    cache._code_id.cache_clear()
    monkeypatch.setattr(cache, "_CORE_FILES", [*cache._CORE_FILES, ROOT / "README.md"])  # not in the key yet
    try:
        assert cache.disk_key(raw, (shipped(), 4), {}) != base  # other code is a new key
    finally:
        monkeypatch.undo()
        cache._code_id.cache_clear()


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "not an entry"])
def test_a_damaged_entry_is_computed_again(folder, counted, damage):
    view, calls = counted
    first = view(shipped(), 4)
    (path,) = folder.glob("*.view")
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    else:  # an entry of format 2 (torch.save) with the right checksum, under the new name
        buf = io.BytesIO()
        torch.save({"value": ("dict", [["sum", ("tensor", torch.tensor(0.0))], ["period", 4]])}, buf)
        data = hashlib.sha256(buf.getvalue()).digest() + buf.getvalue()
    path.write_bytes(bytes(data))
    view.clear()
    assert_same(view(shipped(), 4), first)
    assert len(calls) == 2  # computed again, not shown
    view.clear()
    view(shipped(), 4)
    assert len(calls) == 2  # and stored again whole


@pytest.mark.parametrize("failure", ["unwritable folder", "full disk"])
def test_a_folder_that_takes_nothing_leaves_the_view_in_memory(tmp_path, monkeypatch, counted, failure):
    view, calls = counted
    if failure == "unwritable folder":
        (tmp_path / "a-file").write_text("")
        monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "a-file" / "cache"))
    else:
        monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))

        def full(*a, **k):
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr("core.disk_cache.os.replace", full)
    first = view(shipped(), 4)
    assert_same(view(shipped(), 4), first)
    assert len(calls) == 1  # the memory cache serves it
    assert not cache.store().writable
    assert not list(tmp_path.rglob("*.view"))  # no entry, no temporary file left behind


# ---------------------------------------------------------------------------------------------
# Every page's default views of the shipped files


@pytest.mark.app
@pytest.mark.slow
@pytest.mark.parametrize("file", SHIPPED)
def test_every_stored_default_view_equals_a_fresh_computation(tmp_path, monkeypatch, file):
    """Walk every page on `file` with an empty cache; then each entry the walk stored reads back
    equal to the view the walk computed for it, every later call that the disk served (the same key
    asked again) equals the view computed afresh now, and a second walk computes nothing."""
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "shipped_views", None)  # an empty folder with nothing under it
    st.cache_data.clear()
    monkeypatch.setattr(cache, "recorded", [])
    monkeypatch.setattr(cache, "computed", {})
    rows = cache.warm([file])
    assert not [r for r in rows if r["exception"]]
    assert len(cache.recorded) >= 5
    checked = set()
    for fn, args, kwargs, key, tag in cache.recorded:
        stored = cache.store().get(key, tag)
        assert stored is not MISS, f"{fn.__qualname__} was not stored"
        if key in checked:  # served from disk: computed again, so two calls sharing a key must agree
            assert_same(stored, fn(*args, **kwargs), fn.__qualname__)
        else:  # the folder was empty, so the walk computed this one: the stored copy is that view
            assert key in cache.computed, f"{fn.__qualname__} came from a folder that started empty"
            assert_same(stored, cache.computed[key], fn.__qualname__)
            checked.add(key)
    first = len(cache.recorded)
    st.cache_data.clear()
    cache.warm([file])
    assert len(cache.recorded) == 2 * first  # the same views asked for again, and every one on disk
    assert all(cache.store().get(k, tag) is not MISS for *_, k, tag in cache.recorded[first:])


def test_the_folder_takes_at_most_max_entries(tmp_path):
    disk = DiskStore(tmp_path / "c", max_entries=2)
    assert disk.put("a", 1) and disk.put("b", 2)
    assert not disk.put("c", 3)  # full: the value stays in the caller's memory
    assert disk.get("c") is MISS and disk.get("a") == 1
    assert not DiskStore(tmp_path / "c", max_entries=2).put("d", 4)  # counted again by a new process



# ---------------------------------------------------------------------------------------------
# Pruning (issue #30): stale entries are removed by their tags, the rest is bounded in bytes


def test_prune_removes_rejected_tags_untagged_files_and_dead_writers_temporary_files(tmp_path):
    disk = DiskStore(tmp_path / "c")
    assert disk.put("a", 1, tag="code1-file1") and disk.put("b", 2, tag="code0-file1") and disk.put("c", 3)
    dead, writing = disk.folder / ".tmp-dead.view", disk.folder / ".tmp-writing.view"
    old = disk.folder / "code1-file1--0123.pt"  # an entry of format 2 (torch.save), with a live tag
    for f in (dead, writing, old):
        f.write_bytes(b"x")
    os.utime(dead, (time.time() - 7200,) * 2)
    seen = []
    counts = disk.prune(lambda tag: seen.append(tag) or tag == "code1-file1")
    assert sorted(seen, key=str) == [None, "code0-file1", "code1-file1"]  # read from the names alone
    assert counts["stale"] == 3 and counts["kept"] == 1 and not old.exists()
    assert disk.get("a", "code1-file1") == 1 and disk.get("b", "code0-file1") is MISS and disk.get("c") is MISS
    assert sorted(p.name for p in disk.folder.iterdir() if p.name.startswith(".tmp-")) == [".tmp-writing.view"]
    with pytest.raises(ValueError):
        disk.path("a", tag="no--double")


def test_prune_keeps_the_most_recently_used_entries_within_max_bytes(tmp_path):
    disk = DiskStore(tmp_path / "c", max_entries=3)
    for i, key in enumerate("abc"):
        assert disk.put(key, torch.zeros(1000), tag="t")
        os.utime(disk.path(key, "t"), (1_000_000 + i,) * 2)  # written a, b, c in that order
    assert not disk.put("d", 0, tag="t")  # full
    assert disk.get("a", "t") is not MISS  # a read marks "a" used now
    size = disk.path("a", "t").stat().st_size
    counts = disk.prune(lambda tag: True, max_bytes=2 * size)
    assert counts == {"stale": 0, "evicted": 1, "kept": 2, "bytes": 2 * size}
    assert disk.get("b", "t") is MISS and disk.get("a", "t") is not MISS and disk.get("c", "t") is not MISS
    assert disk.put("d", 0, tag="t")  # room again: the entries are counted afresh


def test_pruning_the_view_cache_removes_the_views_of_older_code_and_of_a_regenerated_file(folder, counted,
                                                                                          monkeypatch):
    view, calls = counted
    monkeypatch.setattr(cache, "_view_sources", lambda: [Path(__file__)])  # where `counted` defines its view
    digests = cache.shipped_digest.__globals__["_SHIPPED_DIGESTS"]
    cache.shipped_digest(TWO_BLOCK)
    with monkeypatch.context() as m:  # a view stored before the file was regenerated
        m.setitem(digests, TWO_BLOCK, "0" * 64)
        view(shipped(), 4)
    with monkeypatch.context() as m:  # ... and one stored by other code
        m.setattr(cache, "_CORE_FILES", [*cache._CORE_FILES, ROOT / "README.md"])
        cache._code_id.cache_clear()
        view(shipped(), 5)
    cache._code_id.cache_clear()
    view(shipped(), 6)  # the one the server computes now
    assert len(list(folder.glob("*.view"))) == 3 and len(calls) == 3
    counts = cache.prune()
    assert (counts["stale"], counts["evicted"], counts["kept"]) == (2, 0, 1)
    view.clear()
    assert view(shipped(), 6) is not None and len(calls) == 3  # read back from disk, not computed
    view(shipped(), 4)
    assert len(calls) == 4  # the regenerated file's view was gone: computed again


def test_the_servers_prune_waits_until_no_script_has_run_for_a_while(monkeypatch):
    """ui/setup.py prunes the folder once per server, but only once its first seconds are quiet: the prune
    reads every source file and shipped checkpoint, which took the interpreter from a class's first pages."""
    import time

    pruned, quiet = [], [False]
    monkeypatch.setattr(cache, "prune", lambda disk=None, **kw: pruned.append(disk) or {})
    cache.prune_in_background(quiet=lambda: quiet[0])
    time.sleep(1.5)
    assert pruned == []
    quiet[0] = True
    deadline = time.monotonic() + 10
    while not pruned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pruned) == 1 and pruned[0].folder == cache.cache_folder()
