"""One training, inside its own worker process (the child side of core.pool.runs). The same loop
runs in a thread for core.pool.backend.ThreadBackend; `start`, `context` and `warm_up` are the
process backend's.

The worker builds a Trainer from RunConfig and trains one step at a time. Between steps it reads
the commands the server sent on its end of a Pipe and streams back what the page draws:

    worker -> server   ("started", pid)
                       ("row", history_row)            every row the trainer logs, once
                       ("frame", step, patterns, period)  with each row at the current step: every head's
                                                        pattern on the film strip's sequence (core.training.timeline)
                       ("progress", step, seconds, threads)   at most every PROGRESS_EVERY s, and at the end
                       ("done", status, step, seconds, data, info)   status: finished | stopped | cancelled |
                                                        diverged; data: checkpoint bytes or None; info: the
                                                        checkpoint read back here (read_checkpoint, strictly)
                                                        without its weights (core.model.info.info_view), or
                                                        why it could not be read (a sentence), or None
                       ("saved", step, seconds, data)   with each logged row after step 0: the checkpoint
                                                        of that step without snapshots (saved_checkpoint), which
                                                        the server keeps if the process dies before "done"
                       ("error", sentence)              the training raised
                       ("kept", token, step, seconds, data, info)   answer to "keep": the checkpoint now
                                                        (data None before the first step), info as for
                                                        "done"; training goes on
    server -> worker   ("stop",)                        end at the last finished step, keep the model
                       ("keep", token)                  send the checkpoint of the last finished step and
                                                        train on (a session leaves a training others follow)
                       ("threads", n)                   torch threads from the next step on

`seconds` is wall time since the first step. The trained result is the checkpoint file the trainer's
own fields make (core.model.checkpoints.checkpoint_bytes(model, **trainer.checkpoint_fields())), so
whatever the trainer stores with a checkpoint reaches the server unchanged. If the server goes away,
the Pipe reports end-of-file and the worker returns.
"""
from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable
from contextlib import suppress

import torch

from core.model.checkpoints import CheckpointError, checkpoint_bytes, read_checkpoint
from core.model.info import info_view
from core.pool.status import RunStatus
from core.training.heap import keep_freed_memory
from core.training.run_config import RunConfig
from core.training.timeline import frame_patterns, strip_tokens
from core.training.trainer import Trainer

PROGRESS_EVERY = 0.1  # seconds between progress messages


def final_checkpoint(trainer: Trainer) -> bytes:
    """The checkpoint of the trainer's model at its last finished step. A run stopped between two
    logs gets one more history row, measured now, at that step (train_loss NaN: no batch logged).
    A held head (core.training.interventions) is part of the kept model (its checkpoint records it and
    read_checkpoint restores it), so every row, the banner and every page measure the same model."""
    model = copy.deepcopy(trainer.model).eval()
    fields = dict(trainer.checkpoint_fields())
    history = list(fields["history"])
    if history[-1]["step"] != trainer.step:
        row = {"step": trainer.step, "train_loss": math.nan, "seconds": round(trainer.seconds, 3)}
        row.update(trainer.evaluate(trainer.log_tokens, trainer.log_periods))
        history.append(row)
    fields["history"] = history
    return checkpoint_bytes(model, **fields)


def info_of(data: bytes | None) -> dict | str | None:
    """The info the server reads of a checkpoint it is sent: the file read back here, as strictly as any file
    (read_checkpoint), without its weights; or the sentence saying why it cannot be read. Read in the worker, so
    the server learns how a run ended without importing torch (it loads the model when a page first needs it)."""
    if data is None:
        return None
    try:
        return info_view(read_checkpoint(data, name="The trained model")[1])
    except CheckpointError as e:
        return str(e)


def saved_checkpoint(trainer: Trainer) -> bytes:
    """The checkpoint of the trainer's model at a logged step (its history ends there), without the
    snapshots: what the server keeps of a run whose process is killed before it hands its model back.
    The snapshots stay out because they are up to 8.5 MiB a file and the file is sent
    every log; the weights and history are about 0.6 MB for the default model."""
    fields = {k: v for k, v in trainer.checkpoint_fields().items() if k != "snapshots"}
    return checkpoint_bytes(trainer.model, **fields)


def train_process(conn, settings: RunConfig, threads: int) -> None:
    """`train` as a process's whole life (ProcessBackend): its heap kept between steps
    (core.training.heap.keep_freed_memory). A worker in a thread of the server runs `train` alone."""
    keep_freed_memory()
    train(conn, settings, threads)


class _Session:
    """The worker's side of the Pipe: commands in, rows and progress out."""

    def __init__(self, conn, trainer: Trainer):
        self.conn, self.trainer = conn, trainer
        self.strip, self.period = strip_tokens(trainer.task_cfg, trainer.model_cfg.vocab_size)
        self.sent_rows = 0
        self.t0: float | None = None
        self.last_progress = 0.0
        self.stop = False
        self.keeps: list = []  # tokens of "keep" commands not yet answered

    def seconds(self) -> float:
        return 0.0 if self.t0 is None else time.perf_counter() - self.t0

    def read_commands(self) -> None:
        while self.conn.poll():
            command = self.conn.recv()  # EOFError when the server is gone
            if command[0] == "stop":
                self.stop = True
            elif command[0] == "threads":
                torch.set_num_threads(int(command[1]))
            elif command[0] == "keep":
                self.keeps.append(command[1])

    def send_kept(self) -> None:
        """Answer "keep": the checkpoint of the last finished step (nothing random is drawn, so the
        training goes on exactly as without it)."""
        trainer, tokens, self.keeps = self.trainer, self.keeps, []
        for token in tokens:
            data = final_checkpoint(trainer) if trainer.step > 0 else None
            self.conn.send(("kept", token, trainer.step, self.seconds(), data, info_of(data)))

    def send_frame(self) -> None:
        """The heads' patterns now, on the film strip's sequence (no gradient, no random numbers)."""
        model = self.trainer.model
        was_training = model.training
        patterns = frame_patterns(model.eval(), self.strip)
        model.train(was_training)
        if patterns is not None:
            self.conn.send(("frame", self.trainer.step, patterns, self.period))

    def send_news(self, force: bool = False) -> None:
        rows = self.trainer.history
        while self.sent_rows < len(rows):
            self.conn.send(("row", rows[self.sent_rows]))
            self.sent_rows += 1
            if self.sent_rows == len(rows) and rows[-1]["step"] == self.trainer.step:
                self.send_frame()
                if self.trainer.step > 0 and not self.trainer.done:  # at the end "done" brings the model
                    self.conn.send(("saved", self.trainer.step, self.seconds(), saved_checkpoint(self.trainer)))
        now = time.perf_counter()
        if force or now - self.last_progress >= PROGRESS_EVERY:
            self.conn.send(("progress", self.trainer.step, self.seconds(), torch.get_num_threads()))
            self.last_progress = now


class Killed(Exception):
    """The thread backend's kill (core.pool.backend.ThreadHandle): the loop ends at once, sending nothing."""


def train(conn, settings: RunConfig, threads: int, killed: Callable[[], bool] | None = None) -> None:
    """The worker's main function: train `settings` until done, stopped or diverged (see the module
    docstring for the messages). `killed`, checked between steps, ends it without a word (a worker
    in a thread has no process to kill; core.pool.backend.ThreadBackend)."""
    try:
        torch.set_num_threads(max(1, int(threads)))
        trainer = Trainer(*settings.configs())
        session = _Session(conn, trainer)
        conn.send(("started", os.getpid()))
        session.send_news(force=True)
        status = _loop(session, killed or _never)
        session.send_news(force=True)
        data = final_checkpoint(trainer) if status in (RunStatus.FINISHED, RunStatus.STOPPED) else None
        conn.send(("done", status, trainer.step, session.seconds(), data, info_of(data)))
    except (EOFError, BrokenPipeError, ConnectionResetError, Killed):
        return  # the server went away (nobody to report to), or the thread backend killed it
    except Exception as e:  # noqa: BLE001 -- any failure becomes one sentence for the student
        with suppress(OSError, EOFError):
            conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def _never() -> bool:
    return False


def _loop(session: _Session, killed: Callable[[], bool]) -> str:
    trainer = session.trainer
    while True:
        if killed():
            raise Killed
        session.read_commands()
        if session.keeps:
            session.send_kept()
        if session.stop:
            return RunStatus.STOPPED if trainer.step > 0 else RunStatus.CANCELLED
        if trainer.done:
            return RunStatus.FINISHED
        if session.t0 is None:
            session.t0 = time.perf_counter()
        trainer.run(1)
        session.send_news()
        if not math.isfinite(trainer.last_loss) or not math.isfinite(trainer.history[-1].get("loss_later_copies", 0.0)):
            # every step's training loss, not only the logged rows: NaN weights cannot be kept
            return RunStatus.DIVERGED
