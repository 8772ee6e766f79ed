"""A deep link on a fresh server gets the lab's navigation. (Every page loading, drawing its charts and
reading at two widths: tests/e2e/test_e2e_pixels.py.)"""
from __future__ import annotations

import pytest

from streamlit_server import StreamlitServer

pytestmark = pytest.mark.e2e


def test_deep_link_on_a_fresh_server_gets_the_lab_navigation(new_app):
    """A fresh server whose first visitor opens /train directly gets dashboard.py's shell: the sidebar
    picker, and the lab's titles in the navigation for every later session too. (With the page files
    in a `pages/` folder, Streamlit's old multipage mode ran pages/train.py on its own here; they live
    in app_pages/, which Streamlit does not look at.)"""
    fresh = StreamlitServer(name="server-deep-link")
    try:
        first, later = new_app(fresh), new_app(fresh)
        for app in (first.goto("train"), later.goto("circuits")):
            app.assert_no_exception()
            sidebar = app.page.locator('[data-testid="stSidebar"]')
            assert sidebar.get_by_text("Model under study").count() == 1, "the sidebar picker is missing"
            nav = app.page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
            assert any("Circuits & ablations" in t for t in nav), f"navigation shows {nav}"
        assert not fresh.tracebacks(), fresh.tracebacks()[-1]
    finally:
        fresh.stop()
