"""A simulated class on this machine (issue #30): students in headless Chromium tabs against one server.

    python bench/class.py readers [--students 20]      # students who only read: every page, in turn
    python bench/class.py watch [--window 20]          # one student trains and watches the Train page
    python bench/class.py trainers [--students 10]     # press Train (defaults) within 10 s, then read
    python bench/class.py seeds [--students 10]        # the same with 10 different seeds
    ... [--json] [--cache-dir DIR] [--client light]

Starts `streamlit run dashboard.py` (bench/memory.py's start_server; the view cache is
$ATTENTION_LAB_CACHE or --cache-dir, else the repository's .cache/attention-lab: warm it first with
`python -m ui.cache --warm` for the hosted case). One Chromium (Debian's, at nice 19) holds a browser
context per student, driven concurrently with Playwright's async API. Per student: the page
latencies (from navigation to the script's end; median, p95), errors (a page's exception box or a
timeout) and, for trainers, the wait in line (Train to "steps/s" on screen) and the time from Train
to the drop on screen ("The red line marks step"). For the server: CPU-seconds by process (utime +
stime from /proc, sampled every second, so the machine's other load does not count; a worker that
exited between samples loses its last second) and the peak PSS of its process tree. The one-thread
1024² matmul rate is printed beside them.

`--client light` drives the same scenarios (but watch) with bench/memory.py's LightSession, which
speaks Streamlit's websocket protocol and renders nothing, so 20 students cost the machine almost
nothing beside the server. A light trainer sees its run by reloading the Train page every second
(where a tab reruns the live fragments): the server pays a whole Train script per poll.
The class scenarios need a quiet machine, e.g.

    nice -n 10 python bench/class.py readers --client light --students 20 --json
    nice -n 10 python bench/class.py trainers --client light --students 10 --json
    nice -n 10 python bench/class.py seeds --client light --students 10 --json
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import contextlib

from first_walk import cpu_seconds, descendants, nice_children  # noqa: E402
from machine import matmul_rate  # noqa: E402
from memory import CHROMIUM, CHROMIUM_ARGS, IDLE, PAGES, LightSession, start_server  # noqa: E402

READ_PAGES = [p for p in PAGES if p != "train"]
EXCEPTION = '[data-testid="stException"]'


class ServerSampler(threading.Thread):
    """Every `every` s: the CPU-seconds of each process in the server's tree and the tree's PSS."""

    def __init__(self, pid: int, every: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.every, self._done = pid, every, threading.Event()
        self.cpu: dict[int, tuple[str, float, float]] = {}  # pid -> (name, first seen, last seen)
        self.peak_pss_mb = 0.0

    def sample(self) -> None:
        total = 0
        for p in [self.pid, *descendants(self.pid)]:
            try:
                c = cpu_seconds(p)
                text = Path(f"/proc/{p}/smaps_rollup").read_text()
                name = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:70].strip()
            except OSError:
                continue
            total += int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1))
            first = self.cpu.get(p, (name, c, c))[1]
            self.cpu[p] = (name, first, c)
        self.peak_pss_mb = max(self.peak_pss_mb, total / 1024)

    def run(self):
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.every)

    def stop(self) -> dict:
        self._done.set()
        self.join()
        self.sample()
        rows = [{"pid": p, "process": "server" if p == self.pid else name, "cpu_s": round(last - first, 2)}
                for p, (name, first, last) in self.cpu.items()]
        return {"cpu_by_process": rows, "cpu_total_s": round(sum(r["cpu_s"] for r in rows), 2),
                "peak_pss_mb": round(self.peak_pss_mb, 1)}


async def open_page(page, url: str, path: str, timeout_s: float = 300) -> tuple[float, str | None]:
    t0 = time.perf_counter()
    try:
        await page.goto(f"{url}/{path}")
        await page.wait_for_selector(IDLE, timeout=timeout_s * 1000)
    except Exception as e:  # noqa: BLE001 - a timeout or a lost connection is the student's error
        return time.perf_counter() - t0, f"{path}: {type(e).__name__}"
    seconds = time.perf_counter() - t0
    print(f"{time.strftime('%H:%M:%S')} {path or 'home'} {seconds:.1f} s", file=sys.stderr, flush=True)
    return seconds, (f"{path}: exception on the page" if await page.locator(EXCEPTION).count() else None)


def _summary(latencies: list[float], errors: list[str]) -> dict:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else None
    return {"pages": len(latencies), "median_s": round(statistics.median(ordered), 2) if ordered else None,
            "p95_s": round(p95, 2) if p95 is not None else None, "errors": errors}


async def reader(browser, url: str, rounds: int, start: int) -> dict:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    nice_children()
    latencies, errors = [], []
    for i in range(rounds * len(READ_PAGES)):
        seconds, error = await open_page(page, url, READ_PAGES[(start + i) % len(READ_PAGES)])
        latencies.append(seconds)
        if error:
            errors.append(error)
    await ctx.close()
    return _summary(latencies, errors)


async def trainer(browser, url: str, delay: float, seed: int | None, read_after: bool) -> dict:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    nice_children()
    out = {"seed": seed}
    _, error = await open_page(page, url, "train")
    errors = [error] if error else []
    if seed is not None:
        box = page.get_by_label("Seed", exact=True)
        await box.fill(str(seed))
        await box.press("Enter")
        await page.wait_for_selector(IDLE, timeout=120_000)
    await asyncio.sleep(delay)
    t0 = time.perf_counter()
    await page.get_by_role("button", name="Train", exact=True).click()
    try:
        await page.get_by_text(re.compile(r"steps/s")).first.wait_for(timeout=1_800_000)
        out["wait_in_line_s"] = round(time.perf_counter() - t0, 2)
        await page.get_by_text("The red line marks step").first.wait_for(timeout=1_800_000)
        out["train_to_drop_s"] = round(time.perf_counter() - t0, 2)
    except Exception as e:  # noqa: BLE001
        errors.append(f"training: {type(e).__name__}")
    latencies = []
    if read_after:
        for path in READ_PAGES:
            seconds, error = await open_page(page, url, path)
            latencies.append(seconds)
            if error:
                errors.append(error)
    await ctx.close()
    return {**out, **_summary(latencies, errors)}


async def light_open(session: LightSession, path: str) -> tuple[float, str | None]:
    errors = len(session.errors)
    try:
        seconds = await session.open(path)
    except Exception as e:  # noqa: BLE001 - a lost connection is the student's error
        return 0.0, f"{path}: {type(e).__name__}"
    print(f"{time.strftime('%H:%M:%S')} {path or 'home'} {seconds:.1f} s (light)", file=sys.stderr, flush=True)
    return seconds, (session.errors[-1] if len(session.errors) > errors else None)


async def light_reader(url: str, rounds: int, start: int) -> dict:
    latencies, errors = [], []
    async with LightSession(url) as session:
        for i in range(rounds * len(READ_PAGES)):
            seconds, error = await light_open(session, READ_PAGES[(start + i) % len(READ_PAGES)])
            latencies.append(seconds)
            if error:
                errors.append(error)
    return _summary(latencies, errors)


async def light_trainer(url: str, delay: float, seed: int | None, read_after: bool, poll: float = 1.0) -> dict:
    out, latencies = {"seed": seed}, []
    async with LightSession(url) as session:
        _, error = await light_open(session, "train")
        errors = [error] if error else []
        await asyncio.sleep(delay)
        t0 = time.perf_counter()
        try:
            await session.press("tr_train", {"tr_seed": seed} if seed is not None else None)
            deadline = t0 + 1800
            for name, pattern in (("wait_in_line_s", r"steps/s"), ("train_to_drop_s", "The red line marks step")):
                while not re.search(pattern, session.text):
                    if time.perf_counter() > deadline:
                        raise TimeoutError(name)
                    await asyncio.sleep(poll)
                    await session.open("train")
                out[name] = round(time.perf_counter() - t0, 2)
        except Exception as e:  # noqa: BLE001
            errors.append(f"training: {type(e).__name__} {e}")
        if read_after:
            for path in READ_PAGES:
                seconds, error = await light_open(session, path)
                latencies.append(seconds)
                if error:
                    errors.append(error)
    return {**out, **_summary(latencies, errors)}


async def light_scenario(args) -> list:
    url, rng = args.url, random.Random(0)
    if args.scenario == "readers":
        return await asyncio.gather(*(light_reader(url, args.rounds, i) for i in range(args.students)))
    seeds = list(range(args.students)) if args.scenario == "seeds" else [None] * args.students
    return await asyncio.gather(*(light_trainer(url, rng.uniform(0, 10), s, args.scenario == "trainers")
                                  for s in seeds))


async def watch(browser, url: str, pid: int, window: float) -> dict:
    """Server cores while one student's Train page redraws a running training (after it started)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    nice_children()
    await open_page(page, url, "train")
    await page.get_by_role("button", name="Train", exact=True).click()
    await page.get_by_text(re.compile(r"steps/s")).first.wait_for(timeout=300_000)
    await asyncio.sleep(3)
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    workers0 = {p: cpu_seconds(p) for p in descendants(pid)}
    await asyncio.sleep(window)
    server = (cpu_seconds(pid) - c0) / (time.perf_counter() - t0)
    workers = {}
    for p, c in workers0.items():
        with contextlib.suppress(OSError):
            workers[p] = round((cpu_seconds(p) - c) / window, 3)
    progress = await page.get_by_text(re.compile(r"steps/s")).first.inner_text()
    await page.get_by_role("button", name="Stop", exact=True).click()
    await page.wait_for_timeout(2000)
    await ctx.close()
    return {"server_cores_while_watching": round(server, 3), "window_s": window,
            "other_processes_cores": workers, "progress_text": progress[:120]}


async def scenario(args, url: str, pid: int) -> dict:
    if args.client == "light":
        args.url = url
        return {"students": await light_scenario(args), "client": "light"}
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        nice_children()
        rng = random.Random(0)
        if args.scenario == "readers":
            students = await asyncio.gather(*(reader(browser, url, args.rounds, i) for i in range(args.students)))
        elif args.scenario == "watch":
            students = [await watch(browser, url, pid, args.window)]
        else:
            seeds = list(range(args.students)) if args.scenario == "seeds" else [None] * args.students
            students = await asyncio.gather(*(trainer(browser, url, rng.uniform(0, 10), s, args.scenario == "trainers")
                                              for s in seeds))
        await browser.close()
    return {"students": students}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", choices=("readers", "watch", "trainers", "seeds"))
    ap.add_argument("--students", type=int, default=None, help="default: 20 readers, 10 trainers")
    ap.add_argument("--rounds", type=int, default=1, help="a reader's walks through the pages")
    ap.add_argument("--window", type=float, default=20.0, help="watch: seconds measured")
    ap.add_argument("--cache-dir", type=Path, help="ATTENTION_LAB_CACHE for the server")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--client", choices=("chromium", "light"), default="chromium",
                    help="light: Streamlit's websocket protocol without a browser (not for watch)")
    args = ap.parse_args(argv)
    if args.client == "light" and args.scenario == "watch":
        ap.error("watch measures a browser's redraws: use --client chromium")
    if args.students is None:
        args.students = 20 if args.scenario == "readers" else 10
    env = {"ATTENTION_LAB_CACHE": str(args.cache_dir)} if args.cache_dir else {}

    def interrupted(*_):  # `timeout` sends SIGTERM: end the server and Chromium on the way out
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    out = {"scenario": args.scenario, "gflops_before": round(matmul_rate(), 2)}
    proc, url = start_server(env)
    try:
        sampler = ServerSampler(proc.pid)
        sampler.start()
        t0 = time.perf_counter()
        out.update(asyncio.run(scenario(args, url, proc.pid)))
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        out["server"] = sampler.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out["gflops_after"] = round(matmul_rate(), 2)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.scenario}: {len(out['students'])} students, {out['wall_s']} s; matmul 1 thread "
          f"{out['gflops_before']} GFLOP/s before, {out['gflops_after']} after")
    for i, s in enumerate(out["students"]):
        print(f"  student {i}: " + ", ".join(f"{k} {v}" for k, v in s.items()))
    srv = out["server"]
    print(f"server tree: {srv['cpu_total_s']} CPU-s, peak PSS {srv['peak_pss_mb']} MB")
    for r in srv["cpu_by_process"]:
        print(f"  {r['cpu_s']:>8.2f} CPU-s  {r['process']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
