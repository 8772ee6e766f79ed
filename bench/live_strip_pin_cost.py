"""What pinning queries on the live film strip costs the server while a run trains (app_pages/train.py
live_strip_panel: the pinned rows at full strength, the others dimmed, in PNG tiles kept per content and pin), in
CPU-seconds of the `streamlit run dashboard.py` process (utime + stime from /proc/<pid>/stat: the training runs in a
worker process of its own, the browser in another, neither counts).

    python bench/live_strip_pin_cost.py [--seconds 20] [--shots DIR]

One headless Chromium (Debian's, at nice 19) opens the Train page, trains a long run at the smallest batch, waits
for the film strip, then measures the server over `--seconds` without a pin, then over as long with two queries
pinned through the strip's picker (whose change reruns only the live fragment), and both again (the redraws cost
more as the run's curves grow). A redraw is counted when the progress
bar's step changes (the live panel redraws every RUN_EVERY seconds, app_pages/train.py, and a training run's redraw
always shows a new step). Prints CPU-s per redraw in both, with the CPU kind and the one-thread matmul rate
(bench/machine.py). --shots: screenshots of the pinned live strip at 1400 and 800 px.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from bench.pin_cost import cpu_seconds  # noqa: E402

COUNT_REDRAWS = """() => { window.__redraws = 0; let last = null; clearInterval(window.__watch);
    window.__watch = setInterval(() => { const bar = document.querySelector('[data-testid="stProgress"]');
    const text = bar ? bar.innerText : null; if (text !== last) { if (last !== null) window.__redraws += 1;
    last = text } }, 50); return 0 }"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--shots", type=Path, default=None)
    args = p.parse_args(argv)

    from playwright.sync_api import sync_playwright
    from test_e2e_train import long_run, press, smallest_batch, train_step, wait_for

    from streamlit_server import StreamlitServer, bench_tab

    server = StreamlitServer(name="live_strip_pin_cost", env={"ATTENTION_LAB_PREDICT": "off"})
    os.nice(19)
    pid = server.proc.pid
    out = {}
    try:
        with sync_playwright() as pw:
            app = bench_tab(pw, server)
            app.goto("train")
            smallest_batch(app)
            long_run(app)
            press(app, "Train", wait_idle=False)
            wait_for(lambda: (s := train_step(app)) and s[0] > 0, 120, "the first training steps")
            tiles = app.page.locator('[data-testid="stImage"] img')
            wait_for(lambda: tiles.count() >= 2, 120, "the live film strip")
            picker = app.page.locator('[data-testid="stMultiSelect"]').filter(has_text="Pin queries")

            def measure(what: str) -> None:
                app.page.evaluate(COUNT_REDRAWS)
                c0, s0, t0 = cpu_seconds(pid), train_step(app)[0], time.monotonic()
                time.sleep(args.seconds)
                cpu, wall = cpu_seconds(pid) - c0, time.monotonic() - t0
                out[what] = (cpu, wall, app.page.evaluate("() => window.__redraws"), train_step(app)[0] - s0)

            time.sleep(3)  # the first rows' tiles
            picker.scroll_into_view_if_needed()

            def pin(on: bool) -> None:
                for q in ("20", "41"):
                    picker.locator("input").click()
                    if on:
                        app.page.keyboard.type(q)
                        app.page.get_by_role("option", name=re.compile(rf"^{q}\b")).first.click()
                    else:
                        app.page.keyboard.press("Backspace")
                    app.page.wait_for_timeout(800)
                app.page.keyboard.press("Escape")

            # alternately, twice: a redraw costs more as the run's curves grow, whatever the pin
            for round_ in (1, 2):
                measure(f"no pin ({round_})")
                pin(True)
                chosen = picker.inner_text()
                measure(f"two queries pinned ({round_})")
                if round_ == 1:
                    pin(False)
                    assert "copy" not in picker.inner_text(), picker.inner_text()  # nothing pinned
            if args.shots:
                args.shots.mkdir(parents=True, exist_ok=True)
                for width in (1400, 800):
                    app.page.set_viewport_size({"width": width, "height": 900})
                    app.page.wait_for_timeout(2_000)
                    app.page.locator('[data-testid="stImage"]').last.scroll_into_view_if_needed()
                    app.page.screenshot(path=str(args.shots / f"train-live-strip-pinned-{width}.png"))
            press(app, "Stop", wait_idle=False)
            app.page.wait_for_timeout(3_000)
            app.assert_no_exception()
            app.page.context.browser.close()
    finally:
        server.stop()

    from bench.machine import matmul_rate
    from core.model import cpu

    print(f"CPU {cpu.kind()}; matmul {matmul_rate():.0f} GFLOP/s (one thread, 1024²)")
    print(f"picker shows: {' '.join(chosen.split())}")
    for what, (c, wall, redraws, steps) in out.items():
        print(f"{what}: server {c:.3f} CPU-s over {wall:.1f} s ({c / wall:.4f} cores), {redraws} redraws: "
              f"{c / max(redraws, 1):.4f} CPU-s a redraw; {steps} training steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
