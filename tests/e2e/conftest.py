"""Real-browser tests: a `streamlit run dashboard.py` server on a free loopback port, driven by
Playwright for Python in Debian's Chromium (never a browser that Playwright downloads).

Fixtures:
- `server`: one Streamlit server per test session (started once, health-checked, stopped at the end;
  its log is saved beside the screenshots). Tests that need other settings start their own with
  `StreamlitServer(env={...})`.
- `browser`: one headless Chromium per test session.
- `app`: a fresh browser context (its own Streamlit session) on `server`, wrapped in `LabPage`.

Screenshots and server logs go to $E2E_ARTIFACTS, else test-artifacts/e2e/ (ignored by git).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from streamlit_server import CHROMIUM, CHROMIUM_ARGS, LabPage, StreamlitServer


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (.ci/run does) for the browser tests")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def server(browser):
    srv = StreamlitServer(name="server")
    yield srv
    srv.stop()


@pytest.fixture
def new_app(browser):
    """Factory: new_app(server) -> LabPage in a fresh context (a separate Streamlit session)."""
    contexts = []

    def make(srv: StreamlitServer) -> LabPage:
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        ctx.set_default_timeout(30_000)
        contexts.append(ctx)
        return LabPage(ctx.new_page(), srv.url)

    yield make
    for ctx in contexts:
        ctx.close()


@pytest.fixture
def app(new_app, server):
    return new_app(server)
