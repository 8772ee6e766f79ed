"""The Train page in Chromium: how far the live loss chart trails the step counter, and how long Stop takes.

    python bench/train_page_time.py [--runs 1] [--batch 32] [--json]

Starts `streamlit run dashboard.py` (tests/e2e/streamlit_server.py), opens the Train page in Debian's Chromium
and presses Train with the default settings (the batch size set with the keyboard, as a student would). Every
0.25 s while it trains it reads the progress bar's step and the loss chart's last logged step: the rightmost
point of its lines in the drawn SVG, on the chart's fixed axis [0, total steps] (the plot's frame spans that
axis, so step = total * x / width; about 1 step per pixel at 800 steps). Lag = counter - chart, in steps.
It also notes the counter when the red drop line first appears, against the drop step the line marks.

Then it starts long runs (20,000 steps) and presses Stop after --stop-after steps: the wall time from the click
to the page's answer ("Stopping: ..." or "Stopped at step"), to "Stopped at step" and to the page's script at rest,
and the CPU-seconds (utime + stime from /proc) of the server and of the training process over that time.
--stop-first presses Stop before any run has ended, on a new server, so torch is not yet imported in it. Wall
times are of this busy 2-core machine (AVX-512); CPU is what counts.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "e2e"), str(ROOT / "tests")]

from ui.charts import OKABE_ITO  # noqa: E402

from streamlit_server import CHROMIUM, CHROMIUM_ARGS, LabPage, StreamlitServer  # noqa: E402

STEP = re.compile(r"step (\d+) / (\d+)")
CLK = os.sysconf("SC_CLK_TCK")

# The loss chart's last logged step from its SVG: this run's lines' rightmost x over the plot's width.
CHART_STEP = """([total, DROP_COLOUR]) => {
  const svg = document.querySelector('[data-testid="stVegaLiteChart"] svg.marks');
  if (!svg) return null;
  let right = -1;
  for (const p of svg.querySelectorAll('g.mark-line path[aria-label*="run: this run"]')) {
    const xs = [...(p.getAttribute('d') || '').matchAll(/[ML](-?[\\d.]+),/g)].map(m => parseFloat(m[1]));
    if (xs.length) right = Math.max(right, ...xs);
  }
  const frame = svg.querySelector('g.role-frame.root > g > path.background');
  const width = frame ? parseFloat((frame.getAttribute('d').match(/h(-?[\\d.]+)/) || [0, 0])[1]) : 0;
  const drop = [...svg.querySelectorAll('g.mark-rule.role-mark line, g.mark-rule.role-mark path')]
    .some(l => (l.getAttribute('stroke') || '').toUpperCase() === DROP_COLOUR);
  if (right < 0 || !width) return null;
  return {step: total * right / width, drop: drop};
}"""


def counter(app: LabPage) -> tuple[int, int] | None:
    bars = app.page.locator('[data-testid="stProgress"]')
    if bars.count() == 0:
        return None
    m = STEP.search(bars.first.inner_text())
    return (int(m.group(1)), int(m.group(2))) if m else None


def cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def open_advanced(app: LabPage) -> None:
    if app.page.get_by_role("spinbutton", name="Steps").count() == 0:
        app.page.get_by_text("Advanced: sequence length").click()
        app.page.get_by_role("spinbutton", name="Steps").wait_for()


def set_batch(app: LabPage, batch: int) -> None:
    open_advanced(app)
    thumb = app.page.get_by_role("slider", name="Batch size")
    thumb.focus()
    for _ in range(8):
        value = int(thumb.get_attribute("aria-valuetext"))
        if value == batch:
            return
        app.after(lambda v=value: thumb.press("ArrowLeft" if v > batch else "ArrowRight"))
    raise SystemExit(f"could not set the batch size to {batch}")


def set_steps(app: LabPage, steps: int) -> None:
    open_advanced(app)
    box = app.page.get_by_role("spinbutton", name="Steps")
    app.after(lambda: (box.fill(str(steps)), box.press("Enter")))


def watch_lag(app: LabPage, server: StreamlitServer, timeout: float = 300) -> dict:
    """Sample counter and chart until the run ends; the lags in steps, the counter when the drop line showed,
    and the server's CPU-seconds per second of training (the page's redraws)."""
    cpu0, t0 = cpu_of(server.proc.pid), time.monotonic()
    app.page.get_by_role("button", name="Train", exact=True).click()
    lags, drop_seen, drop_step, total, last = [], None, None, None, None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = counter(app)
        if c is None:
            if last is not None:
                break  # the run ended: the page shows the result
            time.sleep(0.25)
            continue
        step, total = c
        last = step
        chart = app.page.evaluate(CHART_STEP, [total, OKABE_ITO[5].upper()])
        if chart is not None and 0 < step < total:
            lags.append(step - chart["step"])
            if drop_seen is None and chart["drop"]:
                drop_seen = step
                note = app.page.get_by_text(re.compile(r"red line marks step \d+")).all_inner_texts()
                m = re.search(r"red line marks step (\d+)", " ".join(note))
                drop_step = int(m.group(1)) if m else None
        if step >= total:
            break
        time.sleep(0.25)
    return {"samples": len(lags), "lag_median": statistics.median(lags) if lags else None,
            "lag_max": max(lags) if lags else None, "drop_step": drop_step,
            "server_cpu_per_s": round((cpu_of(server.proc.pid) - cpu0) / (time.monotonic() - t0), 3),
            "counter_when_drop_drawn": drop_seen}


def measure_stop(app: LabPage, server: StreamlitServer, warm_steps: int) -> dict:
    """Train 20,000 steps, press Stop after `warm_steps`: wall time to "Stopped at step", CPU of server and worker."""
    set_steps(app, 20000)
    app.page.get_by_role("button", name="Train", exact=True).click()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and ((now := counter(app)) is None or now[1] != 20000 or now[0] < warm_steps):
        time.sleep(0.2)
    procs = [server.proc.pid, *descendants(server.proc.pid)]
    before = {p: cpu_of(p) for p in procs}
    after = dict(before)
    t0 = time.monotonic()
    app.page.get_by_role("button", name="Stop", exact=True).click()
    stopped = app.page.get_by_text(re.compile(r"Stopped at step \d+"))
    answer = app.page.get_by_text(re.compile(r"Stopped at step \d+|Stopping: the step in progress"))
    answered = None
    while stopped.count() == 0 and time.monotonic() - t0 < 60:
        if answered is None and answer.count():
            answered = time.monotonic() - t0
        after.update({p: t for p in procs if (t := cpu_of(p)) == t})  # a worker's last reading before it exits
        time.sleep(0.02)
    wall = time.monotonic() - t0
    app.wait_idle()
    idle = time.monotonic() - t0 - 0.3  # wait_idle looks again 0.3 s after the script ended
    after.update({p: t for p in procs if (t := cpu_of(p)) == t})
    cpu = {p: after[p] - before[p] for p in procs}
    text = stopped.first.inner_text() if stopped.count() else ""
    m = re.search(r"Stopped at step (\d+)", text)
    return {"stop_pressed_at": now[0] if now else None, "stopped_at": int(m.group(1)) if m else None,
            "click_to_answer_s": round(answered if answered is not None else wall, 2),
            "click_to_stopped_s": round(wall, 2), "click_to_idle_s": round(idle, 2),
            "server_cpu_s": round(cpu.pop(server.proc.pid), 2),
            "worker_cpu_s": round(max(cpu.values(), default=float("nan")), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--stop-after", default="100,500", help="steps trained before each Stop press")
    ap.add_argument("--stop-first", action="store_true",
                    help="press Stop before any run has ended, on a new server (torch not yet imported in it)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    results = []
    server = StreamlitServer(name="bench-train-page")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for _ in range(args.runs):
                ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                app = LabPage(ctx.new_page(), server.url).goto("train")
                set_batch(app, args.batch)
                if not args.stop_first:
                    lag = watch_lag(app, server)
                    app.wait_idle()
                    print(lag, flush=True)
                    results.append(lag)
                for steps in map(int, args.stop_after.split(",")):
                    app.wait_idle()
                    results.append(measure_stop(app, server, steps))
                    print(results[-1], flush=True)
                ctx.close()
            browser.close()
    finally:
        server.stop()
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
