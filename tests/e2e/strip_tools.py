"""Reading the Train page's film strip (ui/charts/timeline.py strip) in the browser by its pixels: its panels
(two heads x up to six frames) and their rows."""
from __future__ import annotations

import numpy as np
from pin_tools import _runs


def coloured(img: np.ndarray) -> np.ndarray:
    """Pixels of a saturated colour (viridis, the marker): not the page's white or the headers' grey."""
    return (img.max(axis=2) - img.min(axis=2)) > 40


def strip_panels(img: np.ndarray) -> tuple[list[tuple[int, int, int, int]], int]:
    """((top, bottom, left, right) of every panel, row by row, and the pixels per position) in the picture of
    an unpinned film strip. Every query row has a drawn cell (its largest weight is at least 1/n), so a
    panel's rows are one run of coloured rows; query 0 gives key 0 all its attention, so each panel's top-left
    cell is drawn: the runs of colour in a panel row's first pixel row are the panels' left edges."""
    mask = coloured(img)
    rows = _runs(mask.any(axis=1), 40, 10_000)
    out, cell = [], None
    for top, bottom in rows:
        firsts = _runs(mask[top], 1, 6)
        if not firsts:
            return [], None
        lefts = [a for a, _ in firsts]
        cell = min(b - a for a, b in firsts)
        side = bottom - top
        out += [(top, bottom, left, left + side) for left in lefts]
    return out, cell


STRIP_AT = """() => { const caption = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')].find(
    e => /^(Click a row to pin|Pinned: query)/.test(e.innerText));
    if (!caption) return -1;
    return [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(
    c => c.compareDocumentPosition(caption) & Node.DOCUMENT_POSITION_FOLLOWING).length - 1 }"""


def find_strip(app, panels: int = 12, timeout: float = 30.0):
    """(the film strip's chart, its panels, pixels per position) once it is drawn: the chart just above the
    caption naming its pin, holding `panels` panels (charts above it may still be drawing: looked up again
    until then)."""
    import time

    from pin_tools import away, picture

    deadline = time.monotonic() + timeout
    while True:
        at = app.page.evaluate(STRIP_AT)
        if at >= 0:
            chart = app.charts().nth(at)
            chart.scroll_into_view_if_needed()
            away(app)
            found, cell = strip_panels(picture(chart))
            if len(found) == panels:
                return chart, found, cell
        if time.monotonic() > deadline:
            raise AssertionError(f"no film strip of {panels} panels drawn")
        app.page.wait_for_timeout(500)
