"""A simulated class on this machine: students in headless Chromium tabs against one server.

    python bench/class.py readers [--students 20]      # students who only read: every page, in turn
    python bench/class.py watch [--window 20]          # one student trains and watches the Train page
    python bench/class.py run                          # one student trains the defaults and watches to the end:
                                                       # the server's CPU-s for the click, cores to the drop and end
                                                       # (AVX-512 host, 85-98 GFLOP/s: click 1.33 CPU-s
                                                       # with torch imported at the press, 0.32 without;
                                                       # cores to the drop 0.091 -> 0.052, whole run
                                                       # 3.98 -> 3.44 CPU-s; --emulate avx2: 0.32, 0.057)
    python bench/class.py trainers [--students 10]     # a lone student first; then press Train (defaults)
                                                       # within 10 s, then read
    python bench/class.py seeds [--students 10]        # the same with 10 different seeds (no lone student)
    ... [--think SECONDS] [--arrive SECONDS] [--awake] [--land spread|home|PAGE] [--json] [--cache-dir DIR]
        [--client light [--light-watch reload]]

Starts `streamlit run dashboard.py` (bench/memory.py's start_server), which reads every page's default views
from the shipped data (checkpoints/data/), as the hosted app does. --cache-dir sets $ATTENTION_LAB_CACHE for
the server and its trainings: where the compiled attention is built and its kernel choice recorded
(core/model/attention_cpp.py; unset, ~/.cache/attention-lab), so with an empty folder the first training's
processes build and measure it, as on a new machine. One Chromium (Debian's, at nice 19) holds a browser
context per student, driven concurrently with Playwright's async API. Per student: the page
latencies (from navigation to the script's end; median, p95), errors (a page's exception box or a
timeout) and, for trainers, the wait in line (Train to "steps/s" on screen) and the time from Train
to the drop on screen ("The red line marks step"). For the server: CPU-seconds by process (utime +
stime from /proc, sampled every second, so the machine's other load does not count), the trainings'
CPU in full (what the forkserver reaped of its children, plus those still running) and the peak PSS
of its process tree. The one-thread 1024² matmul rate is printed beside them.

--think: a student reads each page before the next click, a pause uniform in [0.5, 1.5] x SECONDS
(seeded per student); 0, the default, clicks on at once (a stress test). --arrive: readers open the
app at seeded times within SECONDS (0: all at once). --awake: one walk through every page before the
readers come, not counted, so the class meets a server process that is already awake, not one woken
by all of them at once. --land: where a reader's walk begins; "spread" (the default) starts each on a
different page, so a cold class's first pages are every page's first visit at once (students following
links to nine pages); "home" starts every one on Home, the app's address, and then walks the others;
a page's url path (e.g. "causal") starts every one there, as a class given a link to that page.

trainers: first one student trains the defaults and reads on alone, on a server of its own started
just before the class's (and stopped before it): the pool shares a finished run only within one
server process, so the class's identical run is trained again rather than handed back at once, and
both servers start cold, forkserver and first worker included. The class's Train-to-drop times are
printed over the lone student's (median, max).

`--client light` drives the same scenarios with bench/light.py's LightSession, which speaks
Streamlit's websocket protocol and renders nothing, so 20 students cost the machine almost nothing
beside the server. A light trainer follows its run as a tab does, through the Train page's fragment
reruns (the server's auto_rerun messages); `--light-watch reload` opens the whole page again every
second instead (the old light client, a whole script a poll). The class scenarios need a quiet machine, e.g.

    nice -n 10 python bench/class.py readers --client light --students 20 --think 5 --json
    nice -n 10 python bench/class.py trainers --client light --students 10 --json
    nice -n 10 python bench/class.py seeds --client light --students 10 --json
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
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
        self.parent: dict[int, int] = {}
        self.reaped: dict[int, tuple[float, float]] = {}  # forkserver -> its reaped children's CPU-s, first and last
        self.alive: set[int] = set()
        self.peak_pss_mb = 0.0

    def sample(self) -> None:
        total, alive = 0, set()
        for p in [self.pid, *descendants(self.pid)]:
            try:
                stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                text = Path(f"/proc/{p}/smaps_rollup").read_text()
                name = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            alive.add(p)
            tick = os.sysconf("SC_CLK_TCK")
            c, reaped = (int(stat[11]) + int(stat[12])) / tick, (int(stat[13]) + int(stat[14])) / tick
            total += int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1))
            self.parent.setdefault(p, int(stat[1]))
            self.cpu[p] = (name, self.cpu.get(p, (name, c, c))[1], c)
            if "forkserver" in name and self.parent[p] == self.pid:
                self.reaped[p] = (self.reaped.get(p, (reaped, reaped))[0], reaped)
        self.alive = alive
        self.peak_pss_mb = max(self.peak_pss_mb, total / 1024)

    def kind(self, pid: int, name: str) -> str:
        """ "server", "training" (a forkserver's child: its command line is the forkserver's) or the command line."""
        if pid == self.pid:
            return "server"
        parent = self.cpu.get(self.parent.get(pid, -1))
        return "training" if parent and "forkserver" in parent[0] else name

    def run(self):
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.every)

    def stop(self) -> dict:
        self._done.set()
        self.join()
        self.sample()
        rows = [{"pid": p, "process": self.kind(p, name)[:70], "cpu_s": round(last - first, 2)}
                for p, (name, first, last) in self.cpu.items()]
        # the trainings' CPU in full: those reaped by their forkserver (its children's utime + stime,
        # which the 1 s samples miss the last second of) and those still running (since they started)
        trained = sum(last - first for first, last in self.reaped.values()) + sum(
            self.cpu[p][2] for p in self.alive if self.kind(p, self.cpu[p][0]) == "training")
        return {"cpu_by_process": rows, "cpu_total_s": round(sum(r["cpu_s"] for r in rows), 2),
                "training_cpu_s": round(trained, 2), "peak_pss_mb": round(self.peak_pss_mb, 1)}


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
            "p95_s": round(p95, 2) if p95 is not None else None, "errors": errors,
            "latencies_s": [round(x, 2) for x in latencies]}


def walk(start: int, rounds: int, land: str) -> list[str]:
    """The pages a reader opens: every reading page in turn from the `start`-th ("spread": the class's
    first pages are all different pages, e.g. links to them); with land "home" or another page's url
    path, that page first (the link the class was given; Home is the app's address), then the others in
    turn from the `start`-th."""
    if land == "spread":
        return [READ_PAGES[(start + i) % len(READ_PAGES)] for i in range(rounds * len(READ_PAGES))]
    first = "" if land == "home" else land
    others = [p for p in READ_PAGES if p != first]
    return [p for _ in range(rounds)
            for p in [first, *(others[(start + i) % len(others)] for i in range(len(others)))]]


async def reader(browser, url: str, rounds: int, start: int, think: float = 0.0, land: str = "spread") -> dict:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    nice_children()
    latencies, errors, pause = [], [], thinker(think, start)
    for i, path in enumerate(walk(start, rounds, land)):
        if i:
            await pause()
        seconds, error = await open_page(page, url, path)
        latencies.append(seconds)
        if error:
            errors.append(error)
    await ctx.close()
    return _summary(latencies, errors)


async def trainer(browser, url: str, delay: float, seed: int | None, read_after: bool, student: int = 0,
                  think: float = 0.0) -> dict:
    pause = thinker(think, student)
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
    t0 = out["pressed_at"] = time.perf_counter()
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
            await pause()
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


def thinker(think: float, student: int):
    """The pause before a student's next page: uniform in [0.5, 1.5] x think seconds, seeded by the student."""
    rng = random.Random(1000 + student)
    return lambda: asyncio.sleep(rng.uniform(0.5, 1.5) * think) if think > 0 else asyncio.sleep(0)


async def light_reader(url: str, rounds: int, start: int, think: float, arrive: float = 0.0,
                       land: str = "spread") -> dict:
    latencies, errors, pause = [], [], thinker(think, start)
    await asyncio.sleep(random.Random(2000 + start).uniform(0, arrive))
    async with LightSession(url) as session:
        for i, path in enumerate(walk(start, rounds, land)):
            if i:
                await pause()
            seconds, error = await light_open(session, path)
            latencies.append(seconds)
            if error:
                errors.append(error)
    return _summary(latencies, errors)


async def light_watch_until(session: LightSession, pattern: str, deadline: float, mode: str) -> None:
    """Until `pattern` is on the Train page: its fragments rerun as on a tab ("fragments"), or the
    whole page is opened again every second ("reload", the old light client: a whole script a poll)."""
    if mode == "fragments":
        await session.wait_for(pattern, deadline - time.perf_counter())
        return
    while not re.search(pattern, session.text):
        if time.perf_counter() > deadline:
            raise TimeoutError(pattern)
        await asyncio.sleep(1.0)
        await session.open("train")


async def light_trainer(url: str, delay: float, seed: int | None, read_after: bool, student: int = 0,
                        think: float = 0.0, mode: str = "fragments") -> dict:
    out, latencies, pause = {"seed": seed}, [], thinker(think, student)
    async with LightSession(url, follow_fragments=mode == "fragments") as session:
        _, error = await light_open(session, "train")
        errors = [error] if error else []
        await asyncio.sleep(delay)
        t0 = out["pressed_at"] = time.perf_counter()
        try:
            await session.press("tr_train", {"tr_seed": seed} if seed is not None else None)
            for name, pattern in (("wait_in_line_s", r"steps/s"), ("train_to_drop_s", "The red line marks step")):
                await light_watch_until(session, pattern, t0 + 1800, mode)
                out[name] = round(time.perf_counter() - t0, 2)
        except Exception as e:  # noqa: BLE001
            errors.append(f"training: {type(e).__name__} {e}")
        out["fragment_reruns"] = session.fragment_runs
        if read_after:
            for path in READ_PAGES:
                await pause()
                seconds, error = await light_open(session, path)
                latencies.append(seconds)
                if error:
                    errors.append(error)
    return {**out, **_summary(latencies, errors)}


async def light_watch(url: str, pid: int, window: float, mode: str) -> dict:
    """`watch` with a light client: the server's cores while the student's Train page follows its run."""
    async with LightSession(url, follow_fragments=mode == "fragments") as session:
        await session.open("train")
        await session.press("tr_train")
        await light_watch_until(session, r"steps/s", time.perf_counter() + 300, mode)
        await asyncio.sleep(3)
        runs0, c0, t0 = session.fragment_runs, cpu_seconds(pid), time.perf_counter()
        workers0 = {p: cpu_seconds(p) for p in descendants(pid)}
        if mode == "fragments":
            await asyncio.sleep(window)
        else:
            while time.perf_counter() - t0 < window:
                await asyncio.sleep(1.0)
                await session.open("train")
        seconds = time.perf_counter() - t0
        server = (cpu_seconds(pid) - c0) / seconds
        workers = {}
        for p, c in workers0.items():
            with contextlib.suppress(OSError):
                workers[p] = round((cpu_seconds(p) - c) / seconds, 3)
        progress = re.search(r"[^\n\"]*steps/s[^\n\"]*", session.text)
        reruns = session.fragment_runs - runs0
        ended = "tr_stop" not in session.widgets or "steps/s" not in session.text  # the window outlasted the run
        if not ended:
            await session.press("tr_stop")
    return {"server_cores_while_watching": round(server, 3), "window_s": round(seconds, 1), "mode": mode,
            "run_ended_in_window": ended,
            "fragment_reruns": reruns, "other_processes_cores": workers,
            "progress_text": progress.group(0)[:120] if progress else None, "errors": session.errors}


async def light_scenario(args, url: str, pid: int) -> list:
    rng = random.Random(0)
    if args.scenario == "watch":
        return [await light_watch(url, pid, args.window, args.light_watch)]
    if args.scenario == "readers":
        if args.awake:  # the server has served every page once before the class comes (a teacher's walk)
            await light_reader(url, 1, 0, 0.0)
        return await asyncio.gather(*(light_reader(url, args.rounds, i, args.think, args.arrive, args.land)
                                      for i in range(args.students)))
    seeds = list(range(args.students)) if args.scenario == "seeds" else [None] * args.students
    return await asyncio.gather(*(light_trainer(url, rng.uniform(0, 10), s, args.scenario == "trainers", i,
                                                args.think, args.light_watch)
                                  for i, s in enumerate(seeds)))


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


async def watch_run(browser, url: str, pid: int) -> dict:
    """One student presses Train on the defaults and watches the whole run in a tab: the server's CPU-seconds
    for the click (from the press until "steps/s" is on screen: the script run that starts the training and
    the page that follows it), and the server's cores from the press to the drop on screen and to the run's
    end on screen. Only the server process counts (the training runs in a worker of its own)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    nice_children()
    await open_page(page, url, "train")
    await asyncio.sleep(3)  # the page's own first run settles
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await page.get_by_role("button", name="Train", exact=True).click()
    await page.get_by_text(re.compile(r"steps/s")).first.wait_for(timeout=300_000)
    c_start, t_start = cpu_seconds(pid), time.perf_counter()
    await page.get_by_text("The red line marks step").first.wait_for(timeout=600_000)
    c_drop, t_drop = cpu_seconds(pid), time.perf_counter()
    await page.get_by_text(re.compile(r"at step \d+: later-copy loss")).first.wait_for(timeout=600_000)
    c_end, t_end = cpu_seconds(pid), time.perf_counter()
    await ctx.close()
    return {"click_cpu_s": round(c_start - c0, 3), "click_to_progress_s": round(t_start - t0, 2),
            "server_cores_to_drop": round((c_drop - c0) / (t_drop - t0), 3), "train_to_drop_s": round(t_drop - t0, 1),
            "server_cores_whole_run": round((c_end - c0) / (t_end - t0), 3), "train_to_end_s": round(t_end - t0, 1),
            "server_cpu_s_whole_run": round(c_end - c0, 2)}


async def scenario(args, url: str, pid: int, lone: bool = False) -> dict:
    """The students of `args.scenario` on the server at `url` (pid); `lone`: one trainer alone instead."""
    if args.client == "light":
        if lone:
            return {"students": [await light_trainer(url, 0.0, None, True, 0, args.think, args.light_watch)]}
        return {"students": await light_scenario(args, url, pid)}
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        nice_children()
        rng = random.Random(0)
        if lone:
            students = [await trainer(browser, url, 0.0, None, True, 0, args.think)]
        elif args.scenario == "readers":
            students = await asyncio.gather(*(reader(browser, url, args.rounds, i, args.think, args.land)
                                              for i in range(args.students)))
        elif args.scenario == "watch":
            students = [await watch(browser, url, pid, args.window)]
        elif args.scenario == "run":
            students = [await watch_run(browser, url, pid)]
        else:
            seeds = list(range(args.students)) if args.scenario == "seeds" else [None] * args.students
            students = await asyncio.gather(*(trainer(browser, url, rng.uniform(0, 10), s, args.scenario == "trainers",
                                                      i, args.think) for i, s in enumerate(seeds)))
        await browser.close()
    return {"students": students}


def on_a_server(args, env: dict, lone: bool = False) -> dict:
    """Start a server, run the students on it, stop it: the students, the wall time and the server's
    CPU-seconds by process and peak PSS."""
    proc, url = start_server(env)
    try:
        sampler = ServerSampler(proc.pid)
        sampler.start()
        t0 = time.perf_counter()
        out = asyncio.run(scenario(args, url, proc.pid, lone))
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        out["server"] = sampler.stop()
        pressed = [s.pop("pressed_at") for s in out["students"] if "pressed_at" in s]
        if pressed:  # the trainings' CPU all falls after the first press
            out["first_press_s"] = round(min(pressed) - t0, 1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def against_lone(students: list[dict], lone: dict) -> dict | None:
    """Each student's Train-to-drop time over the lone student's: median and max."""
    alone = lone.get("train_to_drop_s")
    ratios = [s["train_to_drop_s"] / alone for s in students if alone and "train_to_drop_s" in s]
    if not ratios:
        return None
    return {"lone_train_to_drop_s": alone, "ratios": [round(r, 3) for r in ratios],
            "median": round(statistics.median(ratios), 3), "max": round(max(ratios), 3),
            "students_measured": len(ratios), "students": len(students)}


def _print_server(srv: dict, indent: str = "") -> None:
    print(f"{indent}server tree: {srv['cpu_total_s']} CPU-s, peak PSS {srv['peak_pss_mb']} MB")
    for r in srv["cpu_by_process"]:
        print(f"{indent}  {r['cpu_s']:>8.2f} CPU-s  {r['process']}")


def cpu_kind(env: dict) -> str:
    """The CPU kind the server's processes see (core.model.cpu.kind, under the environment's emulation)."""
    import subprocess

    return subprocess.run([sys.executable, "-c", "from core.model import cpu; print(cpu.kind())"], cwd=HERE.parent,
                          env={**os.environ, **env}, capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", choices=("readers", "watch", "run", "trainers", "seeds"))
    ap.add_argument("--students", type=int, default=None, help="default: 20 readers, 10 trainers")
    ap.add_argument("--rounds", type=int, default=1, help="a reader's walks through the pages")
    ap.add_argument("--think", type=float, default=0.0,
                    help="seconds a student reads a page before the next (each pause uniform in [0.5, 1.5] x this, "
                         "seeded); 0: no pause, a stress test")
    ap.add_argument("--arrive", type=float, default=0.0,
                    help="readers (light): each student opens the app at a seeded time uniform in [0, this] s")
    ap.add_argument("--awake", action="store_true",
                    help="readers (light): one walk through every page before the class comes, not counted: the "
                         "server is awake, not a cold process woken by the whole class at once")
    ap.add_argument("--land", choices=("spread", "home", *(p for p in READ_PAGES if p)), default="spread",
                    help="readers: where each student's walk begins: 'spread' (the default), each on a different "
                         "page in turn (the whole class's first pages are all the pages at once, the worst case); "
                         "'home' or a page's url path: every student there first (the link the class was given; "
                         "Home is the app's address), then the others in turn")
    ap.add_argument("--window", type=float, default=20.0, help="watch: seconds measured")
    ap.add_argument("--cache-dir", type=Path,
                    help="ATTENTION_LAB_CACHE for the server: where the compiled attention is built (an empty "
                         "folder: the first training builds it)")
    ap.add_argument("--emulate", choices=("native", "avx2", "sse4"), default="native",
                    help="the server and its trainings run as this CPU kind (core.model.cpu.emulate)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--client", choices=("chromium", "light"), default="chromium",
                    help="light: Streamlit's websocket protocol without a browser (bench/light.py)")
    ap.add_argument("--light-watch", choices=("fragments", "reload"), default="fragments",
                    help="how a light trainer follows its run: the page's fragment reruns, as a tab (the default), "
                         "or the whole Train page opened again every second (the old light client)")
    ap.add_argument("--no-lone", action="store_true", help="trainers: leave out the lone student's server")
    args = ap.parse_args(argv)
    if args.students is None:
        args.students = 20 if args.scenario == "readers" else 10
    if args.think < 0 or args.arrive < 0:
        ap.error("--think and --arrive must be 0 or more")
    if args.scenario == "run" and args.client == "light":
        ap.error("run: a Chromium tab only (it reads the page's own messages)")
    env = {"ATTENTION_LAB_CACHE": str(args.cache_dir)} if args.cache_dir else {}
    from core.model import cpu  # noqa: E402 -- the repository root is on the path through bench/memory.py

    env.update(cpu.emulate(args.emulate))

    def interrupted(*_):  # `timeout` sends SIGTERM: end the server and Chromium on the way out
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupted)
    out = {"scenario": args.scenario, "client": args.client, "think_s": args.think, "arrive_s": args.arrive,
           "awake": args.awake, "land": args.land,
           "light_watch": args.light_watch if args.client == "light" else None,
           "cpu_kind": cpu_kind(env), "gflops_before": round(matmul_rate(), 2)}
    if args.scenario == "trainers" and not args.no_lone:
        # the lone student on a server of its own, stopped before the class's starts: a finished run is
        # shared only within one server process, so the class's identical run is trained again, and
        # both servers start cold (forkserver and first worker included), as the class's does
        out["lone"] = on_a_server(args, env, lone=True)
    out.update(on_a_server(args, env))
    if "lone" in out:
        out["class_over_lone"] = against_lone(out["students"], out["lone"]["students"][0])
    out["gflops_after"] = round(matmul_rate(), 2)
    if args.json:
        print(json.dumps(out))
        return 0
    pause = f"think {args.think:g} s (x 0.5-1.5)" if args.think else "no think time"
    pause += f", arriving within {args.arrive:g} s" if args.arrive else ""
    pause += ", server awake (one walk before)" if args.awake else ""
    pause += f", every student landing on {args.land}" if args.scenario == "readers" and args.land != "spread" else ""
    watch_mode = (f", light trainers follow by {args.light_watch}"
                  if args.client == "light" and args.scenario != "readers" else "")
    print(f"CPU kind {out['cpu_kind']}")
    print(f"{args.scenario}: {len(out['students'])} students ({args.client}, {pause}{watch_mode}), {out['wall_s']} s; "
          f"matmul 1 thread {out['gflops_before']} GFLOP/s before, {out['gflops_after']} after")
    if "lone" in out:
        lone = out["lone"]
        print(f"  lone student, own server first ({lone['wall_s']} s): "
              + ", ".join(f"{k} {v}" for k, v in lone["students"][0].items() if k != "latencies_s"))
        _print_server(lone["server"], "  ")
    for i, s in enumerate(out["students"]):
        print(f"  student {i}: " + ", ".join(f"{k} {v}" for k, v in s.items() if k != "latencies_s"))
    every = _summary([x for s in out["students"] for x in s.get("latencies_s", [])], [])
    if every["pages"]:
        first = sorted(s["latencies_s"][0] for s in out["students"] if s.get("latencies_s"))
        print(f"  every page: {every['pages']} pages, median {every['median_s']} s, p95 {every['p95_s']} s, "
              f"max {max(every['latencies_s'])} s; the students' first pages: median "
              f"{round(statistics.median(first), 2)} s, max {first[-1]} s")
    if out.get("class_over_lone"):
        r = out["class_over_lone"]
        print(f"Train to the drop, class / lone ({r['lone_train_to_drop_s']} s): median {r['median']}, max {r['max']} "
              f"({r['students_measured']} of {r['students']} students saw the drop)")
    _print_server(out["server"])
    trainings = [r for r in out["server"]["cpu_by_process"] if r["process"] == "training"]
    if args.scenario in ("trainers", "seeds") and trainings:
        busy, after = out["server"]["training_cpu_s"], out["wall_s"] - out.get("first_press_s", 0.0)
        print(f"cores busy training: {100 * busy / (2 * out['wall_s']):.1f}% of 2 x {out['wall_s']} s, "
              f"{100 * busy / (2 * after):.1f}% of the {after:.1f} s from the first Train press "
              f"({len(trainings)} trainings, {busy:.1f} CPU-s; "
              f"sampled each second {sum(r['cpu_s'] for r in trainings):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
