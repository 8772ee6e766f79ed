"""Reading a pattern chart in the browser by its pixels (Streamlit's embed exposes no Vega view): the heatmap
panels of a chart's picture and the brightness of one query row in each."""
from __future__ import annotations

import io
import urllib.parse

import numpy as np
from PIL import Image


def picture(locator) -> np.ndarray:
    """The element's pixels [h, w, 3] (int)."""
    return np.asarray(Image.open(io.BytesIO(locator.screenshot())).convert("RGB")).astype(int)


def _runs(mask: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """[start, end) of the runs of True in mask whose length is within [lo, hi]."""
    out, start = [], None
    for i, m in enumerate(list(mask) + [False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            if lo <= i - start <= hi:
                out.append((start, i))
            start = None
    return out


def panels(img: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(top, bottom, left, right) of every heatmap panel of a pattern grid: runs of at least 80 rows and columns
    full of colour (viridis is saturated; axes, labels and the page are grey or white), of about one length
    (the grid's panels are square; Streamlit may scale the chart to its column)."""
    coloured = (img.max(axis=2) - img.min(axis=2)) > 40
    cols = _runs(coloured.sum(axis=0) > 100, 80, 10_000)
    rows = _runs(coloured.sum(axis=1) > 100, 80, 10_000)
    if not cols:
        return []
    side = float(np.median([r - l for l, r in cols]))
    near = [(a, b) for a, b in rows if abs(b - a - side) < 0.15 * side]
    return [(t, b, l, r) for t, b in near for l, r in cols if abs(r - l - side) < 0.15 * side]


def row_band(panel: tuple[int, int, int, int], query: int, T: int) -> slice:
    """The image rows of `query`'s row in a panel (its inner part, clear of the outline)."""
    top, bottom = panel[0], panel[1]
    h = (bottom - top) / T
    return slice(int(top + query * h + h * 0.3), int(top + (query + 1) * h - h * 0.3) + 1)


def row_centre(panel: tuple[int, int, int, int], query: int, T: int, frac: float = 0.05) -> tuple[float, float]:
    """(x, y) in the picture of a point of `query`'s row, `frac` of the way across (a drawn cell: key 0 side)."""
    top, bottom, left, right = panel
    return left + frac * (right - left), top + (query + 0.5) * (bottom - top) / T


def first_column_panel(img: np.ndarray) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a lone square heatmap whose first column has a cell in every row (a causal
    pattern, key 0), such as the Archetypes page's matrix: the leftmost column of the picture holding a run of
    colour at least 150 px tall."""
    coloured = (img.max(axis=2) - img.min(axis=2)) > 40
    for x in range(img.shape[1]):
        col = np.concatenate([[False], coloured[:, x], [False]]).astype(int)
        edges = np.flatnonzero(np.diff(col))
        for start, end in zip(edges[::2], edges[1::2]):
            if end - start >= 150:
                return int(start), int(end), x, x + int(end - start)
    raise AssertionError("no heatmap found in the picture")


def link(app) -> dict[str, str]:
    """The address bar's query: the share link's settings."""
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(app.page.url).query))


def pins(app, expected: int) -> list[int]:
    """The pinned queries the address holds, once it holds `expected` of them (the fragment's run is over)."""
    app.page.wait_for_function(f"() => (new URLSearchParams(location.search).get('pin') || '').split(',')"
                               f".filter(s => s).length === {expected}", timeout=30_000)
    app.wait_idle()
    return [int(p) for p in link(app).get("pin", "").split(",") if p]


def away(app) -> None:
    """The pointer off every chart, so that no hover preview is drawn."""
    app.page.mouse.move(5, 5, steps=3)
    app.page.wait_for_timeout(300)


def first_chart(app, path: str):
    """Open the page at `path` and return its first chart, once two have drawn, scrolled into view with the
    pointer moved off it (nothing hovered)."""
    app.goto(path)
    assert app.wait_charts(2) >= 2
    chart = app.charts().first
    chart.scroll_into_view_if_needed()
    away(app)
    return chart


def download(app, label: str):
    """The first chart's Export menu, `label` ("SVG", "PNG", "CSV"): the download."""
    app.page.locator('[data-testid="stPopover"] button').first.click()
    body = app.page.locator('[data-testid="stPopoverBody"]')
    with app.page.expect_download() as got:
        body.get_by_role("button", name=label).click()
    app.page.keyboard.press("Escape")
    return got.value


def point_at(app, chart, x: float, y: float, click: bool = True, shift: bool = False) -> None:
    """Move the pointer to (x, y) of the chart's box (a hover), and click there unless `click` is False
    (shift held: a shift-click)."""
    box = chart.bounding_box()
    app.page.mouse.move(box["x"] + x, box["y"] + y, steps=3)
    if click:
        if shift:
            app.page.keyboard.down("Shift")
        app.page.mouse.click(box["x"] + x, box["y"] + y)
        if shift:
            app.page.keyboard.up("Shift")
