"""bench/light.py's LightSession follows a page's fragments as Streamlit's frontend does: a
fake server on an in-memory websocket sends the ForwardMsgs Streamlit 1.67 sends, and the test reads
the BackMsgs the session sends back."""
from __future__ import annotations

import asyncio
import sys

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from light import LightSession  # noqa: E402

EVERY = 0.02  # the fragment's run_every, in seconds


class FakeServer:
    """A page with one text, a Train button and a fragment (run_every=EVERY) that draws "step n"; a
    whole run ends the fragment's timer when `live` is False (the run has ended, no run_every)."""

    def __init__(self):
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.sent: list[BackMsg] = []
        self.live, self.fragment_runs = True, 0

    async def send(self, data: bytes) -> None:
        msg = BackMsg()
        msg.ParseFromString(data)
        self.sent.append(msg)
        state = msg.rerun_script
        if state.fragment_id:
            self.fragment_runs += 1
            self._run([self._text((0, 1), f"step {self.fragment_runs} steps/s")], fragment=state.fragment_id)
        else:
            elements = [self._text((0, 0), "Train TinyCharLM"), self._button((0, 2), "$$ID-abc-tr_train")]
            if self.live:
                self._run(elements, auto_rerun=("frag-1", EVERY))
            else:
                self._run([*elements, self._text((0, 1), "The run ended")])

    async def recv(self) -> bytes:
        return await self.inbox.get()

    async def close(self) -> None:
        pass

    def stop_timer(self, fragment: str) -> None:
        msg = ForwardMsg()
        msg.stop_auto_rerun.fragment_ids.append(fragment)
        self.inbox.put_nowait(msg.SerializeToString())

    def _run(self, elements, fragment: str = "", auto_rerun=None) -> None:
        start = ForwardMsg()
        start.new_session.page_script_hash = "hash-of-train"
        if fragment:
            start.metadata.run.fragment_ids.append(fragment)
        msgs = [start, *elements]
        if auto_rerun:
            msg = ForwardMsg()
            msg.auto_rerun.fragment_id, msg.auto_rerun.interval = auto_rerun
            msgs.append(msg)
        end = ForwardMsg()
        end.script_finished = ForwardMsg.FINISHED_SUCCESSFULLY
        for msg in [*msgs, end]:
            self.inbox.put_nowait(msg.SerializeToString())

    @staticmethod
    def _text(path, body: str) -> ForwardMsg:
        msg = ForwardMsg()
        msg.metadata.delta_path.extend(path)
        msg.delta.new_element.markdown.body = body
        return msg

    @staticmethod
    def _button(path, widget_id: str) -> ForwardMsg:
        msg = ForwardMsg()
        msg.metadata.delta_path.extend(path)
        msg.delta.new_element.button.id = widget_id
        return msg


def test_a_light_session_reruns_the_fragments_as_a_tab_does():
    async def scenario():
        server = FakeServer()
        session = LightSession("http://unused").attach(server)
        await session.open("train")
        assert "tr_train" in session.widgets and session.fragment_runs == 0
        await session.wait_for(r"step 3 steps/s", timeout=2.0)  # drawn by the third fragment rerun
        reruns = [m.rerun_script for m in server.sent[1:]]
        assert reruns and all(r.fragment_id == "frag-1" and r.is_auto_rerun for r in reruns)
        assert all(r.page_script_hash == "hash-of-train" and r.page_name == "" for r in reruns)
        assert "Train TinyCharLM" in session.text  # the whole run's elements stay beside the fragment's
        server.stop_timer("frag-1")
        await asyncio.sleep(3 * EVERY)
        count = len(server.sent)
        await asyncio.sleep(5 * EVERY)
        assert len(server.sent) == count  # stop_auto_rerun ended the timer

        server.live = False
        await session.open("train")  # a whole run whose fragment has no run_every: no timer, no rerun
        count = len(server.sent)
        await asyncio.sleep(5 * EVERY)
        assert len(server.sent) == count and "The run ended" in session.text and "steps/s" not in session.text
        await session.__aexit__(None, None, None)
    asyncio.run(scenario())


def test_a_whole_run_ends_the_fragment_timers_and_a_reload_client_sends_none():
    async def scenario():
        server = FakeServer()
        session = LightSession("http://unused").attach(server)
        await session.open("train")
        await session.wait_for(r"step 1 steps/s", timeout=2.0)
        server.live = False
        await session.press("tr_train")  # its whole run registers no run_every: the timer must stop
        pressed = server.sent[-1].rerun_script
        assert pressed.page_name == "train" and not pressed.fragment_id
        assert [w.trigger_value for w in pressed.widget_states.widgets] == [True]
        count = len(server.sent)
        await asyncio.sleep(5 * EVERY)
        assert len(server.sent) == count
        await session.__aexit__(None, None, None)

        server = FakeServer()
        reloading = LightSession("http://unused", follow_fragments=False).attach(server)
        await reloading.open("train")
        await asyncio.sleep(5 * EVERY)
        assert len(server.sent) == 1 and reloading.fragment_runs == 0
        await reloading.__aexit__(None, None, None)
    asyncio.run(scenario())
