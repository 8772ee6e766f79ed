"""The finished runs a server keeps for identical runs hold their checkpoints in an unnamed
temporary file, not in the server's memory (core.pool.finished); a disk that refuses the file keeps
them in memory, a file that cannot be read back is forgotten and the run trains again; sessions handed
one run while another still holds it share one copy, and the store lets it go with its last holder."""
from __future__ import annotations

import gc
import os
import tempfile

import pytest
from test_pool import TINY, same_weights
from test_runs import thread_pool, wait_until

from core.pool.finished import FinishedRuns, KeptBytes
from core.pool.status import RunStatus

DATA = bytes(range(256)) * 4096  # 1 MB, every byte value


def test_kept_bytes_live_in_a_file_and_read_back_whole():
    kept = KeptBytes(DATA)
    assert kept.on_disk and kept.size == len(DATA)
    assert os.fstat(kept._file.fileno()).st_size == len(DATA)
    assert kept.read() == DATA and kept.read() == DATA  # pread: no file position to leave behind


@pytest.mark.parametrize("fault", ["no temporary folder", "disk full"])
def test_kept_bytes_stay_in_memory_when_the_disk_refuses_them(fault, monkeypatch):
    if fault == "no temporary folder":
        def refuse(*a, **k):
            raise PermissionError(13, "Permission denied: the temporary folder")
        monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    else:  # /dev/full: every write fails with ENOSPC
        monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **k: open("/dev/full", "r+b"))  # noqa: SIM115
    kept = KeptBytes(DATA)
    assert not kept.on_disk and kept.read() == DATA


def test_the_store_keeps_the_newest_runs_within_its_count_and_bytes():
    store = FinishedRuns(kept=3, kept_bytes=2 * len(DATA))
    for key in "abc":
        store.store(key, DATA, key)
    assert "a" not in store and len(store) == 2, "three runs of 1 MB are over 2 MB: the oldest goes"
    assert store.get("b") == (DATA, "b")  # b is now the newest
    store.store("d", DATA[:10], "d")
    assert "c" not in store and "b" in store and "d" in store
    store.store("e", DATA[:10], "e")
    store.store("f", DATA[:10], "f")
    assert len(store) == 3 and "b" not in store
    big = FinishedRuns(kept=2, kept_bytes=10)
    big.store("x", DATA, "x")
    assert big.get("x") == (DATA, "x"), "the newest run is kept whatever its size"
    assert store.bytes_in_memory() == 0


def truncate(store: FinishedRuns, key: str) -> None:
    os.ftruncate(store._runs[key][0]._file.fileno(), 100)


def test_a_kept_run_whose_file_cannot_be_read_is_forgotten():
    store = FinishedRuns()
    store.store("a", DATA, "stream")
    truncate(store, "a")
    assert store.get("a") is None and "a" not in store


def test_the_pool_hands_back_a_finished_run_from_its_file_and_trains_again_without_it():
    """The pool's own store: the finished checkpoint is on disk, not among the pool's objects; a later
    session, once the sessions that held the run are gone, gets the same model from the file; with the
    file unreadable, the run trains again."""
    pool = thread_pool()
    try:
        first = pool.start(TINY, "alice|1")
        wait_until(first.ended.is_set, 30, "the run to finish")
        assert first.status == RunStatus.FINISHED
        assert len(pool._finished) == 1 and pool._finished.bytes_in_memory() == 0
        model = first.result[0]
        del first
        gc.collect()
        late = pool.start(TINY, "bob|1")
        assert late.shared == "finished" and late.status == RunStatus.FINISHED
        assert same_weights(late.result[0], model)
        del late
        gc.collect()
        truncate(pool._finished, next(iter(pool._finished._runs)))
        again = pool.start(TINY, "carol|1")
        assert again.shared != "finished", "an unreadable kept run is trained again"
        wait_until(again.ended.is_set, 30, "the run to finish")
        assert again.status == RunStatus.FINISHED and same_weights(again.result[0], model)
    finally:
        pool.shutdown()


class Holder:  # stands for a LiveRun: weakly referable
    pass


def test_holders_of_one_run_share_its_bytes_and_the_store_lets_them_go_with_the_last():
    store = FinishedRuns()
    store.store("a", DATA, "stream")
    first, second = Holder(), Holder()
    data = store.get("a")[0]
    store.hold("a", data, first)
    again = store.get("a")[0]
    assert again is data, "a second session shares the copy the first still holds"
    store.hold("a", again, second)
    del data, again, first
    gc.collect()
    assert store.get("a")[0] is store._handed["a"][0], "one holder left: still shared"
    del second
    gc.collect()
    assert "a" not in store._handed, "no holder left: the store holds no copy"
    assert store.get("a") == (DATA, "stream") and store.bytes_in_memory() == 0


def test_the_pool_gives_every_session_of_a_finished_run_one_copy_of_its_bytes():
    pool = thread_pool()
    try:
        first = pool.start(TINY, "alice|1")
        wait_until(first.ended.is_set, 30, "the run to finish")
        late = pool.start(TINY, "bob|1")
        assert late._end.data is first._end.data, "the training's own followers hold its bytes"
        del first
        gc.collect()
        later = pool.start(TINY, "carol|1")
        assert late.shared == later.shared == "finished"
        assert later._end.data is late._end.data, "a session handed the run holds them in turn"
        del late, later
        gc.collect()
        assert not pool._finished._handed, "every session let go: only the file is left"
    finally:
        pool.shutdown()
