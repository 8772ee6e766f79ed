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
        lefts = [a for a, _ in _runs(mask[top], 1, 6)]
        cell = min(b - a for a, b in _runs(mask[top], 1, 6))
        side = bottom - top
        out += [(top, bottom, left, left + side) for left in lefts]
    return out, cell
