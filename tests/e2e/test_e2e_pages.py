"""Every page in a real browser: it loads, its script finishes, no exception box, its charts draw."""
from __future__ import annotations

import pytest

from ui.pages import PATH

from conftest import PAGES, StreamlitServer

# Charts each page draws for the default (shipped) model without any clicks: the least number. Home
# draws none; it must show its headline metrics and a link to every other page instead.
MIN_CHARTS = {"train": 1, "attention": 1, "circuits": 1, "depth": 1, "icl": 1, "archetypes": 1, "causal": 1}
HOME_METRICS = 4  # first-copy loss, later-copy loss, later-copy accuracy, strongest induction head


@pytest.mark.parametrize("path", list(PAGES), ids=[p or "home" for p in PAGES])
def test_page_renders(app, server, path):
    app.goto(path)
    app.assert_no_exception()
    title = app.page.locator("h1").first.inner_text()
    assert title.strip(), "the page has no title"
    if path == "":
        main = app.page.locator('[data-testid="stMain"]')
        app.screenshot("page-home")
        assert main.locator('[data-testid="stMetric"]').count() == HOME_METRICS
        links = main.locator('[data-testid="stPageLink"]').all_inner_texts()
        assert [link.split(". ", 1)[-1] for link in links] == [p.title for p in PATH], links
    else:
        want = MIN_CHARTS[path]
        drawn = app.wait_charts(want)
        app.screenshot(f"page-{path}")
        assert drawn >= want, f"/{path} drew {drawn} charts, expected at least {want}"
    assert not server.tracebacks(), server.tracebacks()[-1]


def test_deep_link_on_a_fresh_server_gets_the_lab_navigation(new_app):
    """A fresh server whose first visitor opens /train directly. Streamlit's old multipage mode
    (a `pages/` folder beside the entry script) would run pages/train.py on its own: no sidebar
    picker, and file names in the navigation for every later session too."""
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
