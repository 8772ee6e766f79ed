"""What a page reads of a training in the pool (core.pool.runs): a LiveRun, the stream it follows,
and the key under which identical runs are computed once (run_key: settings, seed, worker threads
and a hash of the training and model code)."""
from __future__ import annotations

import functools
import hashlib
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from core.model.info import info_view
from core.pool.status import ACTIVE, RunStatus
from core.training.run_config import RunConfig


def session_of(owner: str) -> str:
    """The Streamlit session of a pool owner ("<session id>|..."): one training slot each."""
    return owner.split("|", 1)[0]


@functools.cache
def code_version() -> str:
    """A hash of the code a training's result depends on (core/training, core/model with the compiled
    attention's C++ source, the attention kernel this process trains with, torch's version), computed once
    per server process. The source and the kernel count since the compiled attention's floats differ from
    the eager kernel's (a table's runs from one kernel are not bit for bit the other's)."""
    from core.model.attention import kernel_choice

    return _version(kernel_choice().kernel)


def _version(kernel: str) -> str:
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(_torch_version().encode() + b"\0" + kernel.encode())
    for path in sorted([*root.glob("training/*.py"), *root.glob("model/*.py"), *root.glob("model/*.cpp")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _torch_version() -> str:
    """torch.__version__, read from its installed metadata: no `import torch` (1.1 CPU-s in a server)."""
    import importlib.metadata

    return importlib.metadata.version("torch")


@functools.cache
def source_version() -> str:
    """code_version without the attention kernel: what keys a pool's runs (run_key). A pool shares runs within
    its server process only (core.pool.finished), whose every worker picks the kernel by the same rule on the
    same machine, so the kernel adds nothing there; and finding it out (core.model.attention.kernel_choice)
    imports torch, which a server that only starts and streams runs does not need (bench/class.py run)."""
    return _version("")


def run_key(settings: RunConfig, threads: int) -> str:
    """Runs with the same key give bit-identical models within one server process: every setting, the seed,
    the thread count, the code (source_version)."""
    return hashlib.sha256(repr((sorted(asdict(settings).items()), threads, source_version())).encode()).hexdigest()


@dataclass(eq=False)
class _Stream:
    """What a training has streamed so far (shared by the LiveRuns that follow it)."""
    status: RunStatus = RunStatus.WAITING
    position: int = 0  # place in line while waiting (1 = next)
    blocked: bool = False  # waiting although a slot is free: the session already holds one
    step: int = 0  # the worker's last finished step
    seconds: float = 0.0  # wall seconds since its first step
    rows: list = field(default_factory=list)
    frames: list = field(default_factory=list)  # (step, patterns [L, H, c, c]) (core.training.timeline.keep_frame)
    strip_period: int = 0  # the period of the film strip's sequence
    threads: int = 0  # torch threads the pool gave the worker
    worker_threads: int = 0  # torch threads the worker reported using at its last progress message
    pid: int | None = None  # the worker process, once started
    info: dict | None = None  # at the end: its checkpoint's info without weights, as the worker read it back

    def frozen(self, **changes) -> _Stream:
        """A copy that no longer changes (frames dropped: an ended run's snapshots give the film strip)."""
        values = {f.name: getattr(self, f.name) for f in fields(_Stream)}
        values.update(rows=list(self.rows), frames=[], **changes)
        return _Stream(**values)


class _Training(_Stream):
    """One worker and its stream; `followers` are the LiveRuns of the sessions watching it."""

    def __init__(self, settings: RunConfig, key: str | None, threads: int):
        super().__init__(threads=threads)
        self.id, self.settings, self.key = uuid.uuid4().hex, settings, key
        self.followers: list[LiveRun] = []
        self.keeps: dict[str, LiveRun] = {}  # "keep" requests sent, by token (= the follower's id)
        self.handle = None  # its core.pool.backend.WorkerHandle, once started
        self.starting_since = 0.0  # when it was given a slot (its start has a deadline)
        self.heard = time.monotonic()
        self.eof_at: float | None = None  # when its Pipe closed without "done"
        self.saved: tuple | None = None  # (step, seconds, checkpoint bytes) of its last "saved" message


@dataclass(frozen=True)
class Ending:
    """How a LiveRun ended, published whole: one object assigned once, then `ended` is set, so a page
    never sees a status without its error or model."""
    status: RunStatus
    stream: _Stream  # what it streamed, frozen
    error: str | None = None  # why a failed run failed, one sentence
    data: bytes | None = None  # the checkpoint, when it ended with a model


def _streamed(name: str):
    return property(lambda run: getattr(run._end.stream if run._end is not None else run.source, name))


class LiveRun:
    """One session's training as the server sees it. status: waiting -> starting -> running ->
    finished | stopped | cancelled | diverged | failed. `rows` are the logged history rows so far.
    `shared`: None for a run this session's press started, "live" when it follows a training another
    session started, "finished" when it was handed a finished one."""

    status = property(lambda run: run._end.status if run._end is not None else run.source.status)
    error = property(lambda run: None if run._end is None else run._end.error)
    position, blocked, step, seconds = (_streamed(n) for n in ("position", "blocked", "step", "seconds"))
    rows, frames, strip_period = (_streamed(n) for n in ("rows", "frames", "strip_period"))
    threads, worker_threads, pid = (_streamed(n) for n in ("threads", "worker_threads", "pid"))

    def __init__(self, settings: RunConfig, owner: str, source: _Stream, shared: str | None = None,
                 private: bool = False):
        self.settings, self.owner, self.id = settings, owner, uuid.uuid4().hex
        self.model_cfg, self.task_cfg, self.train_cfg = settings.configs()
        self.shared, self.private = shared, private
        self.registered_key: str | None = None  # set by the page once the model is in the picker
        self.stopping = False  # Stop was pressed; the worker ends (or hands this run its model) after the step
        self.ended = threading.Event()
        self.source = source  # the training it follows (or the finished stream it was handed); the pool's
        self._end: Ending | None = None  # set once, by the pool, just before `ended`
        self._read: tuple | None = None  # the model read back from the checkpoint here, on first use

    def publish(self, ending: Ending) -> None:
        """The pool ends the run: its stream stops changing here, then `ended` is set."""
        self._end = ending
        self.ended.set()

    @property
    def result(self):
        """(model, info, checkpoint bytes) once finished or stopped, else None. A run that shares a
        training reads its own copy of the model from the bytes, here, on first use."""
        end = self._end
        if end is None:
            return None
        if end.data is not None and self._read is None:
            from core.model.checkpoints import read_checkpoint  # torch: only once a run has ended

            model, info = read_checkpoint(end.data, name="The trained model")
            self._read = (model, info, end.data)
        return self._read if end.data is not None else None

    @property
    def checkpoint(self) -> bytes | None:
        """The checkpoint's bytes once finished or stopped with a model, else None."""
        return None if self._end is None else self._end.data

    @property
    def info(self) -> dict | None:
        """The ended model's info without its weights (core.model.info.info_view), None without a model. Torch-free:
        the worker sent it with the checkpoint. Only a model kept from a failed worker's last "saved" checkpoint is
        read back for it here."""
        if self.checkpoint is None:
            return None
        return self._end.stream.info if self._end.stream.info is not None else info_view(self.result[1])

    @result.setter
    def result(self, value) -> None:
        """Only None: forget the model (the ending stays, without its checkpoint)."""
        if value is not None:
            raise ValueError("A run's result is set by the pool; assign None to drop the model.")
        if self._end is not None:
            self._end = replace(self._end, data=None, stream=replace(self._end.stream, info=None))
        self._read = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def total_steps(self) -> int:
        return self.train_cfg.steps

    def history(self) -> list[dict]:
        """Logged rows so far; once ended with a model, its stored history (which ends at its step)."""
        info = self.info
        return list(info["history"] if info is not None else self.rows)

    def steps_per_second(self) -> float:
        return self.step / self.seconds if self.seconds > 0 else float("nan")
