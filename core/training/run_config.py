"""RunConfig: one training run whole, the one training configuration the command line, the Train page, the
pool and the sweeps share. A run is its model (ModelConfig), its task (a core.model.tasks.Task: the repeat
task's TaskConfig or the Markov chains' MarkovTask), how it trains (TrainConfig), and what a sweep's run
measures beyond those (`every`, `stop_below`); `preset` names where the settings not given came from.

Every caller sets a run by flat named settings, routed in one place (RunConfig.of): a name goes to the config
that has a field of that name (core.training.config.with_settings: the model's, then the task's, then
TrainConfig's, so "seq_len" is the task's length), and the few names that are not a field are read here:

    task           "repeat" (the preset's configs) or "markov" (core.training.markov's model, task and training)
    init           "shared" (the enlarged initial embedding, TrainConfig's embed_scale and embed_shared) or
                   "plain" (embed_scale 1, embed_shared 0); shared_embedding=True/False says the same
    period         (period_min, period_max) at once

    run = RunConfig.of(n_layers=1, lr=3e-3, hold="1.2")          # ValueError naming a setting nothing has
    run = RunConfig.of(task="markov", n_states=4, seq_len=40)
    run.problem() or Trainer(*run.configs())                        # validate(): ValueError saying what to change
    run.label(); run.changes()                                      # RunConfig.of(**run.changes()) == run

Adding a training option is one TrainConfig field: every caller reaches it by its name. A sweep table keys
a run by run_id (core.sweeps.grid), which hashes the settings the first tables were written with (SWEEP_SETTINGS,
their old names) and any other setting only where it differs from the sweep's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from core.model.config import MAX_LAYERS, ModelConfig
from core.model.tasks import Task
from core.training.config import TrainConfig, with_settings
from core.training.interventions import check_interventions
from core.training.presets import DEFAULT_PRESET, get_preset

UI_MAX_LAYERS = min(4, MAX_LAYERS)  # the Train page's deepest model
KINDS = ("repeat", "markov")  # the repeated-pattern task (core.model.task), Markov chains (core.model.markov)
INITS = {"shared": {"embed_scale": TrainConfig.embed_scale, "embed_shared": TrainConfig.embed_shared},
         "plain": {"embed_scale": 1.0, "embed_shared": 0.0}}
RUN_FIELDS = ("every", "stop_below")  # a run's own settings beyond its three configs
NOT_FIELDS = ("task", "init", "shared_embedding", "period", "preset")  # the names RunConfig.of reads itself
PARTS = ("model", "task", "train")


def _base(kind: str, preset: str) -> tuple[ModelConfig, Task, TrainConfig]:
    """The configs a run of task `kind` starts from: the preset's, or the Markov-chain runs' own."""
    if kind == "markov":
        from core.training.markov import MARKOV_TASK, MARKOV_TRAIN, model_for

        return model_for(MARKOV_TASK, get_preset(preset).model.n_layers), MARKOV_TASK, MARKOV_TRAIN
    p = get_preset(preset)
    return p.model, p.task, p.train


def _init(settings: dict) -> dict:
    """The TrainConfig fields `init` or `shared_embedding` (taken out of `settings`) set, or {} without them."""
    if "shared_embedding" in settings:
        shared = settings.pop("shared_embedding")
        settings.setdefault("init", "shared" if shared else "plain")
    if "init" not in settings:
        return {}
    init = settings.pop("init")
    if init not in INITS:
        raise ValueError(f"init must be 'shared' or 'plain', got {init!r}.")
    return INITS[init]


@dataclass(frozen=True)
class RunConfig:
    """One training run: see the module's docstring. `every`: steps between a sweep run's measurements of the
    later-copy loss (0: not a sweep run; it logs as train.log_every says); `stop_below`: a sweep run ends at its
    first measurement with a later-copy loss below this (0: it trains all its steps)."""
    model: ModelConfig
    task: Task
    train: TrainConfig
    every: int = 0
    stop_below: float = 0.0
    preset: str = DEFAULT_PRESET

    @classmethod
    def of(cls, preset: str = DEFAULT_PRESET, **settings) -> RunConfig:
        """The run `settings` describe (each routed by its name; the rest the preset's, or on the Markov task
        the Markov runs' own). ValueError naming a setting no config has, or a value a config refuses."""
        settings = dict(settings)
        kind = settings.pop("task", "repeat")
        if kind not in KINDS:
            raise ValueError(f"task must be one of {', '.join(KINDS)}, got {kind!r}.")
        if "period" in settings:
            settings["period_min"], settings["period_max"] = tuple(settings.pop("period"))
        init = _init(settings)
        own = {k: settings.pop(k) for k in RUN_FIELDS if k in settings}
        model, task, train = _base(kind, preset)
        model, task, train = with_settings(settings, model, task, train)
        if kind == "markov" and "vocab_size" not in settings:  # its states are the model's vocabulary
            if isinstance(task.n_states, bool) or not isinstance(task.n_states, int) or task.n_states < 2:
                task.validate()  # no model has that vocabulary: the task's own message says what to change
            model = replace(model, vocab_size=task.n_states)
        if init:
            train = replace(train, **init)
        if train.seq_len:  # the preset trains on shorter sequences: kept only where they fit the task
            fits = hasattr(task, "period_max") and 2 * task.period_max <= train.seq_len < task.seq_len
            train = replace(train, seq_len=train.seq_len if fits else 0)
        return cls(model, task, train, preset=preset, **own)

    @property
    def kind(self) -> str:
        """The task's name: "repeat" or "markov"."""
        return self.task.name

    @property
    def init(self) -> str | None:
        """"shared" or "plain" when the initial embedding is one of those, else None."""
        return next((k for k, v in INITS.items() if (self.train.embed_scale, self.train.embed_shared)
                     == (v["embed_scale"], v["embed_shared"])), None)

    def get(self, name: str):
        """The setting `name` as RunConfig.of takes it (a field of the first config that has one, or `task`:
        the kind, `init`, `every`, `stop_below`, `preset`)."""
        if name == "task":
            return self.kind
        if name in ("init", *RUN_FIELDS, "preset"):
            return getattr(self, name)
        for part in PARTS:
            config = getattr(self, part)
            if name in {f.name for f in fields(config)}:
                return getattr(config, name)
        raise ValueError(f"no model, task or training setting is called {name!r}.")

    def __getattr__(self, name: str):
        """A setting read by its flat name, as RunConfig.get reads it (run.seed, run.batch_size, run.seq_len: the
        task's); only names that are not an attribute of the run itself get here."""
        if name.startswith("_") or name in (*PARTS, *RUN_FIELDS, "preset"):
            raise AttributeError(name)
        try:
            return self.get(name)
        except ValueError:
            raise AttributeError(f"a RunConfig has no attribute or setting {name!r}") from None

    def with_settings(self, **settings) -> RunConfig:
        """This run with `settings` changed (names as RunConfig.of takes them)."""
        return RunConfig.of(**{"preset": self.preset, **self.changes(), **settings})

    def changes(self) -> dict:
        """The flat settings that make this run from its preset (RunConfig.of(**changes) == self): its task's
        name, then every setting that differs from that task's defaults, by the name RunConfig.of takes."""
        base = RunConfig.of(self.preset, task=self.kind)
        out: dict = {"task": self.kind}
        if self.preset != DEFAULT_PRESET:
            out["preset"] = self.preset
        seen = set()
        for part in PARTS:
            mine, theirs = getattr(self, part), getattr(base, part)
            for f in fields(mine):
                if f.name in seen or (part == "train" and f.name == "seq_len"):  # a name the task has first
                    continue
                seen.add(f.name)
                if f.name in ("embed_scale", "embed_shared") and self.init is not None:
                    continue
                if f.name == "vocab_size" and self.kind == "markov" and mine.vocab_size == self.task.n_states:
                    continue
                if getattr(mine, f.name) != getattr(theirs, f.name):
                    out[f.name] = getattr(mine, f.name)
        if self.init is not None and self.init != base.init:
            out["init"] = self.init
        out.update({k: getattr(self, k) for k in RUN_FIELDS if getattr(self, k) != getattr(base, k)})
        return out

    def validate(self, min_steps: int = 1) -> RunConfig:
        """Raise ValueError saying what to change if this run cannot be trained; else the run. `min_steps`: 0
        lets a run of no steps through (the command line writes the initial model so)."""
        model, task, train = self.model, self.task, self.train
        if self.kind == "repeat":
            if model.smeared_keys:
                raise ValueError("Smeared keys are offered on the Markov-chain task only: the repeat task's readings "
                                 "(its QK circuits) take each key from its own position.")
            if task.period_max < 2:
                raise ValueError(f"A period range of {task.period_min}–{task.period_max} repeats a single token: "
                                 "there is no first copy to measure and no pattern to look up. Raise the upper end "
                                 "of the period range to at least 2.")
        task.validate(model.vocab_size)
        train.validate()
        check_interventions(model, train)
        if train.steps < min_steps:
            raise ValueError("Train for at least 1 step.")
        if self.every < 0:
            raise ValueError(f"every must be 0 (not a sweep run) or a number of steps, got {self.every}.")
        if not self.stop_below >= 0:
            raise ValueError(f"stop_below must be 0 (never stop) or a loss in nats above 0, got {self.stop_below}.")
        return self

    def configs(self) -> tuple[ModelConfig, Task, TrainConfig]:
        """(model, task, train) for a Trainer; raises ValueError saying what to change."""
        self.validate()
        return self.model, self.task, self.train

    def problem(self) -> str | None:
        """Why this run cannot be trained (validate's message), or None."""
        try:
            self.validate()
        except ValueError as e:
            return str(e)
        return None

    def warnings(self) -> list[str]:
        """Settings that train but measure less than they seem to, each a sentence saying what to change."""
        if self.kind != "repeat" or self.problem():
            return []
        out = []
        if self.task.period_min == 1:
            out.append("Sequences of period 1 repeat one token: every later target equals the current token, so "
                       "a model predicts them without looking anything up and they pull the later-copy loss down "
                       "without an induction head. Raise the lower end of the period range to 2 or more to "
                       "measure the lookup alone.")
        return out

    def label(self) -> str:
        """The run in a few words, as the model picker and the Train page name it."""
        m, t, tr = self.model, self.task, self.train
        blocks = f"{m.n_layers} block{'s' if m.n_layers != 1 else ''}{', bias' if m.bias else ''}"
        if self.kind == "markov":
            return (f"{blocks}{', smeared keys' if m.smeared_keys else ''}, Markov chains of {t.n_states} states, "
                    f"Dirichlet {t.concentration:g}, length {t.seq_len}, seed {tr.seed}")
        blocks += ", plain init" if self.init == "plain" else ""
        blocks += f", head {tr.hold} held" if tr.hold is not None else ""
        blocks += f", head {tr.clamp} clamped" if tr.clamp is not None else ""
        blocks += f", head {tr.knockout} knocked out" if tr.knockout is not None else ""
        vocab = RunConfig.of(self.preset).model.vocab_size
        blocks += f", vocabulary {m.vocab_size}" if m.vocab_size != vocab else ""
        return f"{blocks}, periods {t.period_min}–{t.period_max}, length {t.seq_len}, seed {tr.seed}"
