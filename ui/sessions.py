"""What an ended session leaves on the server, released once it can no longer come back.

Streamlit keeps a disconnected session for `server.disconnectedSessionTTL` seconds (120 by default) so
that its tab can reconnect to it. A session that expires from that storage is dropped without
AppSession.shutdown (Streamlit 1.67's MemorySessionStorage is a plain TTL cache with no callback), so
what shutdown would release stays for the server's life:
- its references in the media file manager: the Train page's checkpoint download (the whole file
  with its snapshots, about 9 MB for the default run) and the live film strip's PNG tiles. Identical
  bytes are stored once, so sessions that followed one training share one file, but the file of
  every other run stays after the pool has let go of its bytes;
- its uploads (a checkpoint, up to 10 MB) and its dataframe sources.
And Streamlit's runtime loop keeps the last session whose messages it flushed in a local variable
until it flushes another one: on a server everybody has left, that session's state (its trained
models and their snapshots, about 10 MB for a default run) stays.

`SessionReaper` remembers each session a script run has seen (its id and a weak reference, nothing
that keeps it alive). Once the session has been disconnected for longer than the TTL (plus
`MARGIN`), no tab can reconnect to it, and the reaper releases what shutdown would have released
and empties its session state if it is still alive. ui/setup.py's trimmer thread sweeps every
second: a dict lookup per session seen since it was last released. Whether a session is connected is
Runtime.is_active_session (safe on any thread); the storage itself is not asked, because its TTL
cache is not thread-safe and belongs to the event loop.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

# Seconds past the TTL before a disconnected session is released. The sweep runs every second, so
# a reconnect and a second disconnect that both fall between two sweeps (which restart Streamlit's TTL
# unseen) are covered; a reconnect that reruns the script is seen at once (seen()).
MARGIN = 5.0


class SessionReaper:
    """is_active(id): whether the session is connected now; ttl: seconds a disconnected session can
    still reconnect; release(id, session): free what it left (`session` is its AppSession if that is
    still alive, else None). Thread-safe: `seen` runs on script threads, `sweep` on the trimmer's."""

    def __init__(self, is_active: Callable[[str], bool], ttl: float, release: Callable[[str, object | None], None],
                 clock: Callable[[], float] = time.monotonic):
        self.is_active, self.ttl, self.release, self.clock = is_active, ttl, release, clock
        self._refs: dict[str, Callable[[], object | None]] = {}  # session id -> weak reference to its AppSession
        self._since: dict[str, float] = {}  # session id -> when a sweep first found it disconnected
        self._lock = threading.Lock()

    def seen(self, session_id: str, session: object | None = None) -> None:
        """A script run of `session_id` (with its AppSession, when there is one to refer to weakly)."""
        ref = _weak(session)
        with self._lock:
            if ref is not None or session_id not in self._refs:
                self._refs[session_id] = ref or _none
            self._since.pop(session_id, None)

    def tracked(self) -> int:
        with self._lock:
            return len(self._refs)

    def sweep(self) -> list[str]:
        """Release every session seen that has been disconnected for longer than ttl + MARGIN; returns their ids."""
        now, gone = self.clock(), []
        with self._lock:
            for sid in list(self._refs):
                if self.is_active(sid):
                    self._since.pop(sid, None)
                elif now - self._since.setdefault(sid, now) > self.ttl + MARGIN:
                    gone.append((sid, self._refs.pop(sid)))
                    del self._since[sid]
        for sid, ref in gone:
            self.release(sid, ref())
        return [sid for sid, _ in gone]


def _none():
    return None


def _weak(session):
    if session is None:
        return None
    try:
        return weakref.ref(session)
    except TypeError:
        return None


def runtime_release(runtime) -> Callable[[str, object | None], None]:
    """release() for a Streamlit Runtime: what AppSession.shutdown releases (media file references,
    uploads, dataframe sources) and the media files nobody refers to any more, then the session's
    state if the session is still referenced somewhere (Streamlit's runtime loop)."""
    def release(session_id: str, session) -> None:
        runtime.media_file_mgr.clear_session_refs(session_id)
        runtime.uploaded_file_mgr.remove_session_files(session_id)
        runtime.dataframe_source_mgr.clear_all_for_session(session_id)
        # A download's file is only marked the first time nobody refers to it, and removed the next
        # (a grace for a click during a rerun); on a server nobody visits, there is no next time.
        runtime.media_file_mgr.remove_orphaned_files()
        runtime.media_file_mgr.remove_orphaned_files()
        state = getattr(session, "session_state", None)
        if state is not None:
            state.clear()
            # SessionState.clear() leaves the widgets' metadata (Streamlit 1.67): their format functions
            # and callbacks, which may close over a page's data (a select box's held 8 MB of patterns)
            metadata = getattr(getattr(state, "_new_widget_state", None), "widget_metadata", None)
            if isinstance(metadata, dict):
                metadata.clear()
    return release


_reaper: SessionReaper | None = None
_lock = threading.Lock()


def reaper() -> SessionReaper | None:
    """The reaper of this server's Streamlit runtime; None outside a server (tests, AppTest, whose
    runtime is a mock made again for every run, benches)."""
    global _reaper
    from streamlit import config
    from streamlit.runtime import Runtime

    if not Runtime.exists() or type(Runtime.instance()) is not Runtime:
        return None
    with _lock:
        if _reaper is None:
            runtime = Runtime.instance()
            ttl = float(config.get_option("server.disconnectedSessionTTL"))
            _reaper = SessionReaper(runtime.is_active_session, ttl, runtime_release(runtime))
        return _reaper


def note_this_session() -> None:
    """Called from every script run (ui/setup.py's lab_script): the reaper learns of this session."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    r = reaper() if ctx is not None else None
    if r is not None:
        from streamlit.runtime import Runtime

        r.seen(ctx.session_id, Runtime.instance().get_app_session(ctx.session_id))


def sweep() -> list[str]:
    """One sweep of this server's reaper, if a script run has made one."""
    r = _reaper
    return [] if r is None else r.sweep()
