"""The finished runs a server keeps, so that a session starting the same run later gets it at once.

Each kept run is its checkpoint's bytes and its frozen stream (rows and film-strip frames). The bytes
sit in an unnamed temporary file, not in the server's memory: the default 2-block run's
checkpoint is 8.4 MB, and the server held it, resident, for as long as the run was kept (bench/README.md,
"Server memory"). Handing a run back reads the file (page cache, a few milliseconds). Where no temporary
file can be made or written (an unwritable or full disk) the bytes stay in memory, as before; a file
that cannot be read back gives None, and the caller trains the run again.

While a run handed out still lives (the pool passes each one to `hold`), the next session gets the same
bytes object rather than a fresh read: a class of 20 handed the default run held 20 copies of its 8.4 MB
otherwise (bench/README.md, "Server memory"). The store refers to those runs weakly, so the bytes go with
the last of them.
"""
from __future__ import annotations

import os
import tempfile
import weakref
from collections import OrderedDict
from typing import Any

KEPT = 16  # finished runs kept for sessions that start the same run later
KEPT_BYTES = 64 * 2**20  # ... and at most this many checkpoint bytes between them


class KeptBytes:
    """Bytes written once to an unnamed temporary file (in memory if that fails), read back whole."""

    def __init__(self, data: bytes):
        self.size = len(data)
        self._data: bytes | None = None
        self._file = None
        try:
            f = tempfile.TemporaryFile()  # noqa: SIM115 -- kept open for this object's life; unlinked already
            try:
                if os.write(f.fileno(), data) != self.size:  # one call: a short write means a full disk
                    raise OSError("short write")
            except BaseException:
                f.close()
                raise
            self._file = f
        except OSError:
            self._data = data

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def read(self) -> bytes | None:
        """The bytes as given, or None if the file cannot be read back in full."""
        if self._file is None:
            return self._data
        try:
            data = os.pread(self._file.fileno(), self.size, 0)
        except OSError:
            return None
        return data if len(data) == self.size else None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class FinishedRuns:
    """key -> (checkpoint bytes, stream), the most recently used last: at most `kept` runs and, beyond
    the newest one, at most `kept_bytes` of checkpoints. Not thread-safe: the pool calls it under its lock."""

    def __init__(self, kept: int = KEPT, kept_bytes: int = KEPT_BYTES):
        self.kept, self.kept_bytes = kept, kept_bytes
        self._runs: OrderedDict[str, tuple[KeptBytes, Any]] = OrderedDict()
        self._handed: dict[str, tuple[bytes, weakref.WeakSet]] = {}  # key -> (bytes handed out, who holds them)

    def __contains__(self, key: str) -> bool:
        return key in self._runs

    def __len__(self) -> int:
        return len(self._runs)

    def store(self, key: str, data: bytes, stream: Any) -> None:
        self._handed.pop(key, None)
        old = self._runs.pop(key, None)
        if old is not None:
            old[0].close()
        self._runs[key] = (KeptBytes(data), stream)
        while len(self._runs) > self.kept or (
                len(self._runs) > 1 and sum(b.size for b, _ in self._runs.values()) > self.kept_bytes):
            self._runs.popitem(last=False)[1][0].close()
        for gone in [k for k in list(self._handed) if k not in self._runs]:  # list(): a collection may pop
            self._handed.pop(gone, None)

    def get(self, key: str) -> tuple[bytes, Any] | None:
        """The run's checkpoint bytes and stream, now the most recently used; None if it is not kept
        or its bytes cannot be read back (then it is forgotten). The bytes are those a holder of this
        run still holds, if any, else read from the file."""
        if key not in self._runs:
            return None
        kept, stream = self._runs[key]
        data = self._held(key)
        if data is None:
            data = kept.read()
        if data is None:
            del self._runs[key]
            kept.close()
            return None
        self._runs.move_to_end(key)
        return data, stream

    def hold(self, key: str, data: bytes, holder: object) -> None:
        """`holder` (weakly referable: a LiveRun) keeps `data`, the bytes `get(key)` gave it."""
        entry = self._handed.get(key)
        if entry is None or entry[0] is not data:
            entry = self._handed[key] = (data, weakref.WeakSet())
        entry[1].add(holder)
        weakref.finalize(holder, self._let_go, key, entry)

    def _let_go(self, key: str, entry: tuple) -> None:
        """A holder is gone (on whichever thread collected it): once none is left, so are the bytes."""
        if not _anyone(entry) and self._handed.get(key) is entry:
            self._handed.pop(key, None)

    def _held(self, key: str) -> bytes | None:
        entry = self._handed.get(key)
        return entry[0] if entry is not None and _anyone(entry) else None

    def bytes_in_memory(self) -> int:
        """Checkpoint bytes this store holds in memory (those whose file could not be written; not the
        copies its holders hold)."""
        return sum(b.size for b, _ in self._runs.values() if not b.on_disk)


def _anyone(entry: tuple) -> bool:
    """Whether a holder of the handed-out bytes is still alive (iterating a WeakSet skips the dead)."""
    return next(iter(entry[1]), None) is not None
