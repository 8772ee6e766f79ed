"""What pinning tokens costs the server (ui/charts/attention.py's pin selection), in CPU-seconds of the
`streamlit run dashboard.py` process (utime + stime from /proc/<pid>/stat, so the browser and the machine's
other load do not count).

    python bench/pin_cost.py [--clicks 20] [--page attention|archetypes] [--keys]

One headless Chromium (Debian's, at nice 19) opens the page (Attention: the every-head grid; Archetypes: the
matrix and flow views, one chart; Train: the shipped run's film strip, whose pin the caption under it names), then:
1. clicks: each click pins a different query row of the chart (the pin reaches the server through the
   chart's on_select callback, which reruns only the chart's fragment, and the address bar follows), waiting for
   the address to show the new pin;
2. hovers: the pointer moved over as many rows (the hover preview is drawn in the browser only);
3. idle: the server left alone for as long as the clicks took (its own background cost, for comparison).
Prints CPU-s per click and per hover, with the CPU kind and the one-thread matmul rate (bench/machine.py).
--keys (Attention only): the clicks are alt-clicks on the single head's key columns instead, each pinning a key apart
(the chart's on_select reruns its fragment and the address's keys= follows).

Measured on the development host (AMD EPYC, AVX-512), 20 clicks each: Attention grid 0.0100 CPU-s a click,
0.0025 a hover (102 GFLOP/s); Archetypes matrix and flow 0.0090 a click, 0.0010 a hover (96 GFLOP/s); the
server idle as long took 0.050 CPU-s in both. On 2026-12-05 (same host, busier: 59-85 GFLOP/s), 20 clicks each:
Attention grid 0.0095 CPU-s a click; keys pinned apart on the single head (--keys: they reach the server since a link
carries them, keys=) 0.0110 a click (the server idle as long 0.130 CPU-s for 19.5 s); the Train page's film strip
(--page train) 0.0085 a click, 0.0025 a hover (idle as long 0.060 CPU-s for 16 s).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


STRIP_CAPTION = """() => ([...document.querySelectorAll('[data-testid="stCaptionContainer"]')].find(
    e => /^(Click a row to pin|Pinned: query)/.test(e.innerText)) || {innerText: ''}).innerText"""
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clicks", type=int, default=20)
    p.add_argument("--page", choices=["attention", "archetypes", "train"], default="attention")
    p.add_argument("--keys", action="store_true", help="alt-click key columns of the Attention page's single head")
    args = p.parse_args(argv)
    if args.keys and args.page != "attention":
        p.error("--keys: the Attention page's single head only")

    from pin_tools import first_column_panel, panels, picture
    from playwright.sync_api import sync_playwright
    from strip_tools import find_strip, strip_panels

    from streamlit_server import StreamlitServer, bench_tab

    # the patterns as a student sees them once the page's question is answered (ui/quiz.py hides them before)
    server = StreamlitServer(name="pin_cost", env={"ATTENTION_LAB_PREDICT": "off"})
    os.nice(19)  # this process and the browser it starts; the server was started before
    pid = server.proc.pid
    try:
        with sync_playwright() as pw:
            app = bench_tab(pw, server)
            app.goto(args.page)
            app.wait_charts(4 if args.page == "train" else 2)
            if args.page == "train":  # the shipped run's film strip: the chart just above its pin's caption
                chart = find_strip(app)[0]
            else:
                chart = app.charts().nth(1) if args.keys else app.charts().first
            chart.scroll_into_view_if_needed()
            app.page.mouse.move(5, 5)
            app.page.wait_for_timeout(500)
            if args.keys:  # the single head's pattern: the tallest panel
                found = lambda img: sorted(panels(img), key=lambda p: -(p[1] - p[0]))  # noqa: E731
            elif args.page == "train":  # the strip's first frame of its first head
                found = lambda img: strip_panels(img)[0]  # noqa: E731
            else:
                found = panels if args.page == "attention" else lambda img: [first_column_panel(img)]
            top, bottom, left, right = found(picture(chart))[0]
            box = chart.bounding_box()
            param = "keys" if args.keys else "pin"

            def pin_of() -> str:
                if args.page == "train":  # no address: the caption under the strip names the pin
                    return app.page.evaluate(STRIP_CAPTION)
                return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(app.page.url).query)).get(param, "")

            def row(frac: float) -> tuple[float, float]:  # a point on the causal side of the row at frac
                if args.keys:  # the bottom row (every key is causal there), the column at frac
                    return box["x"] + left + frac * (right - left), box["y"] + bottom - 3
                return box["x"] + left + 0.02 * (right - left), box["y"] + top + frac * (bottom - top)

            fracs = [0.1 + 0.8 * ((i * 7) % args.clicks) / args.clicks for i in range(args.clicks)]

            def click_rows(fs) -> None:
                for f in fs:
                    was = pin_of()
                    app.page.mouse.move(*row(f), steps=2)
                    if args.keys:
                        app.page.keyboard.down("Alt")
                    app.page.mouse.click(*row(f))
                    if args.keys:
                        app.page.keyboard.up("Alt")
                    app.page.wait_for_function(
                        f"() => ({STRIP_CAPTION})() !== {was!r}" if args.page == "train" else
                        f"() => (new URLSearchParams(location.search).get('{param}') || '') !== {was!r}")
                    app.wait_idle()

            click_rows([0.5, 0.3])  # warm: the fragment's first runs
            c0, t0 = cpu_seconds(pid), time.monotonic()
            click_rows(fracs)
            clicks_cpu, clicks_wall = cpu_seconds(pid) - c0, time.monotonic() - t0

            app.page.mouse.move(5, 5)
            app.page.wait_for_timeout(500)
            runs = app.page.evaluate("""() => { window.__runs = 0; const app = document.querySelector(
                '[data-testid="stApp"]'); new MutationObserver(() => { if (app.dataset.testScriptState === 'running')
                window.__runs += 1 }).observe(app, {attributes: true}); return 0 }""")
            c0, t0 = cpu_seconds(pid), time.monotonic()
            for f in fracs:
                app.page.mouse.move(*row(f), steps=4)
                app.page.wait_for_timeout(150)
            app.page.mouse.move(5, 5)
            app.page.wait_for_timeout(500)
            hover_cpu, hover_wall = cpu_seconds(pid) - c0, time.monotonic() - t0
            runs = app.page.evaluate("() => window.__runs")

            c0 = cpu_seconds(pid)
            time.sleep(clicks_wall)
            idle_cpu = cpu_seconds(pid) - c0
            app.assert_no_exception()
            app.page.context.browser.close()
    finally:
        server.stop()

    from bench.machine import matmul_rate
    from core.model import cpu

    n = len(fracs)
    print(f"page {args.page}" + (" (keys pinned apart: alt-clicks on the single head)" if args.keys else ""))
    print(f"CPU {cpu.kind()}; matmul {matmul_rate():.0f} GFLOP/s (one thread, 1024²)")
    print(f"{n} {'key' if args.keys else 'pin'} clicks: server {clicks_cpu:.3f} CPU-s, {clicks_cpu / n:.4f} a click "
          f"({clicks_wall:.1f} s of wall time; the server idle as long: {idle_cpu:.3f} CPU-s)")
    print(f"{n} hovers: server {hover_cpu:.3f} CPU-s, {hover_cpu / n:.4f} a hover ({hover_wall:.1f} s of wall "
          f"time, {runs} script runs; idle for as long: {idle_cpu * hover_wall / clicks_wall:.3f} CPU-s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
