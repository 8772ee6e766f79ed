"""Several seeds of the same Train-page settings, trained one after another in worker processes
(core.pool.runs), to see how much the drop step moves from seed to seed.

A SeedSeries owns a background thread: it starts seed 1 in the pool, waits for that run to end,
keeps a summary of its curve (core.training.transition.describe_curve on the logged history) and drops the
model, then starts the next seed. The series uses its own owner name in the pool, so it never ends
the session's ordinary run (RunPool.start ends the owner's earlier runs) and the pool ends it with
the session all the same (the owner name starts with the session's).

    series = SeedSeries(pool, settings, n_seeds=3, owner=f"{owner}|seeds").start()
    series.results      # one dict per finished seed, in order
    series.current      # the LiveRun in progress, or None
    series.cancel()     # ends the run in progress; no further seed starts

Every wait has a deadline: a seed that has not ended `seed_deadline` seconds after it was started
(waiting in line included) is ended, its row says so, and no further seed starts. The series runs
under its session's training slot (core.pool.slots: one per session), so while the session's own run
trains its seeds wait; seeds whose settings already trained on this server come back at once.
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace

from core.pool.runs import LiveRun, RunPool
from core.pool.status import RunStatus
from core.training.train_settings import TrainSettings
from core.training.transition import describe_curve

MIN_SEEDS, MAX_SEEDS = 3, 5
SEED_DEADLINE = 3600.0  # seconds a seed may take, its wait for a slot included
POLL = 0.5  # seconds between checks while a seed trains


def summarize(seed: int, run: LiveRun) -> dict:
    """One ended run as a row: seed, status, steps, drop_step (first logged step with later-copy loss
    below ln V / 2), drop_start, drop_end (last step >= 3 nats, first < 1 nat), final_loss_later, error."""
    rows = [r for r in run.history() if isinstance(r.get("loss_later_copies"), float)]
    out = {"seed": seed, "status": run.status, "steps": run.step, "drop_step": None, "drop_start": None,
           "drop_end": None, "final_loss_later": None, "error": run.error}
    if rows:
        curve = describe_curve([r["step"] for r in rows], [r["loss_later_copies"] for r in rows],
                               run.model_cfg.vocab_size)
        out.update(drop_step=curve["drop_step"], drop_start=curve["drop_start"], drop_end=curve["drop_end"],
                   final_loss_later=curve["final_loss_later"])
    return out


class SeedSeries:
    """n_seeds runs of `settings` with seeds settings.seed, settings.seed + 1, ..., one at a time."""

    def __init__(self, pool: RunPool, settings: TrainSettings, n_seeds: int, owner: str,
                 seed_deadline: float = SEED_DEADLINE):
        if not MIN_SEEDS <= n_seeds <= MAX_SEEDS:
            raise ValueError(f"Train between {MIN_SEEDS} and {MAX_SEEDS} seeds, got {n_seeds}.")
        settings.configs()  # ValueError (one sentence) for settings that cannot be trained
        self.pool, self.settings, self.owner, self.seed_deadline = pool, settings, owner, seed_deadline
        self.seeds = [settings.seed + i for i in range(n_seeds)]
        self.results: list[dict] = []
        self.current: LiveRun | None = None
        self.cancelled = threading.Event()
        self._thread = threading.Thread(target=self._train_all, name="attention-lab-seeds", daemon=True)

    def start(self) -> SeedSeries:
        self._thread.start()
        return self

    @property
    def active(self) -> bool:
        return self._thread.is_alive()

    @property
    def done(self) -> int:
        return len(self.results)

    def cancel(self) -> None:
        """End the run in progress (its model is not kept) and start no further seed."""
        self.cancelled.set()
        run = self.current
        if run is not None:
            self.pool.discard(run)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every seed has ended (or the series was cancelled); True if it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _train_all(self) -> None:
        for seed in self.seeds:
            if self.cancelled.is_set():
                break
            run = self.pool.start(replace(self.settings, seed=seed), self.owner)
            self.current = run
            if self.cancelled.is_set():  # cancel() came between the check above and the start
                self.pool.discard(run)
            late = not self._wait_for(run)
            row = summarize(seed, run)
            if late:
                row.update(status="timed out", error=f"Seed {seed} had not ended {self.seed_deadline:g} s after "
                                                     "it was started, so it was ended and the series stopped.")
            self.results.append(row)
            run.result = None  # the series keeps curves, not models
            if late or run.status == RunStatus.CANCELLED:  # cancelled here, or the pool ended it with the session
                break
        self.current = None

    def _wait_for(self, run: LiveRun) -> bool:
        """Wait for the run to end, at most seed_deadline seconds; False if it had to be ended."""
        deadline = time.monotonic() + self.seed_deadline
        while not run.ended.wait(max(0.0, min(POLL, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                self.pool.discard(run)
                run.ended.wait(POLL)
                return False
        return True
