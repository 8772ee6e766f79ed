"""Resident memory of the Streamlit server (docs/DESIGN.md budget: under 600 MB with one session that has
visited every page).

    python bench/memory.py            # figures as text
    python bench/memory.py --json     # one JSON object
    python bench/memory.py --sessions 20 [--train] [--json]   # what a session adds, and what its end frees
    python bench/memory.py --worker [--json]    # a training process's PSS over a default run

--sessions N drives the server with light clients that speak Streamlit's own websocket
protocol (bench/light.py's LightSession: one BackMsg per page, read until script_finished; no browser), so 20 sessions
cost the machine almost nothing beside the server. One session first opens every page (the shared
caches fill), then N sessions open every page one after the other and stay connected; with --train
each also presses Train with the default settings on the Train page (one training: the others follow
it or get it finished, each reading its own copy of the model and its snapshots) and reloads the page
once it has ended, so the model is in its session (the first session trains it before the reading
before the N, so the N get the finished run and the one-time cost of a first training is not
counted as theirs). Then all N disconnect. The server runs with
server.disconnectedSessionTTL = --ttl seconds (Streamlit's default, 120 s, only delays the end), and
the PSS of the server process (smaps_rollup) is read before the N (once the first session has ended as
they will), with them connected, and after their sessions have ended: past the TTL and ui/sessions.py's
MARGIN, when the server releases what they left, and then --settle seconds (past ui/setup.py's next
full garbage collection).

Starts `streamlit run dashboard.py --server.headless true` on a free loopback port and reads the
server process's VmRSS (and VmHWM, its peak) from /proc/<pid>/status:
1. idle, after the health check;
2. after one browser session (Debian's Chromium through Playwright) has opened every page and each
   page's script has finished and its charts have drawn;
3. while three further sessions train at once on the Train page (default settings) for
   --train-seconds, and after all three pressed Stop.
Peaks ("at most") are VmHWM, reset between the phases, so they catch short spikes too.
With the default limit (ATTENTION_LAB_MAX_TRAININGS unset: 2) the third session waits for a slot,
as it would on the hosted app; --max-trainings 3 lets all three run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
sys.path.insert(0, str(ROOT))
from ui.pages import ALL_PAGES  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from light import LightSession  # noqa: E402,F401 -- bench/class.py imports it from here too

PAGES = [p.url_path for p in ALL_PAGES]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
BUDGET_MB = 600


def reset_peak(pid: int) -> bool:
    """Start VmHWM afresh (Linux: writing 5 to clear_refs); False where that is not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def status_mb(pid: int, field: str) -> float:
    """A memory field of /proc/<pid>/status (VmRSS, VmHWM) in MB (2^20 bytes)."""
    text = Path(f"/proc/{pid}/status").read_text()
    kb = int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1))
    return kb / 1024


class Sampler(threading.Thread):
    """Largest VmRSS seen every `every` seconds until stopped."""

    def __init__(self, pid: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every, self.max_mb, self._done = pid, every, 0.0, threading.Event()

    def run(self):
        while not self._done.is_set():
            self.max_mb = max(self.max_mb, status_mb(self.pid, "VmRSS"))
            self._done.wait(self.every)

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.max_mb


STREAMLIT_RUN = ("-m", "streamlit", "run")


def start_server(env: dict, args: tuple = (), launcher: tuple = STREAMLIT_RUN) -> tuple[subprocess.Popen, str]:
    """`python <launcher> dashboard.py` on a free local port with `env` added (launcher: how Streamlit's
    `run` is reached, e.g. through a bench script that profiles the server); returns it and its URL once
    its health check answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, *launcher, "dashboard.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", *args],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.25)
    proc.kill()
    raise SystemExit("the server did not answer its health check within 90 s")


def visit_every_page(browser, url: str, pid: int) -> tuple[dict[str, float], dict[str, float], float]:
    """Open every page in one session. Returns the RSS (MB) after each page, the peak while each
    page ran (where VmHWM can be reset, else {}), and the peak over the whole visit."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    after, peaks, overall = {}, {}, 0.0
    for path in PAGES:
        overall = max(overall, status_mb(pid, "VmHWM"))
        exact = reset_peak(pid)
        page.goto(f"{url}/{path}")
        page.wait_for_selector(IDLE, timeout=180_000)
        page.wait_for_timeout(500)  # charts draw after the script finishes
        after[path or "home"] = round(status_mb(pid, "VmRSS"), 1)
        if exact:
            peaks[path or "home"] = round(status_mb(pid, "VmHWM"), 1)
    ctx.close()
    return after, peaks, max(overall, status_mb(pid, "VmHWM"))


def train_three(browser, url: str, seconds: float, pid: int) -> dict:
    contexts, pages = [], []
    for _ in range(3):
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        page = ctx.new_page()
        page.goto(f"{url}/train")
        page.wait_for_selector(IDLE, timeout=180_000)
        contexts.append(ctx)
        pages.append(page)
    sampler = Sampler(pid)
    sampler.start()
    for page in pages:
        page.get_by_role("button", name="Train", exact=True).click()
    time.sleep(seconds)
    running = sum(1 for p in pages if p.get_by_text(re.compile(r"steps/s")).count() > 0)
    waiting = sum(1 for p in pages if p.get_by_text(re.compile("waiting for a free training slot", re.I)).count() > 0)
    for page in pages:
        page.get_by_role("button", name="Stop", exact=True).click()
    for page in pages:
        page.wait_for_selector(IDLE, timeout=180_000)
    peak = sampler.stop()
    time.sleep(1)
    after = status_mb(pid, "VmRSS")
    for ctx in contexts:
        ctx.close()
    return {"rss_three_training_max_mb": round(peak, 1), "rss_after_three_stopped_mb": round(after, 1),
            "sessions_training": running, "sessions_waiting": waiting}


def pss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return int(re.search(r"^Pss:\s+(\d+) kB", text, re.M).group(1)) / 1024


async def _until_trained(session: LightSession, timeout: float = 1800) -> None:
    """Reload the Train page until its run has ended with a model (the download button is drawn)."""
    import asyncio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await session.open("train")
        if "tr_download" in session.widgets:
            await session.open("train")
            return
        await asyncio.sleep(2)
    raise TimeoutError("the training did not end")


async def _ended(url: str, ttl: float, settle: float) -> None:
    """Wait until the sessions just closed have ended: their reconnect window (ttl) and ui/sessions.py's
    MARGIN past it, when the server releases what they left, then `settle` seconds for ui/setup.py's
    next full collection (the server runs with postScriptGC off)."""
    import asyncio

    from ui.sessions import MARGIN

    await asyncio.sleep(ttl + MARGIN + 2)
    async with LightSession(url) as _:  # a store into the session storage: expired sessions go now
        pass
    await asyncio.sleep(settle)


async def _sessions(url: str, pid: int, count: int, train: bool, ttl: float, log, settle: float = 65.0) -> dict:

    async with LightSession(url) as first:  # the shared caches: shipped models, views, page modules
        for page in PAGES:
            await first.open(page)
        if train:  # ... and what a first training leaves: the forkserver's pipes, its finished run
            await first.open("train")
            await first.press("tr_train")
            await _until_trained(first)
    await _ended(url, ttl, settle)  # the first session's own state is not counted as theirs
    out = {"pss_before_mb": round(pss_mb(pid), 1), "errors": list(first.errors)}
    log(f"server PSS before: {out['pss_before_mb']} MB")
    sessions, after_each = [], []
    for i in range(count):
        s = LightSession(url)
        await s.__aenter__()
        sessions.append(s)
        for page in PAGES:
            await s.open(page)
        if train:
            await s.open("train")
            await s.press("tr_train")
        after_each.append(round(pss_mb(pid), 1))
        log(f"session {i + 1}: {after_each[-1]} MB")
    if train:  # each reloads the Train page once the run has ended: its model joins the session
        for s in sessions:
            await _until_trained(s)
    out["pss_connected_mb"] = round(pss_mb(pid), 1)
    log(f"with {count} sessions connected: {out['pss_connected_mb']} MB")
    for s in sessions:
        out["errors"] += s.errors
        await s.__aexit__(None, None, None)
    await _ended(url, ttl, settle)
    out["pss_after_end_mb"] = round(pss_mb(pid), 1)
    out["pss_after_each_session_mb"] = after_each
    out["per_session_connected_mb"] = round((out["pss_connected_mb"] - out["pss_before_mb"]) / count, 2)
    out["per_session_after_end_mb"] = round((out["pss_after_end_mb"] - out["pss_before_mb"]) / count, 2)
    log(f"after their sessions ended: {out['pss_after_end_mb']} MB")
    return out


def smaps(pid: int) -> dict:
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return {k: round(int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M).group(1)) / 1024, 1)
            for k in ("Pss", "Rss", "Private_Dirty", "Shared_Dirty")}


def smaps_detail(pid: int) -> dict:
    """PSS split by kind (anonymous, file-backed, shared memory), with RSS and the dirty pages, in MB."""
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return {k: round(int(m.group(1)) / 1024, 1) for k in ("Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Rss",
                                                           "Private_Dirty", "Shared_Dirty")
            if (m := re.search(rf"^{k}:\s+(\d+) kB", text, re.M))}


def worker_main(args) -> int:
    """--worker: the app's pool (ProcessBackend, forkserver) trains the default settings once, in this
    process as a server would; the worker's PSS is sampled every 50 ms (its peak) and read right after
    the logs at a few steps, with the forkserver's at the end. One worker: its shared pages are split
    with the forkserver only (a second worker would lower each one's PSS)."""
    sys.path.insert(0, str(ROOT))
    from first_walk import descendants
    from machine import matmul_rate

    from core.pool.runs import RunPool
    from core.training.run_config import RunConfig

    pool = RunPool(capacity=1)
    run = pool.start(RunConfig.of(), "bench")
    marks, at, peak, fs = [1, 100, 300, 600], {}, {"Pss": 0.0}, {"Pss": None}
    counts = {}  # step -> (minor page faults, CPU-s) of the worker when that step was first seen
    deadline = time.monotonic() + 1800
    try:
        while run.active and time.monotonic() < deadline:
            if run.pid and run.step > 0:
                try:
                    now = smaps(run.pid)
                    stat = Path(f"/proc/{run.pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    break
                count = (int(stat[7]), (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"))
                counts.setdefault(run.step, count)
                if now["Pss"] > peak["Pss"]:
                    peak = {**now, "step": run.step}
                if marks and run.step >= marks[0]:
                    at[marks.pop(0)] = {**now, "step": run.step}
                forkserver = [p for p in descendants(os.getpid())
                              if b"forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
                if forkserver:
                    fs = smaps(forkserver[0])
            time.sleep(0.05)
    finally:
        pool.shutdown()
    first, last = min((k for k in counts if k >= 100), default=None), max(counts, default=None)
    out_counts = {}
    if first is not None and last > first:  # from step 100 on: the start's one-time faults left out
        out_counts = {"faults_per_step": round((counts[last][0] - counts[first][0]) / (last - first), 1),
                      "cpu_ms_per_step": round(1000 * (counts[last][1] - counts[first][1]) / (last - first), 1),
                      "from_step": first, "to_step": last}
    out = {"worker_at_step": at, "worker_peak": peak, "forkserver": fs, "status": str(run.status), **out_counts,
           "steps": run.step, "matmul_gflops": round(matmul_rate(), 1)}
    if args.json:
        print(json.dumps(out))
    else:
        for row in at.values():
            print(f"worker after step {row['step']}: PSS {row['Pss']} MB (private {row['Private_Dirty']}, "
                  f"shared {row['Shared_Dirty']} dirty)")
        print(f"worker peak: PSS {peak['Pss']} MB at step {peak.get('step')}; forkserver PSS {fs['Pss']} MB; "
              f"run {out['status']} at step {run.step}; matmul {out['matmul_gflops']} GFLOP/s")
        if out_counts:
            print(f"steps {out_counts['from_step']}-{out_counts['to_step']}: {out_counts['faults_per_step']} page "
                  f"faults and {out_counts['cpu_ms_per_step']} ms CPU a step")
    return 0


def sessions_main(args) -> int:
    import asyncio

    from machine import matmul_rate

    proc, url = start_server({}, ("--server.disconnectedSessionTTL", str(int(args.ttl))))
    try:
        out = asyncio.run(_sessions(url, proc.pid, args.sessions, args.train, args.ttl,
                                    (lambda m: None) if args.json else print, args.settle))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out.update(sessions=args.sessions, train=args.train, ttl_s=args.ttl, matmul_gflops=round(matmul_rate(), 1))
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.sessions} {'training' if args.train else 'reading'} sessions: "
              f"{out['per_session_connected_mb']:+.2f} MB each while connected, {out['per_session_after_end_mb']:+.2f} "
              f"MB each after they ended; errors: {len(out['errors'])}; matmul {out['matmul_gflops']} GFLOP/s")
        for error in sorted(set(out["errors"])):
            print(f"  error ({out['errors'].count(error)}x): {error}")
    return 1 if out["errors"] else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--train-seconds", type=float, default=20.0, help="how long the three sessions train")
    ap.add_argument("--max-trainings", type=int, help="ATTENTION_LAB_MAX_TRAININGS for the server")
    ap.add_argument("--sessions", type=int, help="light-client sessions to open and close")
    ap.add_argument("--train", action="store_true", help="with --sessions: each presses Train (defaults)")
    ap.add_argument("--ttl", type=float, default=5.0, help="with --sessions: server.disconnectedSessionTTL (s)")
    ap.add_argument("--settle", type=float, default=65.0,
                    help="with --sessions: seconds after the sessions ended before the last reading")
    ap.add_argument("--worker", action="store_true", help="a training process's PSS over a default run")
    args = ap.parse_args(argv)
    if args.worker:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        return worker_main(args)
    if args.sessions:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        return sessions_main(args)
    if args.train_seconds <= 0:
        ap.error("--train-seconds must be positive")
    env = {"ATTENTION_LAB_MAX_TRAININGS": str(args.max_trainings)} if args.max_trainings is not None else {}
    from playwright.sync_api import sync_playwright

    proc, url = start_server(env)
    try:
        out = {"rss_idle_mb": round(status_mb(proc.pid, "VmRSS"), 1)}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            sampler = Sampler(proc.pid)
            sampler.start()
            after, peaks, peak = visit_every_page(browser, url, proc.pid)
            out["rss_after_each_page_mb"], out["rss_peak_each_page_mb"] = after, peaks
            # VmHWM is the exact peak; the 0.5 s samples are the fallback where it cannot be reset
            out["rss_one_session_max_mb"] = round(max(sampler.stop(), peak), 1)
            exact = reset_peak(proc.pid)
            out["rss_one_session_all_pages_mb"] = round(status_mb(proc.pid, "VmRSS"), 1)
            out.update(train_three(browser, url, args.train_seconds, proc.pid))
            if exact:
                out["rss_three_training_max_mb"] = round(status_mb(proc.pid, "VmHWM"), 1)
            browser.close()
        out["budget_one_session_mb"] = BUDGET_MB
        out["max_trainings"] = args.max_trainings if args.max_trainings is not None else "default"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if args.json:
        print(json.dumps(out))
    else:
        ok = "within" if out["rss_one_session_max_mb"] < BUDGET_MB else "OVER"
        print(f"server RSS idle: {out['rss_idle_mb']:.0f} MB")
        print(f"one session, every page: {out['rss_one_session_all_pages_mb']:.0f} MB after, "
              f"{out['rss_one_session_max_mb']:.0f} MB at most ({ok} the {BUDGET_MB} MB budget)")
        print("  after each page: " + ", ".join(f"{k} {v:.0f}" for k, v in out["rss_after_each_page_mb"].items()))
        if out["rss_peak_each_page_mb"]:
            print("  peak while each page ran: "
                  + ", ".join(f"{k} {v:.0f}" for k, v in out["rss_peak_each_page_mb"].items()))
        print(f"three sessions training at once ({out['sessions_training']} training, {out['sessions_waiting']} "
              f"waiting for a slot): {out['rss_three_training_max_mb']:.0f} MB at most, "
              f"{out['rss_after_three_stopped_mb']:.0f} MB after Stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
