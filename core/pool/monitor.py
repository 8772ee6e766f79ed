"""The pool's monitor thread (core.pool.runs.RunPool's base class): it alone reads the workers'
Pipes, hands their rows to the LiveRuns, ends runs whose worker died, hung or lost its session, and
survives any exception in a round (it logs it and goes on)."""
from __future__ import annotations

import contextlib
import logging
import time
from multiprocessing.connection import wait

from core.model.checkpoints import CheckpointError, read_checkpoint
from core.pool.live_run import _Training, session_of
from core.pool.status import RunStatus
from core.training.timeline import keep_frame

log = logging.getLogger(__name__)

EXIT_GRACE = 5.0  # a worker whose Pipe closed, or that said "done", gets this long to exit before it is killed


class Monitor:
    """The monitor's rounds; RunPool holds the state they read (its lock, trainings, runs and slots)."""

    def _watch(self) -> None:
        while not self._closed.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 -- the monitor must outlive any one failure
                log.exception("The training monitor failed in one round; going on")
                time.sleep(self.tick)

    def _wait(self, conns: list) -> list:
        """The connections with something to read, at most `tick` seconds from now."""
        if not conns:
            time.sleep(self.tick)
            return []
        try:
            return wait(conns, timeout=self.tick)
        except (OSError, ValueError) as e:  # one was closed since the snapshot: the next round skips it
            log.info("A training connection closed while the monitor waited on it (%s); going on", e)
            return []

    def _tick(self) -> None:
        with self._lock:
            conns = {t.conn: t for t in self._trainings.values()
                     if t.conn is not None and t.eof_at is None and not t.conn.closed}
        inbox = []
        for conn in self._wait(list(conns)):
            messages, eof = _drain(conn)
            inbox.append((conns[conn], conn, [_decoded(m) for m in messages], eof))
        now = time.monotonic()
        kills = []
        with self._lock:
            for training, conn, messages, eof in inbox:
                for message in messages:
                    if training.conn is conn:
                        kills += self._handle(training, message)
                if eof and training.conn is conn:
                    training.eof_at = now
            kills += self._check_health(now)
            reap, self._reap = self._reap, []
        self._kill(kills)
        self._reap_gone(reap, now)
        self._end_orphans(now)
        self._admit()

    def _handle(self, training: _Training, message: tuple) -> list[tuple]:
        training.heard = time.monotonic()
        kind = message[0]
        if kind == "started":
            training.status = RunStatus.RUNNING
        elif kind == "row":
            training.rows.append(message[1])
        elif kind == "frame":
            training.frames, training.strip_period = keep_frame(training.frames, message[1], message[2]), message[3]
        elif kind == "progress":
            training.step, training.seconds, training.worker_threads = message[1:4]
        elif kind == "error":
            return self._drop(training, RunStatus.FAILED,
                              f"The training stopped with an error at step {training.step}: {message[1]}")
        elif kind == "kept":  # one follower pressed Stop: it leaves with the model of this step
            _, token, step, seconds, data, decoded = message
            run = training.keeps.pop(token, None)
            if run is not None and run in training.followers:
                training.followers.remove(run)
                if isinstance(decoded, CheckpointError):
                    self._finish(run, RunStatus.FAILED, str(decoded), step=step, seconds=seconds)
                else:
                    kept = RunStatus.STOPPED if data is not None else RunStatus.CANCELLED
                    self._finish(run, kept, data=data, decoded=decoded, step=step, seconds=seconds)
                if not training.followers:
                    return self._drop(training, RunStatus.CANCELLED)
                if self._slots.session_of(training.id) == session_of(run.owner):
                    self._slots.hand_over(training.id, session_of(training.followers[0].owner))
        elif kind == "done":
            _, status, training.step, training.seconds, data, decoded = message
            if isinstance(decoded, CheckpointError):
                return self._drop(training, RunStatus.FAILED, str(decoded))
            if status == RunStatus.FINISHED and data is not None and training.key is not None:
                self._store_finished(training.key, data, training.frozen(status=status))
            out = self._drop(training, status, data=data, decoded=decoded)
            self._reap += [(proc, conn, time.monotonic()) for proc, conn in out]  # it exits by itself
            return []
        return []

    def _check_health(self, now: float) -> list[tuple]:
        kills = []
        for training in [t for t in self._trainings.values() if t.proc is not None]:
            alive = training.proc.is_alive()
            if training.eof_at is not None or not alive:
                if alive and now - (training.eof_at or now) < EXIT_GRACE:
                    continue  # its Pipe closed: wait a moment for the process to end and give its exit code
                if not alive and training.eof_at is None and _pending(training.conn):
                    continue  # it ended after writing: read that first
                code = training.proc.exitcode
                how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
                failed = RunStatus.FAILED
                kills += self._drop(training, failed, f"The training process {how} at step {training.step}, before "
                                    "it could hand its model back. Nothing else in your session changed; press Train "
                                    "to try again.")
            elif now - training.heard > self.hang_seconds:
                kills += self._drop(training, RunStatus.FAILED, f"The training process sent nothing for "
                                    f"{self.hang_seconds:.0f} s at step {training.step}, so it was ended. Nothing else "
                                    "in your session changed; press Train to try again.")
        return kills

    def _reap_gone(self, reap: list[tuple], now: float) -> None:
        """Close ended workers' connections; kill any still alive EXIT_GRACE seconds after its end."""
        keep = []
        for proc, conn, since in reap:
            with contextlib.suppress(Exception):
                conn.close()
            with contextlib.suppress(Exception):
                if proc.is_alive():
                    if now - since > EXIT_GRACE:
                        proc.kill()
                    keep.append((proc, conn, since))
        if keep:
            with self._lock:
                self._reap += keep

    def _end_orphans(self, now: float) -> None:
        """End the runs of owners is_alive has not known for owner_grace seconds (asked outside the lock)."""
        if self.is_alive is None or now - self._last_owner_check < 1.0:
            return
        self._last_owner_check = now
        with self._lock:
            owners = {r.owner for r in self._runs.values()}
        gone = [o for o in owners if not self.is_alive(o)]
        kills = []
        with self._lock:
            for owner in owners:
                if owner not in gone:
                    self._gone_since.pop(owner, None)
                elif now - self._gone_since.setdefault(owner, now) >= self.owner_grace:
                    del self._gone_since[owner]
                    kills += [k for r in [r for r in self._runs.values() if r.owner == owner] for k in self._leave(r)]
            for owner in set(self._gone_since) - owners:
                del self._gone_since[owner]
        self._kill(kills)


def _drain(conn) -> tuple[list, bool]:
    """Every message a worker has sent so far, and whether its Pipe has closed."""
    messages = []
    try:
        while conn.poll():
            messages.append(conn.recv())
    except (EOFError, OSError, ValueError):
        return messages, True
    return messages, False


def _pending(conn) -> bool:
    try:
        return conn is not None and conn.poll()
    except (EOFError, OSError, ValueError):
        return False


def _decoded(message: tuple) -> tuple:
    """A "done" or "kept" message with its checkpoint read back (or the CheckpointError) appended."""
    if message[0] not in ("done", "kept"):
        return message
    data = message[-1]
    if data is None:
        return (*message, None)
    try:
        return (*message, read_checkpoint(data, name="The trained model"))
    except CheckpointError as e:
        return (*message, e)
