"""Every page in a real browser, read at 800 px and at 1400 px (sidebar open), for the default (shipped) model
and the Depth page for the zero-block model: one page load serves every check below (they were three files, each
loading every page again, until 5 Dec).

Loads: the page loads at 800 px, its script finishes, no exception box, it has a title and its charts draw
(Home: its headline metrics and a link to every other page); the window is then resized to 1400 px.

Layout: no chart or text block overlaps another, and no chart is wider than the main column or runs past its
right edge (a chart wider than its column scrolls inside its own box).

Text: every visible label, metric label, value and delta, button, selectbox value (the sidebar's model
picker among them), caption and st.table cell whose box clips its content (overflow not visible) must
hold all of it: its scrollWidth may not exceed its clientWidth (Streamlit cuts such text with "…").
Display math is left out (KaTeX scrolls a wide formula on purpose).

Tables: st.dataframe draws its cells on a canvas (glide-data-grid), so the columns' widths and cells are
read from the grid's own props and each column must be as wide as its header's and its cells' text (the
grid's fonts and padding, measured with a canvas); at 1400 px the grid must also fit its box (no column
hidden behind a horizontal scroll bar), and so must an st.table. At 800 px a wide table may scroll.

Legends: a chart (drawn as SVG) with two or more lines of different colours has a legend, and no legend, axis
title or chart title runs past the chart's box where the chart does not scroll (its container cuts it). Colour bars
survive a change of the address: no chart points a fill at the page's address (Vega's SVG gradients do,
vega/vega#3948, and go blank once ui/share.py rewrites the query), and the pages with colour bars draw them
on a canvas (ui.charts.kept.on_canvas_if_gradient)."""
from __future__ import annotations

import pytest

from ui.pages import PATH

from streamlit_server import MIN_CHARTS, PAGES

pytestmark = pytest.mark.e2e

WIDTHS = (800, 1400)
SLACK = 1  # px: rounding of fractional layout
HOME_METRICS = 4  # first-copy loss, later-copy loss, later-copy accuracy, strongest induction head
BOX_SLACK = 2  # px: rounding of fractional layout, for blocks
OVERLAP = 6  # px: Streamlit's text blocks reach a few px into the next one's margin (invisible, no ink)
WITH_COLOUR_BARS = ("attention", "circuits", "causal")
ADDRESS_REFS_JS = r"""() => [...document.querySelectorAll(
    '[data-testid="stVegaLiteChart"] svg [fill*="url("], [data-testid="stVegaLiteChart"] svg [style*="url("]')]
    .map(e => e.getAttribute('fill') || e.getAttribute('style'))"""

CUT_JS = r"""
() => {
  const sel = ['[data-testid="stMetricLabel"]', '[data-testid="stMetricValue"]', '[data-testid="stMetricDelta"]',
    '[data-testid="stWidgetLabel"]', '[data-testid="stSelectbox"] input', '[data-testid="stButton"] button',
    '[data-testid="stDownloadButton"] button', '[data-testid="stCaptionContainer"]', '[data-testid="stTable"] th',
    '[data-testid="stTable"] td', '[data-testid="stMarkdownContainer"] p', '[data-testid="stPageLink"]'];
  const cut = [];
  for (const s of sel) for (const el of document.querySelectorAll(s)) {
    for (const e of [el, ...el.querySelectorAll('*')]) {
      if (e.closest('.katex, .katex-display') || !e.checkVisibility()) continue;
      const text = e.tagName === 'INPUT' ? e.value : (e.innerText || '');
      if (!text.trim()) continue;
      const clips = e.tagName === 'INPUT' || getComputedStyle(e).overflowX !== 'visible';
      if (clips && e.scrollWidth > e.clientWidth + SLACK)
        cut.push(`${s}: ${JSON.stringify(text.slice(0, 70))} needs ${e.scrollWidth} px, has ${e.clientWidth}`);
    }
  }
  return [...new Set(cut)];
}
""".replace("SLACK", str(SLACK))

GRIDS_JS = r"""
() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const out = [];
  for (const canvas of document.querySelectorAll('[data-testid="stDataFrame"] [data-testid="data-grid-canvas"]')) {
    if (!canvas.checkVisibility()) continue;
    const scroller = canvas.closest('[data-testid="stDataFrame"]').querySelector('.dvn-scroller');
    const fiber = canvas[Object.keys(canvas).find(k => k.startsWith('__reactFiber'))];
    let f = fiber, props = null;
    for (; f; f = f.return) {
      const p = f.memoizedProps;
      if (p && Array.isArray(p.columns) && p.columns.length && p.columns.every(c => typeof c.width === 'number')
          && p.theme && typeof p.getCellContent === 'function') { props = p; break; }
    }
    if (!props) { out.push({found: false}); continue; }
    const {columns: cols, theme} = props;
    const pad = 2 * theme.cellHorizontalPadding;
    ctx.font = `${theme.headerFontStyle} ${theme.headerFontFamily || theme.fontFamily}`;
    const narrow = cols.filter(c => ctx.measureText(c.title || '').width + pad > c.width + 1)
                       .map(c => `header ${c.title} (${c.width} px)`);
    ctx.font = `${theme.baseFontStyle} ${theme.fontFamily}`;
    cols.forEach((c, i) => {
      for (let r = 0; r < Math.min(props.rows, 500); r++) {
        const cell = props.getCellContent([i, r]);
        const text = typeof cell.displayData === 'string' ? cell.displayData : '';
        if (text && ctx.measureText(text).width + pad > c.width + 1) {
          narrow.push(`${c.title}: ${JSON.stringify(text.slice(0, 60))} (${c.width} px)`); break;
        }
      }
    });
    out.push({found: true, narrow, scroll: scroller.scrollWidth, box: scroller.clientWidth,
              headers: cols.map(c => c.title).join(', ')});
  }
  return out;
}
"""

LEGENDS_JS = r"""
() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(c => c.checkVisibility()).map(c => {
  const svg = c.querySelector('svg.marks');
  if (!svg) return null;
  const strokes = new Set([...svg.querySelectorAll('g.mark-line path')].map(p => p.getAttribute('stroke')));
  const title = [...svg.querySelectorAll('g.role-title text')].map(t => t.textContent).join(' ');
  return {lines: strokes.size, legend: svg.querySelectorAll('g.role-legend').length > 0, title};
}).filter(x => x && x.lines >= 2 && !x.legend).map(x => `${x.title || 'untitled'}: ${x.lines} line colours`)
"""


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
""".replace("OVERLAP", str(OVERLAP)).replace("SLACK", str(BOX_SLACK))

# Every page for the default model, and the Depth page for the zero-block model too (its first section's
# measurements show only for that one).
CASES = [(p, None) for p in PAGES] + [("depth", "zero-block")]


# An SVG chart's legend, axis title or title whose text runs past the chart's box while the box does not scroll:
# the chart's container clips it (a legend under a chart in an 800 px window did: "never dropped (drawn at the ca")
CHART_TEXT_JS = """() => { const out = [];
  document.querySelectorAll('[data-testid="stVegaLiteChart"]').forEach((c, i) => {
    const box = c.getBoundingClientRect();
    if (c.scrollWidth > c.clientWidth + SLACK) return;  // a wide chart scrolls: its text can be reached
    c.querySelectorAll('g.role-legend text, g.role-axis-title text, g.role-title text').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && r.right > box.right + SLACK)
        out.push(`chart ${i}: ${JSON.stringify(t.textContent.slice(0, 60))} ${Math.round(r.right - box.right)} px`);
    });
  }); return out; }""".replace("SLACK", str(BOX_SLACK + 1))


@pytest.mark.parametrize(("path", "model"), CASES, ids=[p or "home" if m is None else f"{p}-{m}" for p, m in CASES])
def test_page_loads_reads_at_both_widths_and_cuts_nothing_off(new_app, server, path, model):
    app = new_app(server)
    app.page.set_viewport_size({"width": WIDTHS[0], "height": 1000})
    app.goto(path)
    if model:
        app.pick(model)
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
        assert app.page.evaluate(ADDRESS_REFS_JS) == []
        if path in WITH_COLOUR_BARS:
            assert app.page.locator('[data-testid="stVegaLiteChart"] canvas').count() >= 1
    problems = []
    for width in WIDTHS:
        app.page.set_viewport_size({"width": width, "height": 1000})
        app.page.wait_for_timeout(1000)  # the layout and the charts re-fit
        sidebar = app.page.locator('[data-testid="stSidebar"]').bounding_box()
        assert sidebar and sidebar["width"] > 200 and sidebar["x"] >= 0, "the sidebar should be open"
        found = app.page.evaluate(BOXES_JS)
        assert found["n"] > 3
        problems += [f"{width} px, chart past the main column {found['main']}: {w}" for w in found["wide"]]
        problems += [f"{width} px, overlapping blocks: {o}" for o in found["overlaps"][:5]]
        problems += [f"{width} px, cut off: {c}" for c in app.page.evaluate(CUT_JS)]
        grids = app.page.evaluate(GRIDS_JS)
        assert all(g["found"] for g in grids), "a table's columns could not be read from the grid"
        for g in grids:
            problems += [f"{width} px, table [{g['headers']}]: text wider than its column: {n}" for n in g["narrow"]]
            if width == WIDTHS[-1] and g["scroll"] > g["box"] + SLACK:
                problems.append(f"{width} px, table [{g['headers']}] needs {g['scroll']} px, has {g['box']}")
        if width == WIDTHS[-1]:
            problems += [f"{width} px, st.table needs {w} px, has {box}" for w, box in app.page.evaluate(
                "() => [...document.querySelectorAll('[data-testid=\"stTable\"]')]"
                ".filter(t => t.scrollWidth > t.clientWidth + SLACK).map(t => [t.scrollWidth, t.clientWidth])"
                .replace("SLACK", str(SLACK)))]
        problems += [f"{width} px, no legend: {c}" for c in app.page.evaluate(LEGENDS_JS)]
        problems += [f"{width} px, chart text cut off at its box: {c}" for c in app.page.evaluate(CHART_TEXT_JS)]
        app.screenshot(f"pixels-{path or 'home'}{'-' + model if model else ''}-{width}")
    app.assert_no_exception()
    assert not server.tracebacks(), server.tracebacks()[-1]
    assert not problems, f"/{path}:\n" + "\n".join(problems)
