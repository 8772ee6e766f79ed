"""Nothing on a page is cut off and every multi-line chart has a legend, at 800 px and at 1400 px (sidebar
open), on every page for the default (shipped) model, and on the Depth page for the zero-block model.

Text: every visible label, metric label, value and delta, button, selectbox value (the sidebar's model
picker among them), caption and st.table cell whose box clips its content (overflow not visible) must
hold all of it: its scrollWidth may not exceed its clientWidth (Streamlit cuts such text with "…").
Display math is left out (KaTeX scrolls a wide formula on purpose).

Tables: st.dataframe draws its cells on a canvas (glide-data-grid), so the columns' widths and cells are
read from the grid's own props and each column must be as wide as its header's and its cells' text (the
grid's fonts and padding, measured with a canvas); at 1400 px the grid must also fit its box (no column
hidden behind a horizontal scroll bar), and so must an st.table. At 800 px a wide table may scroll.

Legends: a chart (drawn as SVG) with two or more lines of different colours has a legend."""
from __future__ import annotations

import pytest

from streamlit_server import MIN_CHARTS, PAGES

pytestmark = pytest.mark.e2e

WIDTHS = (800, 1400)
SLACK = 1  # px: rounding of fractional layout

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


# Every page for the default model, and the Depth page for the zero-block model too (its first section's
# measurements show only for that one).
CASES = [(p, None) for p in PAGES] + [("depth", "zero-block")]


@pytest.mark.parametrize(("path", "model"), CASES, ids=[p or "home" if m is None else f"{p}-{m}" for p, m in CASES])
def test_nothing_is_cut_off_and_lines_have_legends(new_app, server, path, model):
    app = new_app(server)
    app.page.set_viewport_size({"width": WIDTHS[-1], "height": 1000})
    app.goto(path)
    if model:
        app.pick(model)
    if path:
        app.wait_charts(MIN_CHARTS[path])
    else:
        app.page.locator('[data-testid="stMain"] [data-testid="stMetric"]').first.wait_for(timeout=60_000)
    app.assert_no_exception()
    problems = []
    for width in WIDTHS:
        app.page.set_viewport_size({"width": width, "height": 1000})
        app.page.wait_for_timeout(1000)  # the layout and the charts re-fit
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
        app.screenshot(f"pixels-{path or 'home'}{'-' + model if model else ''}-{width}")
        app.page.set_viewport_size({"width": width, "height": 1000})
    assert not problems, f"/{path}:\n" + "\n".join(problems)
