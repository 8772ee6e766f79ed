"""What the Train page lets a student choose, turned into the configs a Trainer takes, and how many
torch threads each running training gets."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

from core.model.config import MAX_LAYERS, ModelConfig
from core.model.markov import MarkovTask
from core.model.task import TaskConfig
from core.training.config import TrainConfig, with_settings
from core.training.interventions import check_interventions
from core.training.presets import DEFAULT_PRESET, get_preset

UI_MAX_LAYERS = min(4, MAX_LAYERS)
TASKS = ("repeat", "markov")  # the repeated-pattern task (core.model.task), Markov chains (core.model.markov)
# the fields the page reads itself (the rest set the model's, the task's or TrainConfig's field of the same name);
# the Markov task's own fields are read by _markov_configs
PAGE_ONLY = {"task", "shared_embedding", "n_states", "concentration"}
# on the Markov task the model and task come from core.training.markov (model_for), and the periods are unused
MARKOV_PAGE_ONLY = {"task", "shared_embedding", "period_min", "period_max", "n_layers", "bias", "smeared_keys",
                    "n_states", "concentration", "seq_len"}


@dataclass(frozen=True)
class TrainSettings:
    """Everything the Train page lets a student choose."""
    n_layers: int
    period_min: int
    period_max: int
    seq_len: int
    bias: bool
    lr: float
    batch_size: int
    steps: int
    seed: int
    shared_embedding: bool = True  # the default init (TrainConfig.embed_scale/embed_shared); False: plain
    hold: str | None = None  # training experiments (core.training.interventions): a head label ("1.2") or None
    knockout: str | None = None
    task: str = "repeat"  # or "markov": then seq_len, n_states and concentration make the task, the periods unused
    n_states: int = 3
    concentration: float = 1.0
    smeared_keys: bool = False  # Olsson et al.'s smeared keys (ModelConfig.smeared_keys), on the Markov task only

    @classmethod
    def defaults(cls, preset: str = DEFAULT_PRESET) -> TrainSettings:
        p = get_preset(preset)
        return cls(p.model.n_layers, p.task.period_min, p.task.period_max, p.task.seq_len, p.model.bias,
                   p.train.lr, p.train.batch_size, p.train.steps, p.train.seed)

    def configs(self, preset: str = DEFAULT_PRESET) -> tuple[ModelConfig, TaskConfig | MarkovTask, TrainConfig]:
        """The preset's configs with this page's choices; raises ValueError saying what to change.
        On the Markov task, core.training.markov's settings with this page's choices."""
        if not 0 <= self.n_layers <= UI_MAX_LAYERS:
            raise ValueError(f"Depth must be between 0 and {UI_MAX_LAYERS} blocks, got {self.n_layers}.")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}.")
        if self.task == "markov":
            return self._markov_configs()
        if self.smeared_keys:
            raise ValueError("Smeared keys are offered on the Markov-chain task only: the repeat task's readings "
                             "(its QK circuits) take each key from its own position.")
        if self.period_max < 2:
            raise ValueError(f"A period range of {self.period_min}–{self.period_max} repeats a single token: there is "
                             "no first copy to measure and no pattern to look up. Raise the upper end of the period "
                             "range to at least 2.")
        p = get_preset(preset)
        settings = {k: v for k, v in asdict(self).items() if k not in PAGE_ONLY}  # each to its config, by name
        model, task, train = with_settings(settings, p.model, p.task, p.train)
        task.validate(model.vocab_size)
        if not self.shared_embedding:
            train = replace(train, embed_scale=1.0, embed_shared=0.0)
        check_interventions(model, train)
        if getattr(train, "seq_len", 0):  # the preset trains on shorter sequences: keep that only if it fits
            fits = 2 * task.period_max <= train.seq_len < task.seq_len
            train = replace(train, seq_len=train.seq_len if fits else 0)
        train.validate()
        if self.steps < 1:
            raise ValueError("Train for at least 1 step.")
        return model, task, train

    def _markov_configs(self) -> tuple[ModelConfig, MarkovTask, TrainConfig]:
        from core.training.markov import MARKOV_TRAIN, model_for

        task = MarkovTask(n_states=self.n_states, concentration=self.concentration, seq_len=self.seq_len).validate()
        model = model_for(task, self.n_layers, self.bias, self.smeared_keys)
        settings = {k: v for k, v in asdict(self).items() if k not in MARKOV_PAGE_ONLY}  # the rest: TrainConfig's
        _, _, train = with_settings(settings, model, task, MARKOV_TRAIN)
        if self.shared_embedding:
            train = replace(train, embed_scale=TrainConfig.embed_scale, embed_shared=TrainConfig.embed_shared)
        check_interventions(model, train)
        train.validate()
        if self.steps < 1:
            raise ValueError("Train for at least 1 step.")
        return model, task, train

    def problem(self) -> str | None:
        """Why these settings cannot be trained (the configs' own message), or None."""
        try:
            self.configs()
        except ValueError as e:
            return str(e)
        return None

    def warnings(self) -> list[str]:
        """Settings that train but measure less than they seem to, each a sentence saying what to change."""
        if self.task != "repeat" or self.problem():
            return []
        out = []
        if self.period_min == 1:
            out.append("Sequences of period 1 repeat one token: every later target equals the current token, so "
                       "a model predicts them without looking anything up and they pull the later-copy loss down "
                       "without an induction head. Raise the lower end of the period range to 2 or more to "
                       "measure the lookup alone.")
        return out

    def label(self) -> str:
        if self.task == "markov":
            return (f"{self.n_layers} block{'s' if self.n_layers != 1 else ''}{', bias' if self.bias else ''}"
                    f"{', smeared keys' if self.smeared_keys else ''}, "
                    f"Markov chains of {self.n_states} states, Dirichlet {self.concentration:g}, length "
                    f"{self.seq_len}, seed {self.seed}")
        bias = ", bias" if self.bias else ""
        bias += "" if self.shared_embedding else ", plain init"
        bias += f", head {self.hold} held" if self.hold is not None else ""
        bias += f", head {self.knockout} knocked out" if self.knockout is not None else ""
        return (f"{self.n_layers} block{'s' if self.n_layers != 1 else ''}{bias}, periods "
                f"{self.period_min}–{self.period_max}, length {self.seq_len}, seed {self.seed}")


def machine_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def split_threads(running: int, cores: int | None = None) -> int:
    """Torch threads for each of `running` trainings sharing `cores` (default: this machine's): the
    cores split between them, at least 1 each. Two trainings with two threads each on two cores ran
    about 5 times slower per step than with one thread each."""
    cores = machine_cores() if cores is None else cores
    return max(1, cores // max(1, running))
