"""Pinned tokens in a real browser (ui/charts/attention.py): a click on a query row of the Attention page's
every-head grid lights that row in every head and a click above the diagonal releases it; shift-click adds a
second query, and the strip's bars are the mean over the heads of core's pattern, summed over the two. The pin
reaches the address (the share link) through the chart's fragment. Streamlit's embed exposes no Vega view, so
the chart is read by its pixels and its tooltips."""
from __future__ import annotations

import re

import numpy as np
import pytest
from pin_tools import away, download, first_chart, link, panels, picture, pins, point_at, row_band

from core.model.checkpoints import read_checkpoint
from core.reading.analysis import task_sequence_view
from ui.charts import OKABE_ITO
from ui.charts.attention import ZERO_FILL

from helpers import ROOT

pytestmark = pytest.mark.e2e

BACKGROUND = np.array([int(ZERO_FILL[i:i + 2], 16) for i in (1, 3, 5)])






def _grid(app):
    chart = first_chart(app, "attention")
    before = picture(chart)
    found = panels(before)
    assert len(found) >= 2, "the grid's heatmap panels were not found in its picture"
    return chart, before, found


def test_a_click_pins_a_query_row_in_every_head_and_a_click_in_the_future_releases_it(app):
    chart, before, found = _grid(app)
    T = int(re.search(r"\((\d+) tokens\)", app.page.locator('[data-testid="stMain"]').inner_text()).group(1))
    top, bottom, left, right = found[0]
    point_at(app, chart, left + 0.3 * (right - left), top + 0.4 * (bottom - top))  # mostly undrawn: the row takes it
    (q,) = pins(app, 1)
    assert abs(q - 0.4 * T) <= 1
    away(app)
    after = picture(chart)
    for panel in found:
        t, b, lo, hi = panel
        band = row_band(panel, q, T)
        rest = np.ones(after.shape[0], bool)
        rest[max(t, band.start - 4):band.stop + 4] = False
        rest[:t], rest[b:] = False, False
        inside = (slice(None), slice(lo + 2, hi - 2))
        # the pinned row is lit (undimmed, outlined in white); every other row of every head is dimmed
        assert after[band][inside].mean() > before[band][inside].mean() + 20, panel
        was, now = before[rest][inside], after[rest][inside]
        drawn = np.abs(was - BACKGROUND).sum(axis=-1) > 30  # cells (undrawn ones show the background)
        assert drawn.sum() > 50 and now[drawn].mean() < 0.8 * was[drawn].mean(), panel
    # release: a click above the diagonal (the future: nothing there to pin)
    point_at(app, chart, left + 0.9 * (right - left), top + 0.1 * (bottom - top))
    assert pins(app, 0) == []
    away(app)
    assert np.abs(picture(chart) - before).mean() < 1
    app.assert_no_exception()


def test_shift_click_sums_two_queries_and_the_strip_shows_the_mean_over_heads(app):
    chart, before, found = _grid(app)
    address = link(app)
    model, info = read_checkpoint(ROOT / "checkpoints" / f"{address['model']}.pt")
    view = task_sequence_view(model, info["task"], int(address["period"]), int(address["seed"]))
    T = view.raw.shape[-1]
    top, bottom, left, right = found[0]
    point_at(app, chart, left + 0.3 * (right - left), top + 0.5 * (bottom - top))
    pins(app, 1)
    point_at(app, chart, left + 0.3 * (right - left), top + 0.75 * (bottom - top), shift=True)
    q1, q2 = pins(app, 2)
    assert abs(q1 - 0.5 * T) <= 1 and abs(q2 - 0.75 * T) <= 1
    want = view.raw[:, :, [q1, q2], :].mean(axis=(0, 1)).sum(axis=0)  # [T]: mean over heads, summed over queries
    away(app)
    img = picture(chart)
    strip_left, strip_right = found[0][2], max(p[3] for p in found)  # the strip spans the grid's width
    blue = np.array([int(OKABE_ITO[4][i:i + 2], 16) for i in (1, 3, 5)])
    shown = {}
    for k in sorted(np.argsort(want)[-3:]):  # the three tallest bars
        x = strip_left + (k + 0.5) * (strip_right - strip_left) / T
        column = np.abs(img[:, int(x)] - blue).sum(axis=1) < 30
        column[:max(p[1] for p in found)] = False  # below the grid
        ys = np.flatnonzero(column)
        assert len(ys), f"no bar drawn at key {k}"
        first = ys[0]
        run_end = first + np.argmax(~column[first:]) if (~column[first:]).any() else first + 1
        box = chart.bounding_box()
        app.page.mouse.move(box["x"] + x, box["y"] + (first + run_end) / 2, steps=3)
        tip = app.page.locator("#vg-tooltip-element.visible")
        tip.wait_for(timeout=5_000)
        text = tip.inner_text()
        shown[k] = float(re.search(r"mean attention\s+([\d.]+)", text).group(1))
        assert int(re.search(r"key position j\s+(\d+)", text).group(1)) == k
    for k, value in shown.items():
        assert value == pytest.approx(want[k], abs=2e-3), (k, value, want[k])
    app.assert_no_exception()


def test_on_a_narrow_screen_a_click_pins_the_row_under_the_pointer(app):
    """At 800 px the grid is wider than its column: it scrolls sideways instead of being scaled down, since Vega
    reads a pointer on a scaled canvas as if it were not scaled (the row pinned, and every tooltip, would be
    another than the one under the pointer)."""
    app.page.set_viewport_size({"width": 800, "height": 1000})
    chart, before, found = _grid(app)
    T = int(re.search(r"\((\d+) tokens\)", app.page.locator('[data-testid="stMain"]').inner_text()).group(1))
    top, bottom, left, right = found[0]
    point_at(app, chart, left + 0.3 * (right - left), top + 0.6 * (bottom - top))
    (q,) = pins(app, 1)
    assert abs(q - 0.6 * T) <= 1
    app.assert_no_exception()



def _dimmed(svg_path) -> int:
    """Marks drawn dimmed (ui.charts.attention.DIM) in an exported SVG: rows not pinned while some are."""
    from ui.charts.attention import DIM

    return len(re.findall(rf'opacity="{DIM:g}"', open(svg_path).read()))


def test_an_exported_figure_shows_the_pinned_query_and_names_it(app):
    """The grid exported before a pin dims nothing; after a click pins query q, its SVG dims every other row (as
    the page shows it), its file is named with pin-q, and its PNG opens."""
    from PIL import Image

    chart, _, found = _grid(app)
    plain = download(app, "SVG")
    assert "pin-" not in plain.suggested_filename and _dimmed(plain.path()) == 0
    top, bottom, left, right = found[0]
    point_at(app, chart, left + 0.3 * (right - left), top + 0.5 * (bottom - top))
    (q,) = pins(app, 1)
    away(app)
    pinned = download(app, "SVG")
    assert f"_pin-{q}_" in pinned.suggested_filename, pinned.suggested_filename
    assert _dimmed(pinned.path()) > 50
    png = download(app, "PNG")
    assert f"_pin-{q}_" in png.suggested_filename and Image.open(png.path()).size[0] > 300


def test_alt_click_pins_keys_apart_and_the_bars_are_each_querys_attention_to_them(app):
    """On the single head, alt-click pins a key column (the address carries it as keys=, and no query pin) and the
    bars beside the pattern give each query's attention to the pinned keys, summed when alt-shift-click adds a
    second: core's pattern, column sums (core.reading.analysis.task_sequence_view)."""
    from core.model.symbols import parse_head_label

    app.goto("attention")
    assert app.wait_charts(2) >= 2
    chart = app.charts().nth(1)
    chart.scroll_into_view_if_needed()
    away(app)
    address = link(app)
    model, info = read_checkpoint(ROOT / "checkpoints" / f"{address['model']}.pt")
    view = task_sequence_view(model, info["task"], int(address["period"]), int(address["seed"]))
    A = view.raw[parse_head_label(address["head"])]
    T = A.shape[-1]
    (top, bottom, left, right), *_ = sorted(panels(picture(chart)), key=lambda p: -(p[1] - p[0]))
    cell = (bottom - top) / T
    green = np.array([int(OKABE_ITO[2][i:i + 2], 16) for i in (1, 3, 5)])

    def alt_click(k: int, shift: bool = False) -> None:
        box = chart.bounding_box()
        x, y = box["x"] + left + (k + 0.5) * cell, box["y"] + top + (T - 0.5) * cell
        app.page.mouse.move(x, y, steps=3)
        app.page.keyboard.down("Alt")
        if shift:
            app.page.keyboard.down("Shift")
        app.page.mouse.click(x, y)
        if shift:
            app.page.keyboard.up("Shift")
        app.page.keyboard.up("Alt")
        away(app)

    def bar(i: int) -> float:
        img = picture(chart)
        y = int(top + (i + 0.5) * cell)
        row = np.abs(img[y] - green).sum(axis=1) < 30
        row[:right + 2] = False
        xs = np.flatnonzero(row)
        assert len(xs), f"no bar at query {i}"
        box = chart.bounding_box()
        app.page.mouse.move(box["x"] + (xs[0] + xs[-1]) / 2, box["y"] + y, steps=3)
        tip = app.page.locator("#vg-tooltip-element.visible")
        tip.wait_for(timeout=5_000)
        text = tip.inner_text()
        assert int(re.search(r"query position i\s+(\d+)", text).group(1)) == i, text
        return float(re.search(r"attention on the pinned keys\s+([\d.]+)", text).group(1))

    k1, k2 = T // 3, T // 2
    alt_click(k1)
    i = k2 + int(np.argmax(A[k2:, k1]))  # the query that reads k1 most (one that can see k2 too)
    assert bar(i) == pytest.approx(A[i, k1], abs=2e-3)
    away(app)
    alt_click(k2, shift=True)
    both = A[:, k1] + A[:, k2]
    for i in k2 + np.argsort(both[k2:])[-2:]:  # the two queries that read them most (wide enough to hover)
        assert bar(i) == pytest.approx(A[i, k1] + A[i, k2], abs=2e-3)
        away(app)
    app.page.wait_for_function(f"() => new URLSearchParams(location.search).get('keys') === '{k1},{k2}'",
                               timeout=30_000)  # the keys go into the share link (the chart's fragment reruns)
    assert "pin" not in link(app)  # no query pinned
    app.assert_no_exception()


def test_the_film_strip_pins_a_query_row_in_every_frame_of_both_heads_and_releases_it(app):
    """The Train page's film strip of the shipped run (ui/charts/timeline.py strip): a click on a query row in one
    panel lights that row in every frame of both heads (its cells as they were, its future marked in vermillion)
    and dims every other row; hovering a row previews it the same way; shift-click in another panel adds a second; a
    click above a diagonal releases both and the strip is as before. The pin reaches the server (the caption under
    the strip names it)."""
    from strip_tools import coloured, find_strip

    from ui.charts.timeline import MARK

    app.goto("train")
    assert app.wait_charts(4) >= 4
    chart, found, cell = find_strip(app)  # two heads x six frames
    before = picture(chart)
    n = (found[0][1] - found[0][0]) // cell
    mark = np.array([int(MARK[i:i + 2], 16) for i in (1, 3, 5)])
    caption = app.page.locator('[data-testid="stCaptionContainer"]').filter(has_text=re.compile("^Pinned: query|"
                                                                                                "^Click a row to pin"))

    def pinned_now() -> list[int]:
        app.page.wait_for_timeout(200)
        app.wait_idle()
        text = caption.first.inner_text()
        return [] if not text.startswith("Pinned") else [int(p) for p in re.findall(r"(\d+) \(", text)]

    def click(panel, query: int, shift: bool = False) -> None:
        top, _, left, _ = panel
        point_at(app, chart, left + 0.4 * (query + 1) * cell, top + (query + 0.5) * cell, shift=shift)

    def row_lit(img, panel, q: int) -> bool:
        top, _, left, right = panel
        y = top + q * cell + cell // 2
        future = img[y, left + (q + 1) * cell + 1:right - 1]
        causal = slice(left, left + (q + 1) * cell)
        return (np.abs(future - mark).sum(axis=1) < 40).mean() > 0.9 and \
            np.abs(img[y, causal] - before[y, causal]).mean() < 8

    q0 = int(0.8 * n)  # hovering previews a row in the browser alone: nothing pinned
    top, _, left, _ = found[5]
    point_at(app, chart, left + 0.4 * (q0 + 1) * cell, top + (q0 + 0.5) * cell, click=False)
    app.page.wait_for_timeout(300)
    hovered = picture(chart)
    assert all(row_lit(hovered, panel, q0) for panel in found) and pinned_now() == []
    away(app)
    q1 = int(0.6 * n)
    click(found[2], q1)  # the previous-token head's third frame
    app.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
                               ".some(e => e.innerText.startsWith('Pinned: query'))", timeout=30_000)
    assert pinned_now() == [q1]
    away(app)
    after = picture(chart)
    for panel in found:
        top, bottom, left, right = panel
        assert row_lit(after, panel, q1), panel
        others = np.ones(after.shape[0], bool)
        others[:top], others[bottom:] = False, False
        others[top + q1 * cell - 1:top + (q1 + 1) * cell + 1] = False
        was, now = before[others, left:right], after[others, left:right]
        drawn = coloured(was)
        assert drawn.sum() > 20 and now[drawn].mean() > was[drawn].mean() + 40, panel  # faded towards white
    q2 = int(0.3 * n)
    click(found[10], q2, shift=True)  # the induction head's fifth frame
    app.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
                               f".some(e => e.innerText.startsWith('Pinned: query {q2}'))", timeout=30_000)
    assert pinned_now() == [q2, q1]
    away(app)
    both = picture(chart)
    assert all(row_lit(both, panel, q) for panel in found for q in (q1, q2))
    top, _, left, right = found[7]
    point_at(app, chart, right - 3, top + 3 * cell)  # above the diagonal: the future, nothing to pin
    app.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
                               ".some(e => e.innerText.startsWith('Click a row to pin'))", timeout=30_000)
    assert pinned_now() == []
    away(app)
    assert np.abs(picture(chart) - before).mean() < 1
    app.assert_no_exception()
