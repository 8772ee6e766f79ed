"""Every page in a real browser: it loads, its script finishes, no exception box, its charts draw, and
it reads at 800 px and at 1400 px (sidebar open): no chart or text block overlaps another, and no
chart is wider than the main column or runs past its right edge."""
from __future__ import annotations

import pytest

from ui.pages import PATH

from streamlit_server import PAGES

pytestmark = pytest.mark.e2e

WIDTHS = (800, 1400)
# Charts each page draws for the default (shipped) model without any clicks: the least number. Home
# draws none; it must show its headline metrics and a link to every other page instead.
MIN_CHARTS = {"train": 1, "attention": 1, "circuits": 1, "depth": 1, "icl": 1, "archetypes": 1, "causal": 1,
              "laws": 1, "exercises": 0, "glossary": 0}
HOME_METRICS = 4  # first-copy loss, later-copy loss, later-copy accuracy, strongest induction head
SLACK = 2  # px: rounding of fractional layout
OVERLAP = 6  # px: Streamlit's text blocks reach a few px into the next one's margin (invisible, no ink)

# Leaf blocks a student reads: charts (the box they are seen in), text, metrics, tables, code.
BOXES_JS = r"""
() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]').getBoundingClientRect();
  const pick = [
    ['chart', '[data-testid="stVegaLiteChart"]'],  // its visible box: a wider drawing scrolls inside it
    ['text', '[data-testid="stMarkdownContainer"], [data-testid="stCaptionContainer"]'],
    ['metric', '[data-testid="stMetric"]'],
    ['table', '[data-testid="stDataFrame"], [data-testid="stTable"]'],
    ['code', '[data-testid="stCode"]'],
  ];
  const out = [];
  for (const [kind, sel] of pick) {
    for (const el of document.querySelectorAll(sel)) {
      if (el.closest('[data-testid="stSidebar"], [data-testid="stTooltipContent"]')) continue;
      if (el.closest('[data-testid="stWidgetLabel"], [data-testid="stSlider"]')) continue;  // a widget's own parts
      const r = el.getBoundingClientRect();
      if (r.width < 2 || r.height < 2 || !el.checkVisibility()) continue;
      out.push({kind, el, left: r.left, top: r.top, right: r.right, bottom: r.bottom,
                label: (el.innerText || el.getAttribute('aria-label') || kind).slice(0, 60)});
    }
  }
  const overlaps = [];
  for (let a = 0; a < out.length; a++) for (let b = a + 1; b < out.length; b++) {
    const A = out[a], B = out[b];
    if (A.el.contains(B.el) || B.el.contains(A.el)) continue;  // nested (a caption in a metric)
    const w = Math.min(A.right, B.right) - Math.max(A.left, B.left);
    const h = Math.min(A.bottom, B.bottom) - Math.max(A.top, B.top);
    if (w > OVERLAP && h > OVERLAP)
      overlaps.push([A.kind + ': ' + A.label, B.kind + ': ' + B.label, Math.round(w), Math.round(h)]);
  }
  const wide = out.filter(o => o.kind === 'chart' && (o.right > main.right + SLACK || o.left < main.left - SLACK))
                  .map(o => [o.label, Math.round(o.left), Math.round(o.right),
                             Math.round(main.left), Math.round(main.right)]);
  return {overlaps, wide, n: out.length, charts: out.filter(o => o.kind === 'chart').length,
          main: [main.left, main.right]};
}
""".replace("OVERLAP", str(OVERLAP)).replace("SLACK", str(SLACK))


@pytest.mark.parametrize("path", list(PAGES), ids=[p or "home" for p in PAGES])
def test_page_reads_at_both_widths(new_app, server, path):
    """The page loaded at the first width, then the window resized to each other one (the charts
    re-fit to their columns as they do when a student resizes)."""
    app = new_app(server)
    app.page.set_viewport_size({"width": WIDTHS[0], "height": 1000})
    app.goto(path)
    app.assert_no_exception()
    assert app.page.locator("h1").first.inner_text().strip(), "the page has no title"
    if path == "":
        main = app.page.locator('[data-testid="stMain"]')
        metrics = main.locator('[data-testid="stMetric"]')
        try:  # a first visitor's server may still be measuring the model after the first idle moment
            metrics.nth(HOME_METRICS - 1).wait_for(timeout=60_000)
        except Exception:
            app.screenshot("layout-home-no-metrics")
            pytest.fail(f"Home shows {metrics.count()} metrics, expected {HOME_METRICS}; its main column reads: "
                        f"{main.inner_text()[:800]!r}")
        assert metrics.count() == HOME_METRICS
        links = main.locator('[data-testid="stPageLink"]').all_inner_texts()
        assert [link.split(". ", 1)[-1] for link in links] == [p.title for p in PATH], links
    else:
        drawn = app.wait_charts(MIN_CHARTS[path])
        assert drawn >= MIN_CHARTS[path], f"/{path} drew {drawn} charts, expected at least {MIN_CHARTS[path]}"
    for width in WIDTHS:
        app.page.set_viewport_size({"width": width, "height": 1000})
        app.page.wait_for_timeout(800)  # charts re-fit to their columns
        sidebar = app.page.locator('[data-testid="stSidebar"]')
        box = sidebar.bounding_box()
        assert box and box["width"] > 200 and box["x"] >= 0, "the sidebar should be open"
        found = app.page.evaluate(BOXES_JS)
        app.screenshot(f"layout-{path or 'home'}-{width}")
        assert found["n"] > 3
        assert not found["wide"], f"/{path} at {width}px: charts past the main column {found['main']}: {found['wide']}"
        assert not found["overlaps"], f"/{path} at {width}px: overlapping blocks: {found['overlaps'][:5]}"
    app.assert_no_exception()
    assert not server.tracebacks(), server.tracebacks()[-1]


def test_question_and_python_panel(app):
    """Answer a question (screenshots before and after) and open an In Python panel."""
    app.page.set_viewport_size({"width": 1400, "height": 1000})
    app.goto("attention")
    app.wait_charts(1)
    box = app.page.get_by_text("Predict first").first.locator("xpath=ancestor::div[@data-testid='stVerticalBlock'][1]")
    box.scroll_into_view_if_needed()
    path = app.screenshot("question-before")
    box.screenshot(path=str(path.with_name("question-box-before.png")))
    app.after(lambda: box.locator('[data-testid="stRadio"] label').nth(1).click())
    box = app.page.get_by_text("Predict first").first.locator("xpath=ancestor::div[@data-testid='stVerticalBlock'][1]")
    verdict = box.locator('[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentError"]')
    assert verdict.count() == 1 and verdict.inner_text().startswith(("Right.", "Not quite"))
    box.screenshot(path=str(path.with_name("question-box-after.png")))
    panel = app.page.locator('[data-testid="stExpander"]').filter(has_text="In Python").first
    panel.locator("summary").click()
    code = panel.locator('[data-testid="stCode"]')
    code.wait_for()
    assert "read_checkpoint('checkpoints/" in code.inner_text()
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(path.with_name("python-panel.png")))
    app.assert_no_exception()
