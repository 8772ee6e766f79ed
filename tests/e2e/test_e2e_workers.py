"""A fresh server under several first visitors at once, and the training processes of a real server:
Train starts one, and stopping the server leaves none behind."""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from streamlit_server import PAGES, StreamlitServer

pytestmark = pytest.mark.e2e

STEP = re.compile(r"step (\d+) / (\d+)")


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (children, grandchildren, ...), from /proc."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parent[int(stat.parent.name)] = int(fields[1])
    out, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - out
        out |= frontier
    return out


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_five_first_visitors_on_a_fresh_server_see_no_exception(new_app):
    """Five sessions open different pages of a server nobody has visited yet, all at once: the
    first script runs race each other (once, ui/state.py's rerun during its import made some of them
    fail with ImportError)."""
    fresh = StreamlitServer(name="server-five-first-visitors")
    try:
        paths = ["train", "", "attention", "circuits", "train"]
        visitors = [new_app(fresh) for _ in paths]
        for app, path in zip(visitors, paths):  # all requests go out before any page has drawn
            app.page.goto(f"{fresh.url}/{path}", wait_until="commit")
        for app, path in zip(visitors, paths):
            app.wait_idle()
            app.assert_no_exception()
            assert app.page.locator('[data-testid="stSidebar"]').get_by_text("Model under study").count() == 1, path
            title = app.page.locator("h1").first.inner_text()
            assert title.strip(), f"/{path} has no title"
        for app, path in zip(visitors, ["icl", "depth", "archetypes", "", "attention"]):  # and one more page each
            app.nav(PAGES[path])
            app.assert_no_exception()
        assert not fresh.tracebacks(), fresh.tracebacks()[-1]
    finally:
        fresh.stop()


def test_training_runs_in_a_worker_process_and_none_outlives_the_server(new_app):
    srv = StreamlitServer(name="server-workers")
    try:
        app = new_app(srv)
        app.goto("train")
        before = descendants(srv.proc.pid)
        app.page.get_by_role("button", name="Train", exact=True).click()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            bar = app.page.locator('[data-testid="stProgress"]')
            m = STEP.search(bar.first.inner_text()) if bar.count() else None
            if m and int(m.group(1)) > 0:
                break
            time.sleep(0.25)
        else:
            raise AssertionError("no training step shown within 60 s")
        workers = descendants(srv.proc.pid) - before
        assert workers, "the training runs in no process of its own"
        everything = descendants(srv.proc.pid)
        app.assert_no_exception()
    finally:
        srv.stop()  # SIGTERM, as a host stops the app
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(running(p) for p in everything):
        time.sleep(0.2)
    assert not [p for p in everything if running(p)], "processes of the stopped server are still running"
