"""The views shipped beside the checkpoints (checkpoints/views/, ui/cache.py, issue #30): current for the
code and files as they are, complete for every page's defaults, and equal to a fresh computation.

When one of these fails after a change to core/, a page or a chart builder, make the folder again:
`python -m ui.cache --ship` (about 40 CPU-seconds), and commit it with the change."""
from __future__ import annotations

import hashlib

import pytest

import ui.cache as cache
from core.disk_cache import MISS, DiskStore
from ui.charts import kept

from helpers import assert_same

REMAKE = "stale: make them again with `python -m ui.cache --ship` and commit checkpoints/views/"


def shipped_entries():
    return sorted(cache.SHIPPED_VIEWS.glob("*.view"))


def test_every_shipped_view_is_whole_and_names_the_current_code_and_a_current_file():
    """Each entry's tag names the code as it is now (core/ and its view's file) and a shipped file as it
    is now, and its checksum holds: an entry that fails this is never read, and a fresh server would
    compute that view for its first visitor."""
    files = shipped_entries()
    assert len(files) >= 50, f"checkpoints/views/ holds {len(files)} entries"
    assert sorted(cache.SHIPPED_VIEWS.iterdir()) == files, "checkpoints/views/ holds only entries"
    stale = cache.stale_shipped_views()
    assert not stale, f"{len(stale)} of {len(files)} shipped views are {REMAKE}: {stale[:3]}"
    for f in files:
        data = f.read_bytes()
        assert hashlib.sha256(data[32:]).digest() == data[:32], f"{f.name} is damaged"


def test_a_shipped_view_is_read_first_and_never_written_pruned_or_repaired(tmp_path):
    """DiskStore's base: read before the folder; put, prune and a damaged entry leave it as it is."""
    base, folder = tmp_path / "base", tmp_path / "own"
    DiskStore(base).put("k", {"v": 1}, "t-a")
    disk = DiskStore(folder, base=base)
    assert disk.get("k", "t-a") == {"v": 1}
    assert disk.put("k2", 2, "t-a") and not (base / disk.path("k2", "t-a").name).exists()
    assert disk.prune(lambda tag: False)["stale"] == 1  # the folder's entry; the base is not the store's
    assert disk.get("k", "t-a") == {"v": 1}
    entry = base / disk.path("k", "t-a").name
    entry.write_bytes(entry.read_bytes()[:-5])
    assert disk.get("k", "t-a") is MISS and entry.exists()  # a miss (computed again), the file left alone


@pytest.mark.app
@pytest.mark.slow
def test_a_walk_over_the_shipped_files_computes_nothing_and_the_shipped_views_equal_fresh_ones(tmp_path,
                                                                                            monkeypatch):
    """Every page on every shipped file with an empty cache folder over the shipped views: no view is
    computed and no chart converted (the folder stays empty), and every shipped entry is one the walk
    read (none is left over). Then each view the walk read equals the view computed afresh now (within
    float32 rounding: the folder may come from another CPU), and each chart spec equals a fresh
    conversion of the chart built from those views."""
    names = []
    get = DiskStore.get

    def logged(self, key, tag=""):
        names.append(self.path(key, tag).name)
        return get(self, key, tag)

    monkeypatch.setattr(DiskStore, "get", logged)
    monkeypatch.setattr(cache, "recorded", [])
    monkeypatch.setattr(cache, "computed", {})
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "read"))
    cache.forget_in_memory()
    rows = cache.warm()
    assert not [r for r in rows if r["exception"]]
    written = sorted(p.name for p in (tmp_path / "read").glob("*.view"))
    assert not cache.computed and not written, f"the shipped views are incomplete or {REMAKE}: {written[:3]}"
    shipped = {p.name for p in shipped_entries()}
    assert shipped - set(names) == set(), f"entries no page reads: {REMAKE}"

    views = {}
    for fn, args, kwargs, key, tag in cache.recorded:
        views.setdefault(key, (fn, args, kwargs, tag))
    for key, (fn, args, kwargs, tag) in views.items():
        assert_same(fn(*args, **kwargs), cache.store().get(key, tag), fn.__qualname__, close=True)

    # the charts again, built from the shipped views and converted afresh into a second folder
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "charts"))
    monkeypatch.setattr(kept, "_from_disk", lambda disk: None)
    cache.forget_in_memory()
    assert not [r for r in cache.warm() if r["exception"]]
    fresh = DiskStore(tmp_path / "charts")
    specs = sorted(p.name for p in fresh.folder.glob("*.view"))
    assert specs and set(specs) <= shipped
    for name in specs:
        assert fresh._read(fresh.folder / name) == DiskStore._read(cache.SHIPPED_VIEWS / name), name
    kept.clear()
