"""Several seeds of the same Train-page settings, trained one after another in worker processes
(core.pool.runs), to see how much the drop step moves from seed to seed.

A SeedSeries (core.series.run_series.RunSeries) owns a background thread: it starts seed 1 in the pool,
waits for that run to end, keeps a summary of its curve (core.training.transition.describe_curve on the
logged history) and drops the model, then starts the next seed. The series uses its own owner name in
the pool, so it never ends the session's ordinary run (RunPool.start ends the owner's earlier runs) and
the pool ends it with the session all the same (the owner name starts with the session's).

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

from typing import TYPE_CHECKING

from core.series.run_series import RunSeries
from core.training.run_config import RunConfig
from core.training.transition import describe_curve

if TYPE_CHECKING:
    from core.pool.runs import LiveRun, RunPool

MIN_SEEDS, MAX_SEEDS = 3, 5
SEED_DEADLINE = 3600.0  # seconds a seed may take, its wait for a slot included


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


class SeedSeries(RunSeries):
    """n_seeds runs of `settings` with seeds settings.train.seed, settings.train.seed + 1, ..., one at a time."""

    name = "attention-lab-seeds"

    def __init__(self, pool: RunPool, settings: RunConfig, n_seeds: int, owner: str,
                 seed_deadline: float = SEED_DEADLINE):
        if not MIN_SEEDS <= n_seeds <= MAX_SEEDS:
            raise ValueError(f"Train between {MIN_SEEDS} and {MAX_SEEDS} seeds, got {n_seeds}.")
        settings.configs()  # ValueError (one sentence) for settings that cannot be trained
        self.settings, self.seed_deadline = settings, seed_deadline
        self.seeds = [settings.train.seed + i for i in range(n_seeds)]
        super().__init__(pool, [settings.with_settings(seed=s) for s in self.seeds], owner, seed_deadline)

    def row(self, run: LiveRun) -> dict:
        return summarize(run.settings.train.seed, run)

    def late_error(self, settings: RunConfig) -> str:
        return (f"Seed {settings.train.seed} had not ended {self.seed_deadline:g} s after it was started, so it was "
                "ended and the series stopped.")
