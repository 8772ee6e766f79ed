"""ui/sessions.py: what a session leaves on the server is released once it can no longer
reconnect. Streamlit drops a session whose reconnect window (server.disconnectedSessionTTL) has
passed without AppSession.shutdown, so its media files (the Train page's checkpoint download), its
uploads and, for the session its runtime loop still refers to, its session state would stay."""
from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from unittest import mock

from streamlit.runtime.dataframe_source_manager import DataframeSourceManager
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.state.common import WidgetMetadata
from streamlit.runtime.state.session_state import SessionState
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui.sessions import MARGIN, SessionReaper, runtime_release

TTL = 120.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def reaper_with(active: set[str]):
    clock, released = Clock(), []
    reaper = SessionReaper(lambda sid: sid in active, TTL, lambda sid, session: released.append((sid, session)), clock)
    return reaper, clock, released


def test_a_disconnected_session_is_released_once_after_its_reconnect_window_and_a_connected_one_never():
    active = {"alice", "bob"}
    reaper, clock, released = reaper_with(active)
    reaper.seen("alice")
    reaper.seen("bob")
    assert reaper.sweep() == []
    active.discard("alice")  # alice's tab closed
    assert reaper.sweep() == []  # the first sweep that finds her gone starts her window
    clock.now += TTL + MARGIN - 1
    assert reaper.sweep() == [] and released == []  # she could still reconnect
    clock.now += 2
    assert reaper.sweep() == ["alice"] and released == [("alice", None)]
    clock.now += 10 * TTL
    assert reaper.sweep() == [] and released == [("alice", None)]  # once; bob, connected, never
    assert reaper.tracked() == 1


def test_a_reconnect_or_a_script_run_restarts_the_window():
    active = {"alice"}
    reaper, clock, released = reaper_with(active)
    reaper.seen("alice")
    active.clear()
    reaper.sweep()
    clock.now += TTL
    active.add("alice")  # she reconnected: seen connected by a sweep
    reaper.sweep()
    active.clear()
    clock.now += 1
    reaper.sweep()
    clock.now += TTL + MARGIN - 1
    assert reaper.sweep() == []  # counted from the second disconnect, not the first
    reaper.seen("alice")  # a script run (a reconnect reruns the page), then gone again
    assert reaper.sweep() == []
    clock.now += TTL
    assert reaper.sweep() == []
    clock.now += MARGIN + 1
    assert reaper.sweep() == ["alice"] and len(released) == 1


def test_the_reaper_holds_no_session_alive_and_hands_release_the_one_still_alive():
    class AppSession:  # stands for streamlit's AppSession: weakly referable, with a session_state
        def __init__(self):
            self.session_state = SessionState()

    active = {"alice", "bob"}
    reaper, clock, released = reaper_with(active)
    alice, bob = AppSession(), AppSession()
    gone = weakref.ref(bob)
    reaper.seen("alice", alice)
    reaper.seen("bob", bob)
    del bob
    gc.collect()
    assert gone() is None  # the reaper's reference does not keep a session
    active.clear()
    reaper.sweep()
    clock.now += TTL + MARGIN + 1
    assert sorted(reaper.sweep()) == ["alice", "bob"]
    assert sorted(released, key=lambda r: r[0]) == [("alice", alice), ("bob", None)]


def test_release_frees_the_media_files_uploads_and_state_an_expired_session_kept():
    """With Streamlit's own managers: a download and an upload of an ended session stay (nothing in
    Streamlit releases them once its reconnect window passed), release() frees them and empties the
    state of a session still referred to; another session's files stay."""
    runtime = SimpleNamespace(media_file_mgr=MediaFileManager(MemoryMediaFileStorage("/media")),
                              uploaded_file_mgr=MemoryUploadedFileManager("/upload"),
                              dataframe_source_mgr=DataframeSourceManager())
    media = runtime.media_file_mgr

    def download(session_id: str, data: bytes) -> str:
        with mock.patch("streamlit.runtime.media_file_manager._get_session_id", return_value=session_id):
            url = media.add(data, "application/octet-stream", "1.2.3", file_name="run.pt",
                            is_for_static_download=True)
        return url.rsplit("/", 1)[-1].split(".", 1)[0]

    mine, theirs = download("gone", b"gone's checkpoint" * 1000), download("here", b"here's checkpoint" * 1000)
    runtime.uploaded_file_mgr.add_file("gone", UploadedFileRec("u1", "up.pt", "application/octet-stream", b"u" * 500))
    media.remove_orphaned_files()
    media.remove_orphaned_files()
    assert media.read_file(mine) is not None  # Streamlit alone keeps it: "gone" still refers to it

    class Model:
        pass

    session = SimpleNamespace(session_state=SessionState())
    model, data = Model(), Model()
    session.session_state["lab_models"] = {"session:1": model}
    # a select box whose format function closes over a page's data: SessionState.clear() keeps widgets'
    # metadata (Streamlit 1.67), and with it that data (8 MB of patterns in a server, bench/README.md)
    session.session_state._new_widget_state.set_widget_metadata(WidgetMetadata(
        "w1", deserializer=lambda v, data=data: v, serializer=lambda v: v, value_type="int_value"))
    held, held_data = weakref.ref(model), weakref.ref(data)
    del model, data
    runtime_release(runtime)("gone", session)
    gc.collect()
    assert media.read_file(mine) is None and media.read_file(theirs) is not None
    assert runtime.uploaded_file_mgr.get_files("gone", ["u1"]) == []
    assert held() is None and "lab_models" not in session.session_state
    assert held_data() is None, "the widgets' metadata went too"
