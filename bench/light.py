"""A browser session without a browser: Streamlit's own websocket protocol (BackMsg out, ForwardMsg in),
rendering nothing. bench/class.py's light students and bench/memory.py --sessions use it.

What it does as Streamlit 1.67's frontend does (its App.tsx, read from the shipped bundle):
- `open(page)` asks for a whole run of the page (ClientState.page_name) and waits for its end;
  `press(key)` clicks the button whose widget key is `key` (a trigger value) on the page open.
- A fragment with `run_every` makes the server send ForwardMsg.auto_rerun (interval, fragment_id).
  The tab then sends, every `interval` seconds (setInterval, whatever the server is doing), a rerun
  BackMsg with that fragment_id, is_auto_rerun, the page's page_script_hash and its widget values; a
  second auto_rerun for the same fragment and interval keeps the timer. stop_auto_rerun ends the
  timers it names, a whole run's new_session (no fragment ids in its metadata) ends them all, and so
  does opening another page. So a student watching a training costs the server the fragments'
  reruns, as a tab does, not a whole script a poll.
- What is on screen (`text`) is every text element of the last whole run, with what fragment runs
  drew since at the same places (delta paths) in its place.
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import time

TEXTS = ("markdown", "text", "alert", "progress", "heading", "caption")
WIDGETS = ("button", "download_button", "number_input")  # the widgets recorded by key


class LightSession:
    """One student's session. `follow_fragments=False` ignores auto_rerun (then a caller that wants to see
    a page change must open it again, a whole run each time). `errors`: the exceptions drawn, as
    "page: message"; `fragment_runs`: the auto reruns sent."""

    def __init__(self, url: str, follow_fragments: bool = True):
        self.url, self.follow_fragments = url, follow_fragments
        self.ws, self.errors, self.widgets, self.page = None, [], {}, ""
        self.page_script_hash = ""
        self.fragment_runs = 0
        self._screen: dict[tuple, str] = {}  # delta path -> an element's text
        self._values: list = []  # the page's widget values (WidgetState), sent with every run as a tab does
        self._timers: dict[str, tuple[float, asyncio.Task]] = {}  # fragment id -> (interval, its task)
        self._full_run = False  # the run being drawn is a whole run (not a fragment's)
        self._whole_runs_ended = 0
        self._changed = asyncio.Event()  # something arrived
        self._reader: asyncio.Task | None = None
        self._lost: BaseException | None = None

    @property
    def text(self) -> str:
        """Every text element on screen, in protobuf text form (to search what it says)."""
        return "\n".join(self._screen.values())

    async def __aenter__(self):
        import websockets

        return self.attach(await websockets.connect(self.url.replace("http", "ws", 1) + "/_stcore/stream",
                                                    subprotocols=["streamlit"], max_size=None, compression="deflate"))

    def attach(self, ws) -> LightSession:
        """Speak over `ws` (anything with async send, recv and close), reading it from now on."""
        self.ws = ws
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc):
        self._stop_timers()
        if self._reader is not None:
            self._reader.cancel()
        await self.ws.close()

    # -- what a student does --------------------------------------------------------------------

    async def open(self, page: str) -> float:
        """Open `page` (its url path, "" for Home): a whole run; returns its seconds until the run ended."""
        self._stop_timers()
        self.widgets, self._values = {}, []
        return await self._whole_run(page, [])

    async def press(self, key: str, numbers: dict | None = None) -> float:
        """Click button `key`, with the whole-number inputs `numbers` ({widget key: value}) set (they keep
        those values in the page's later runs, as on a tab)."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        missing = [k for k in [key, *(numbers or {})] if k not in self.widgets]
        if missing:
            raise RuntimeError(f"no widget {missing} on page {self.page!r}")
        set_now = {self.widgets[k]: WidgetState(id=self.widgets[k], int_value=int(v))
                   for k, v in (numbers or {}).items()}
        self._values = [v for v in self._values if v.id not in set_now] + list(set_now.values())
        return await self._whole_run(self.page, [WidgetState(id=self.widgets[key], trigger_value=True), *self._values])

    async def wait_for(self, pattern: str, timeout: float) -> float:
        """Wait until `pattern` (a regular expression) is on screen, while the page's fragments rerun;
        returns the seconds waited. TimeoutError past `timeout`."""
        t0 = time.perf_counter()
        while not re.search(pattern, self.text):
            self._check()
            left = t0 + timeout - time.perf_counter()
            if left <= 0:
                raise TimeoutError(pattern)
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 5.0))
        return time.perf_counter() - t0

    # -- the protocol ---------------------------------------------------------------------------

    def _check(self) -> None:
        if self._lost is not None:
            raise ConnectionError(f"the connection was lost: {type(self._lost).__name__}")

    async def _send_rerun(self, page: str, widgets, fragment_id: str = "") -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.widget_states.widgets.extend(widgets)
        if fragment_id:  # the tab's sendRerunBackMsg: the open page by its hash, no page name
            msg.rerun_script.page_script_hash = self.page_script_hash
            msg.rerun_script.fragment_id = fragment_id
            msg.rerun_script.is_auto_rerun = True
        else:
            msg.rerun_script.page_name = page
        await self.ws.send(msg.SerializeToString())

    async def _whole_run(self, page: str, widgets) -> float:
        t0 = time.perf_counter()
        ended = self._whole_runs_ended
        self.page = page
        await self._send_rerun(page, widgets)
        while self._whole_runs_ended == ended:
            self._check()
            self._changed.clear()
            await self._changed.wait()
        return time.perf_counter() - t0

    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            while True:
                fwd = ForwardMsg()
                fwd.ParseFromString(await self.ws.recv())
                self._handle(fwd)
                self._changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a closed connection: the waiting callers raise it
            self._lost = e
            self._changed.set()

    def _handle(self, fwd) -> None:
        kind = fwd.WhichOneof("type")
        if kind == "new_session":
            self.page_script_hash = fwd.new_session.page_script_hash
            self._full_run = not fwd.metadata.run.fragment_ids
            if self._full_run:  # the tab: cleanupAutoReruns; the run registers its fragments again
                self._stop_timers()
                self._screen, self.widgets = {}, {}
        elif kind == "script_finished":
            if self._full_run and fwd.script_finished != fwd.FINISHED_EARLY_FOR_RERUN:
                self._whole_runs_ended += 1
        elif kind == "auto_rerun" and self.follow_fragments:
            fragment, interval = fwd.auto_rerun.fragment_id, fwd.auto_rerun.interval
            if fragment and self._timers.get(fragment, (None,))[0] != interval:
                self._stop_timers([fragment])
                self._timers[fragment] = (interval, asyncio.create_task(self._every(fragment, interval)))
        elif kind == "stop_auto_rerun":
            self._stop_timers(list(fwd.stop_auto_rerun.fragment_ids))
        elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            element = fwd.delta.new_element
            what = element.WhichOneof("type")
            path = tuple(fwd.metadata.delta_path)
            if what in TEXTS:
                self._screen[path] = str(getattr(element, what))
            else:
                self._screen.pop(path, None)
            if what == "exception":
                self.errors.append(f"{self.page or 'home'}: {element.exception.message[:200]}")
            elif what in WIDGETS and getattr(element, what).id:
                self.widgets[getattr(element, what).id.rsplit("-", 1)[-1]] = getattr(element, what).id

    async def _every(self, fragment: str, interval: float) -> None:
        """The tab's setInterval: a rerun of `fragment` every `interval` s, whether or not the last has ended."""
        next_at = time.perf_counter() + interval
        while True:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += interval
            self.fragment_runs += 1
            await self._send_rerun(self.page, self._values, fragment)

    def _stop_timers(self, fragments=None) -> None:
        for fragment in list(self._timers) if fragments is None else fragments:
            if fragment in self._timers:
                self._timers.pop(fragment)[1].cancel()
