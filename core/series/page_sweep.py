"""A small sweep a student starts on the Laws of the drop page: one setting at 2-3 values times
2-3 seeds, trained one run after another through the server's training pool (core.pool.runs.RunPool, the
Train page's slots and line), and the finished runs' drop steps read as one law of core.laws.drop.

The cap (MAX_RUNS runs of at most MAX_STEPS steps) is there because the app's machine is shared: every
student's trainings take turns on the same few slots (ATTENTION_LAB_MAX_TRAININGS, 2 by default), so a
sweep of 6 runs holds one of them for a few minutes, and the sweeps of hundreds of runs belong to
`python -m core.sweep`. MAX_STEPS is where the shipped tables' learning rate stops being constant: they
train 600 steps and hold the rate for the first 300 (TrainConfig.decay_steps), and a page run keeps it
constant, so up to step 300 it trains as the table's run of the same setting and seed does (their drop
steps agree, or differ by one log step: see below).

Each run logs every LOG_EVERY steps (the Train page's runs: 25), so a drop step here is a multiple of 10,
as in the tables. The drop step is core.model.drop's, read off the logged rows (core.training.live.drop_step):
the first logged step whose later-copy loss is below ln V / 2. A logged row measures the first LOG_SEQS
(32) sequences of the fixed evaluation batch, the tables' runs all of it (128), so the two can differ by a log
step where the loss crosses the line slowly.

    specs = sweep_settings("batch_size", [16, 32, 64], seeds=2, steps=300)     # ValueError: what to change
    sweep = PageSweep(pool, specs, "batch_size", owner=f"{owner}|sweep").start()
    sweep.done, sweep.queued, sweep.current        # progress; sweep.cancel() ends it
    result = law_result(sweep.results, "batch_size")  # a core.laws.drop.LawResult: sentences, chart_frames
"""
from __future__ import annotations

from core.laws import drop as laws
from core.laws.drop import LAWS, LawResult
from core.laws.stats import Point, fit_points
from core.model.drop import drop_threshold
from core.pool.status import RunStatus
from core.series.run_series import RunSeries
from core.training import live
from core.training.config import LOG_SEQS, TrainConfig
from core.training.run_config import RunConfig

CHOICES = {  # the setting varied -> the values a student may pick (the shipped tables' own)
    "batch_size": (8, 16, 32, 64),
    "seq_len": (64, 96, 144),
    "vocab_size": (32, 64, 128),
}
NAMES = {"batch_size": "batch size B", "seq_len": "sequence length C", "vocab_size": "vocabulary size V"}
LAW_OF = {"batch_size": "batch", "seq_len": "seqlen", "vocab_size": "vocab"}  # its law in core.laws.drop.LAWS
MIN_VALUES, MAX_VALUES = 2, 3  # a slope needs two points
MIN_SEEDS, MAX_SEEDS = 2, 3  # a point needs two seeds for a spread
MAX_RUNS = 6
MIN_STEPS, MAX_STEPS = 20, 300
LOG_EVERY = 10
RUN_DEADLINE = 1800.0  # seconds one run may take, its wait for a slot included


# what a page sweep's run sets beyond the Train page's defaults: it logs every LOG_EVERY steps and holds the
# learning rate constant, as the tables' runs hold it for their first MAX_STEPS steps
SWEEP_SETTINGS = {"log_every": LOG_EVERY, "decay_steps": 0}


def sweep_settings(setting: str, values, seeds: int, steps: int) -> list[RunConfig]:
    """The runs of a page sweep: `setting` at each of `values`, seeds 0 .. seeds - 1 (the tables' first seeds),
    everything else the default preset's. Ordered seed by seed, so the first len(values) runs give one seed at
    every value. ValueError says what to change when the sweep is over the cap or a run cannot be trained."""
    if setting not in CHOICES:
        raise ValueError(f"A page sweep varies one of {', '.join(CHOICES)}, not {setting!r}.")
    name = NAMES[setting]
    values = sorted({int(v) for v in values})
    odd = [v for v in values if v not in CHOICES[setting]]
    if odd:
        raise ValueError(f"{name} takes the values {', '.join(map(str, CHOICES[setting]))} here, not "
                         f"{', '.join(map(str, odd))}.")
    if not MIN_VALUES <= len(values) <= MAX_VALUES:
        raise ValueError(f"Pick {MIN_VALUES} or {MAX_VALUES} values of {name} (a slope needs two), got "
                         f"{len(values)}.")
    if not MIN_SEEDS <= seeds <= MAX_SEEDS:
        raise ValueError(f"Train {MIN_SEEDS} or {MAX_SEEDS} seeds a value, got {seeds}.")
    if len(values) * seeds > MAX_RUNS:
        raise ValueError(f"{len(values)} values × {seeds} seeds is {len(values) * seeds} runs; a sweep on this "
                         f"page trains at most {MAX_RUNS} (the machine is shared): drop a value or a seed.")
    if not MIN_STEPS <= steps <= MAX_STEPS:
        raise ValueError(f"A page sweep's runs train {MIN_STEPS} to {MAX_STEPS} steps, got {steps}.")
    out = []
    for s in range(seeds):
        for v in values:
            try:
                spec = RunConfig.of(**SWEEP_SETTINGS, **{setting: v}, seed=s, steps=int(steps))
                problem = spec.problem()
            except ValueError as e:
                problem = str(e)
            if problem:
                raise ValueError(f"{name} {v} cannot be trained: {problem}")
            out.append(spec)
    return out


def summarize(run, setting: str) -> dict:
    """One ended run as a row: value (of the varied setting), seed, status, steps_run (its last step), drop_step
    (None: not below ln V / 2 at any logged step), final_loss_later, error, its curve [(step, loss)], the drop
    threshold ln V / 2, and shared (core.pool.runs: "finished" when the server had trained it already)."""
    settings = run.settings
    rows = [r for r in run.history() if isinstance(r.get("loss_later_copies"), (int, float))]
    return {"value": settings.get(setting), "seed": settings.train.seed, "status": str(run.status),
            "steps_run": int(run.step), "drop_step": live.drop_step(rows, run.model_cfg.vocab_size),
            "final_loss_later": float(rows[-1]["loss_later_copies"]) if rows else None, "error": run.error,
            "curve": [(int(r["step"]), float(r["loss_later_copies"])) for r in rows],
            "threshold": drop_threshold(run.model_cfg.vocab_size), "shared": run.shared}


def points(results: list[dict]) -> tuple[Point, ...]:
    """The finished runs (status finished) as core.laws.stats Points, one per value, seeds in order; a run
    that never dropped counts as later than its steps, as in the tables."""
    done = [r for r in results if r["status"] == RunStatus.FINISHED]
    out = []
    for x in sorted({r["value"] for r in done}):
        runs = sorted((r for r in done if r["value"] == x), key=lambda r: r["seed"])
        out.append(Point(float(x), tuple(r["seed"] for r in runs),
                         tuple(None if r["drop_step"] is None else float(r["drop_step"]) for r in runs),
                         max(r["steps_run"] for r in runs)))
    return tuple(out)


def law_result(results: list[dict], setting: str) -> LawResult | None:
    """The finished runs read as the law of `setting` (core.laws.drop.LAWS), fitted as the shipped tables are
    (fit_points: medians, log-log, seeds resampled), over the values with at least core.laws.stats.MIN_SEEDS
    finished seeds (a stopped sweep's values with one are left out: one seed has no spread to resample);
    None when no value has that many."""
    pts = tuple(p for p in points(results) if p.n >= laws.MIN_SEEDS)
    if not pts:
        return None
    return LawResult(LAWS[LAW_OF[setting]], pts, fit_points(pts), "")


def same_as_table(results: list[dict], setting: str, path=None) -> tuple[int, list[tuple], int]:
    """(compared, differ, neither): how many finished runs have a run of the same value and seed in the shipped
    table (checkpoints/laws/<law>.csv), those whose drop step is not the table run's, as (value, seed, theirs,
    yours), and how many agree because neither dropped. The table's drop step is cut at the page run's steps
    (a table drop after them is a page run that never dropped: None). (0, [], 0) when the table is not
    installed or has none of these runs."""
    path = LAWS[LAW_OF[setting]].path if path is None else path
    try:
        table = laws.read_table(path)
    except (OSError, ValueError):
        return 0, [], 0
    compared, differ, neither = 0, [], 0
    for r in results:
        if r["status"] != RunStatus.FINISHED or setting not in table.columns:
            continue
        row = table[(table[setting] == r["value"]) & (table["seed"] == r["seed"])]
        if row.empty:
            continue
        theirs = row["drop_step"].iloc[0]
        theirs = None if theirs != theirs or theirs > r["steps_run"] else int(theirs)  # NaN: never dropped
        compared += 1
        if theirs != r["drop_step"]:
            differ.append((r["value"], r["seed"], theirs, r["drop_step"]))
        elif theirs is None:
            neither += 1
    return compared, differ, neither


def table_code(path) -> str | None:
    """The code version (core.pool.live_run.code_version) of a shipped table's rows; None when it cannot be
    read or its rows name more than one."""
    try:
        codes = laws.read_table(path)["code"].dropna().unique()
    except (OSError, ValueError, KeyError):
        return None
    return str(codes[0]) if len(codes) == 1 else None


def _steps_of(results: list[dict]) -> str:
    """The finished runs' length: "300", or "200-300" when they differ."""
    steps = sorted({r["steps_run"] for r in results if r["status"] == RunStatus.FINISHED})
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"


def _step(step: int | None) -> str:
    return "none" if step is None else str(step)


def sentences(results: list[dict], setting: str, result: LawResult | None, path=None) -> list[str]:
    """What the page says about an ended page sweep (`result`: law_result of its runs): core.laws.drop.sentences
    of its law when two values or more have their seeds, else what is missing; then how its runs compare with
    the shipped table's runs of the same seeds, and how many the server had trained already."""
    from core.pool.live_run import code_version

    fitted = {p.x for p in result.points} if result is not None else set()
    if len(fitted) >= 2:
        out = laws.sentences(result)
    else:
        out = [f"Too few finished runs for a slope: it needs at least {laws.MIN_SEEDS} seeds at each of "
               f"{MIN_VALUES} values, and these runs have that at {len(fitted)} of them."]
    left = sorted({r["value"] for r in results if r["status"] == RunStatus.FINISHED} - {int(x) for x in fitted})
    if left and len(fitted) >= 2:
        out.append(f"Left out of the fit, with fewer than {laws.MIN_SEEDS} finished seeds: {NAMES[setting]} "
                   f"{', '.join(map(str, left))} (in the table above).")
    compared, differ, neither = same_as_table(results, setting, path)
    if compared:
        name, full = LAWS[LAW_OF[setting]].name, TrainConfig().eval_size
        same = compared - len(differ) - neither
        parts = [f"{same} dropped at the same logged step"] if same else []
        parts += [f"{neither} did not drop within {_steps_of(results)} steps, nor did the table's"] if neither else []
        text = (f"{compared - len(differ)} of your {compared} finished runs agree with the run of the same "
                f"{NAMES[setting]} and seed in checkpoints/laws/{name}.csv (the same settings, seed and learning "
                f"rate up to step {MAX_STEPS}; its drop steps are read on {full} evaluation sequences, yours on the "
                f"Train page's {LOG_SEQS})" + (": " + " and ".join(parts) if parts else ""))
        if differ:
            text += ("; " + "; ".join(f"{NAMES[setting]} {v}, seed {s}: step {_step(yours)} here, {_step(theirs)} there"
                                      for v, s, theirs, yours in differ)
                     + ". Where the loss crosses ln V / 2 slowly, the two measurements can land a log step apart.")
        out.append(text + ("." if not differ else ""))
        theirs = table_code(path if path is not None else LAWS[LAW_OF[setting]].path)
        if theirs is not None and theirs != code_version():
            out.append(f"The table's runs were trained by another version of the training code (its rows' code "
                       f"{theirs}, this server's {code_version()}: the model, the training or the attention kernel "
                       "changed since), so its runs need not be yours bit for bit, and a drop step can move by more "
                       "than a log step.")
    shared = sum(r.get("shared") == "finished" for r in results)
    if shared:
        out.append(f"{shared} of your runs had already been trained on this server (the same settings, seed and "
                   "code), so they came back at once: the very numbers your own training would give.")
    return out


class PageSweep(RunSeries):
    """`specs` trained one after another in `pool` under `owner` (a name of the session's own: RunPool.start
    ends an owner's earlier runs, so it must not be the Train page's). The pool gives a session one slot, so
    the sweep waits while the session's Train-page run trains, and takes its turn in the server's line; a run
    whose settings already trained on this server comes back at once, as on the Train page. Models are not
    kept, only each run's summary (summarize). Stop leaves the run in progress out; a run that did not
    finish (failed, diverged, ended with the session) ends the sweep."""

    name = "attention-lab-page-sweep"
    keeps_stopped = False

    def __init__(self, pool, specs: list[RunConfig], setting: str, owner: str,
                 run_deadline: float = RUN_DEADLINE):
        if not specs or len(specs) > MAX_RUNS:
            raise ValueError(f"A page sweep trains 1 to {MAX_RUNS} runs, got {len(specs)}.")
        super().__init__(pool, specs, owner, run_deadline)
        self.specs, self.setting, self.run_deadline = self.runs, setting, run_deadline
        self._outcome = None

    @property
    def queued(self) -> int:
        """Runs not started yet (the one in progress not counted)."""
        return 0 if self.cancelled.is_set() else len(self.specs) - self.done - (self.current is not None)

    def row(self, run) -> dict:
        return summarize(run, self.setting)

    def late_error(self, settings) -> str:
        return (f"The run had not ended {self.run_deadline:g} s after it was started, so it was ended and the "
                "sweep stopped.")

    def goes_on(self, run) -> bool:
        return run.status == RunStatus.FINISHED

    def law(self) -> LawResult | None:
        return law_result(self.results, self.setting)

    def outcome(self) -> tuple[LawResult | None, list[str]]:
        """(law, sentences) of the ended sweep, computed once (the page draws them on every rerun)."""
        if self.active:
            raise RuntimeError("the sweep is still training.")
        if self._outcome is None:
            law = self.law()
            self._outcome = law, sentences(self.results, self.setting, law)
        return self._outcome
