"""The real-browser tests' tools: a `streamlit run dashboard.py` server on a free loopback port
(StreamlitServer), a tab on it with the waits Streamlit needs (LabPage), Debian's Chromium and its
flags, the page list (read from ui/pages.py) and where screenshots go (ARTIFACTS)."""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from ui.pages import ALL_PAGES

from helpers import ROOT  # tests/helpers.py, which also puts the repository on sys.path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                 "--disable-extensions", "--mute-audio"]
ARTIFACTS = Path(os.environ.get("E2E_ARTIFACTS") or ROOT / "test-artifacts" / "e2e")
SCRIPT_IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
SCRIPT_RUNNING = '[data-testid="stApp"][data-test-script-state="running"]'


PAGES = {p.url_path: p.title for p in ALL_PAGES}  # url path -> page title in the sidebar (home is "")
# Charts each page draws for the default (shipped) model without any clicks: the least number. Home
# draws none; it must show its headline metrics and a link to every other page instead.
MIN_CHARTS = {"train": 1, "attention": 1, "circuits": 1, "depth": 1, "icl": 1, "archetypes": 1, "causal": 1,
              "laws": 1, "exercises": 0, "glossary": 0}
# (A page without charts must say 0: waiting for a chart that never comes costs wait_charts' whole timeout.)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamlitServer:
    """`streamlit run dashboard.py --server.headless true` on 127.0.0.1:<free port>.

    Bytecode writing is off so that any file the app writes inside the repository is the app's own
    doing (see `new_files_in_repo`)."""

    def __init__(self, env: dict | None = None, name: str = "server"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.log_path = ARTIFACTS / f"{name}.log"
        self.before = repo_files()
        full_env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
        self.log = open(self.log_path, "w")  # noqa: SIM115 (the server writes to it until stop() closes it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_healthy(90)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}:\n{self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200 and r.read().strip() == b"ok":
                        return
            except OSError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"streamlit did not answer /_stcore/health within {timeout:.0f} s")

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def tracebacks(self) -> list[str]:
        """Tracebacks the server printed (an exception the page did not turn into a message)."""
        return re.findall(r"Traceback \(most recent call last\):.*?(?=\n\S|\Z)", self.log_text(), flags=re.S)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log.close()

    def new_files_in_repo(self) -> list[str]:
        return sorted(repo_files() - self.before)


def repo_files() -> set[str]:
    """Files under the repository, leaving out git's own, caches and test artifacts."""
    skip = {".git", "__pycache__", ".pytest_cache", "test-artifacts", "artifacts"}
    out = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in skip]
        rel = Path(dirpath).relative_to(ROOT)
        out.update(str(rel / f) for f in filenames)
    return out


def bench_tab(pw, server: StreamlitServer, width: int = 1400, height: int = 900) -> LabPage:
    """A bench's tab (bench/pin_cost.py, bench/live_strip_pin_cost.py): Debian's Chromium, one context at
    `width` x `height`, waits of 60 s."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.set_default_timeout(60_000)
    return LabPage(ctx.new_page(), server.url)


class LabPage:
    """One browser tab on the lab, with the waits Streamlit needs."""

    def __init__(self, page, base_url: str):
        self.page, self.base_url = page, base_url

    def goto(self, path: str = "", timeout: float = 90_000) -> LabPage:
        self.page.goto(f"{self.base_url}/{path}")
        self.wait_idle(timeout)
        return self

    def wait_idle(self, timeout: float = 90_000) -> None:
        """Wait until the app's script is not running (the page is drawn), and still not running
        a moment later: a run that ends in st.rerun() is idle for an instant before the next."""
        deadline = time.monotonic() + timeout / 1000
        while True:
            left = max(1_000, (deadline - time.monotonic()) * 1000)
            self.page.wait_for_selector(SCRIPT_IDLE, timeout=left)
            self.page.wait_for_timeout(300)
            if self.page.locator(SCRIPT_IDLE).count() or time.monotonic() > deadline:
                return

    def after(self, action, timeout: float = 90_000) -> None:
        """Do `action` (a click, a fill...) and wait for the rerun it causes to finish."""
        action()
        with contextlib.suppress(Exception):  # a fast run may already be over; the idle wait below counts
            self.page.wait_for_selector(SCRIPT_RUNNING, timeout=3_000)
        self.wait_idle(timeout)

    def nav(self, title: str, wait_idle: bool = True) -> None:
        """Switch page through the sidebar navigation, as a student does (keeps the session).
        wait_idle=False for a page that keeps rerunning (live training): wait for its title instead."""
        link = self.page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).first
        if wait_idle:
            self.after(link.click)
        else:
            path = urllib.parse.urlsplit(link.get_attribute("href")).path
            link.click()
            # By path alone: the page soon writes its view into the address (ui/share.py, "?model=..."),
            # and a glob on the whole address missed a page that had already done so.
            self.page.wait_for_url(lambda url: urllib.parse.urlsplit(url).path == path)

    def exceptions(self) -> list[str]:
        return self.page.locator('[data-testid="stException"]').all_inner_texts()

    def assert_no_exception(self) -> None:
        errs = self.exceptions()
        assert not errs, f"the page shows an exception: {errs[0][:1500]}"

    def charts(self):
        return self.page.locator('[data-testid="stVegaLiteChart"]')

    def wait_charts(self, at_least: int, timeout: float = 30_000) -> int:
        """Wait until at least `at_least` Vega-Lite charts have drawn (a canvas or svg of nonzero size)."""
        drawn = self.page.locator('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks')
        deadline = time.monotonic() + timeout / 1000
        while True:
            sizes = drawn.evaluate_all("els => els.map(e => e.getBoundingClientRect()).map(r => r.width * r.height)")
            n = sum(1 for s in sizes if s > 100)
            if n >= at_least or time.monotonic() > deadline:
                return n
            time.sleep(0.2)

    def _picker(self):
        return self.page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first

    def sidebar_options(self) -> list[str]:
        """The labels the sidebar's model picker offers (none when it shows no picker)."""
        if self.page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').count() == 0:
            return []
        self._picker().get_by_role("button", name="Open").click()
        listbox = self.page.get_by_role("listbox", name="Analyse")
        listbox.wait_for()
        options = listbox.get_by_role("option").all_inner_texts()
        self.page.keyboard.press("Escape")
        listbox.wait_for(state="detached")
        return [o.strip() for o in options]

    def picked_label(self) -> str:
        """What the sidebar's model picker shows as picked."""
        return self._picker().get_by_role("combobox").input_value()

    def pick(self, label_part: str) -> None:
        """Pick the first model whose label holds `label_part` in the sidebar."""
        self._picker().get_by_role("button", name="Open").click()
        option = self.page.get_by_role("listbox", name="Analyse").get_by_role("option").filter(has_text=label_part)
        self.after(option.first.click)

    def upload(self, path: Path) -> None:
        """Put a file into the sidebar's checkpoint uploader (key "upload_checkpoint")."""
        field = self.page.locator('[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInput"]')
        self.after(lambda: field.set_input_files(str(path)))

    def screenshot(self, name: str) -> Path:
        """A picture of the whole page (the main area scrolls, so the window is made tall first)."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        size = self.page.viewport_size
        height = self.page.evaluate(
            "() => Math.max(...['stMain', 'stAppViewContainer', 'stSidebarContent'].map(id => "
            "(document.querySelector(`[data-testid=${id}]`) || {scrollHeight: 0}).scrollHeight))")
        self.page.set_viewport_size({"width": size["width"], "height": int(min(max(height, size["height"]), 8000))})
        self.page.wait_for_timeout(400)  # charts re-fit their width
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(size)
        return path
