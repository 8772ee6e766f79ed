"""The lab under load, in real Chromium: how fast a training shows its drop, and what other students
cost it.

    python bench/load.py [--json] [--seeds 0 1 2] [--window 20]

Starts `streamlit run dashboard.py` on a free port, then lowers its own CPU priority to the lowest
(os.nice(19)) before it starts Chromium, so the browsers stand in for students' own machines and the
server and its training processes keep the CPU. Each student is a fresh browser context (a session).
- (a) one student, per seed: seconds from the click on Train to the red drop line's note on screen
  ("The red line marks step"), the step it marks, the worker's steps/s then, and the server
  process's CPU over that time (in cores: CPU seconds per wall second; the workers not counted). A bare loop of
  Trainer.run on the same settings, in this process before the browsers start, gives the rate to
  compare with (same thread count as a lone worker: all cores).
- (b) one training (default settings, more steps) while two other students open every page in turn
  for --window seconds: the training's steps/s over the window (from its progress bar) against its
  solo rate from (a), and every page load's seconds (navigation until the script is idle).
- (c) two students train at once for --window seconds: each one's steps/s against the solo rate.
- (d) during (c), a third student has the Attention page open: proportional set size (PSS, from
  /proc/<pid>/smaps_rollup) of the server and all its descendant processes together, largest sample.
Run it alone on the machine (`heavy --both`): its figures are rates.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests/helpers.py, which tests/e2e/conftest.py reads
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

import contextlib

from ui.pages import ALL_PAGES  # noqa: E402  (the one page registry)

from conftest import CHROMIUM, CHROMIUM_ARGS, LabPage, StreamlitServer  # noqa: E402

URL_PATHS = [p.url_path for p in ALL_PAGES]  # "" is Home

STEP = re.compile(r"step (\d+) / (\d+)")
RATE = re.compile(r"([\d.]+) steps/s")


def bare_rate() -> float:
    """Steps per second of Trainer.run on the default settings in this process (all cores), over 60 steps."""
    import torch

    from core.training.run_config import RunConfig
    from core.training.threads import machine_cores
    from core.training.trainer import Trainer

    torch.set_num_threads(machine_cores())
    trainer = Trainer(*RunConfig.of().configs())
    trainer.run(5)
    t0 = time.perf_counter()
    trainer.run(60)
    return 60 / (time.perf_counter() - t0)


def progress(app: LabPage) -> tuple[int, float] | None:
    """(step, steps/s shown) from the Train page's progress bar."""
    bar = app.page.locator('[data-testid="stProgress"]')
    if not bar.count():
        return None
    text = bar.first.inner_text()
    m, r = STEP.search(text), RATE.search(text)
    return (int(m.group(1)), float(r.group(1)) if r else float("nan")) if m else None


def set_number(app: LabPage, label: str, value: int) -> None:
    box = app.page.get_by_label(label, exact=True)
    box.fill(str(value))
    app.after(lambda: box.press("Enter"))


def open_train(app: LabPage, seed: int = 0, steps: int | None = None) -> None:
    app.goto("train")
    if seed or steps:
        app.page.get_by_text("Advanced: sequence length").click()
        if seed:
            set_number(app, "Seed", seed)
        if steps:
            set_number(app, "Steps", steps)


def press(app: LabPage, label: str) -> None:
    app.page.get_by_role("button", name=label, exact=True).click()


def wait_step(app: LabPage, at_least: int) -> tuple[int, float]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        p = progress(app)
        if p and p[0] >= at_least:
            return p
        time.sleep(0.1)
    raise RuntimeError(f"no step {at_least} within 120 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scenario_a(new, seed: int, server_pid: int) -> dict:
    app = new()
    open_train(app, seed=seed)
    note = app.page.get_by_text("The red line marks step")
    cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
    press(app, "Train")
    note.first.wait_for(timeout=120_000)
    seconds = time.perf_counter() - t0
    server_share = (cpu_seconds(server_pid) - cpu0) / seconds
    drop = int(re.search(r"marks step (\d+)", note.first.inner_text()).group(1))
    step, rate = progress(app)
    press(app, "Stop")
    app.page.get_by_text(re.compile(r"Stopped at step|Finished at step")).first.wait_for(timeout=30_000)
    return {"seed": seed, "seconds_to_drop_on_screen": round(seconds, 2), "drop_step": drop, "step_then": step,
            "server_cpu_cores": round(server_share, 2),
            "worker_steps_per_s": rate, "end_to_end_steps_per_s": round(step / seconds, 2)}


def window_rate(apps: list[LabPage], window: float, during=None) -> list[float]:
    """Steps/s of each app's run over `window` seconds, calling during() in between."""
    start = [(wait_step(a, 1)[0], time.perf_counter()) for a in apps]
    end_at = time.perf_counter() + window
    while time.perf_counter() < end_at:
        during() if during else time.sleep(0.5)
    return [(progress(a)[0] - s) / (time.perf_counter() - t) for a, (s, t) in zip(apps, start)]


def scenario_b(new, window: float) -> dict:
    trainer = new()
    open_train(trainer, steps=20000)
    press(trainer, "Train")
    wait_step(trainer, 5)
    readers = [new(), new()]
    loads, turn = [], [0]

    def read_pages():
        for r in readers:
            path = URL_PATHS[turn[0] % len(URL_PATHS)]
            t0 = time.perf_counter()
            r.goto(path)
            loads.append(time.perf_counter() - t0)
        turn[0] += 1

    rate = window_rate([trainer], window, read_pages)[0]
    press(trainer, "Stop")
    return {"training_steps_per_s": round(rate, 2), "page_loads": len(loads),
            "page_load_median_s": round(statistics.median(loads), 2), "page_load_max_s": round(max(loads), 2)}


def pss_mb(pid: int) -> float:
    """PSS of `pid` and every live descendant, in MB."""
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, frontier = {pid}, {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - tree
        tree |= frontier
    total = 0
    for p in tree:
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        total += int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1))
    return total / 1024


def scenario_cd(new, window: float, server_pid: int) -> dict:
    a, b = new(), new()
    for app in (a, b):
        open_train(app, steps=20000)
    press(a, "Train")
    press(b, "Train")
    reader = new()
    reader.goto("attention")
    reader.wait_charts(1)
    samples = []
    rates = window_rate([a, b], window, lambda: (samples.append(pss_mb(server_pid)), time.sleep(0.5)))
    for app in (a, b):
        press(app, "Stop")
    return {"steps_per_s": [round(r, 2) for r in rates], "pss_mb_max": round(max(samples), 1),
            "pss_mb_median": round(statistics.median(samples), 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--window", type=float, default=20.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--only-a", action="store_true", help="scenario (a) alone (quicker, for trying a change)")
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    server = StreamlitServer(name="bench-load")
    try:
        bare = bare_rate()
        os.nice(19)  # from here on this process and the browsers it starts run at the lowest priority
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            contexts = []

            def new() -> LabPage:
                ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                ctx.set_default_timeout(120_000)
                contexts.append(ctx)
                return LabPage(ctx.new_page(), server.url)

            new().goto("")  # the server's first visit (forkserver start, shipped models) is not timed
            a = [scenario_a(new, s, server.proc.pid) for s in args.seeds]
            solo = statistics.median(r["worker_steps_per_s"] for r in a)
            b = scenario_b(new, args.window) if not args.only_a else {"training_steps_per_s": float("nan")}
            cd = scenario_cd(new, args.window, server.proc.pid) if not args.only_a else {"steps_per_s": []}
            browser.close()
    finally:
        server.stop()
    out = {"bare_loop_steps_per_s": round(bare, 2), "a": a,
           "a_median_seconds_to_drop": statistics.median(r["seconds_to_drop_on_screen"] for r in a),
           "a_page_rate_vs_bare": round(solo / bare, 3),
           "b": b, "b_rate_vs_solo": round(b["training_steps_per_s"] / solo, 3),
           "c": cd, "c_rate_vs_solo": [round(r / solo, 3) for r in cd["steps_per_s"]]}
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
