"""What one run of a sweep (core.sweeps.run) trains: a RunSpec, the configs it makes, its run id, and
the grid of RunSpecs that `python -m core.sweep`'s flags describe.

    specs = grid({"n_layers": [1, 2], "seed": [0, 1, 2]})     # every other field: the preset's
    specs[0].configs()                                           # (ModelConfig, TaskConfig, TrainConfig)
    specs[0].run_id()                                            # settings + seed + code version
"""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import asdict, dataclass, fields, replace

from core.training.config import with_settings
from core.training.interventions import check_interventions
from core.training.presets import DEFAULT_PRESET, get_preset

NO_LOG = 10 ** 9  # log_every of a sweep run: its curve is the later-copy loss every `every` steps, nothing else


@dataclass(frozen=True)
class RunSpec:
    """One training of a sweep: the preset's configs with these fields changed. `init`: "shared" (the
    default initial embedding, TrainConfig.embed_scale/embed_shared) or "plain"; `hold` (a block-1 head's
    pattern held on the previous position: the hold, the counterpart of Singh et al.'s one-head
    opto_prev_token_heads), `clamp` (a block-2 head's pattern clamped to the ideal induction pattern: the
    induction clamp, their opto_induction_heads) and `knockout` are head labels, block.head counted from 1 as
    `python -m core.train` takes them, or "none"; `decay_steps`: TrainConfig's (the last decay_steps fall
    linearly to a tenth of lr; 0: the rate is constant throughout); `every`: steps between measurements
    of the later-copy loss (the curve the drop step is read from); `stop_below`: the run ends at the first
    measurement with a later-copy loss below this (0: it trains all its steps), so a long cap costs only
    what a run needs to get there."""
    n_layers: int
    period_min: int
    period_max: int
    seq_len: int
    vocab_size: int
    batch_size: int
    lr: float
    warmup_steps: int
    decay_steps: int
    init: str
    hold: str  # a head label ("1.2") or "none"
    clamp: str  # a head label ("2.1") or "none"
    knockout: str  # a head label ("2.1") or "none"
    steps: int
    every: int
    stop_below: float
    seed: int
    preset: str = DEFAULT_PRESET

    @classmethod
    def defaults(cls, preset: str = DEFAULT_PRESET, **changes) -> RunSpec:
        p = get_preset(preset)
        spec = cls(p.model.n_layers, p.task.period_min, p.task.period_max, p.task.seq_len, p.model.vocab_size,
                   p.train.batch_size, p.train.lr, p.train.warmup_steps, p.train.decay_steps, "shared", "none",
                   "none", "none", p.train.steps, 10, 0.0, p.train.seed, preset)
        return replace(spec, **changes)

    def configs(self):
        """(ModelConfig, TaskConfig, TrainConfig); raises ValueError saying what to change."""
        p = get_preset(self.preset)
        if self.init not in ("shared", "plain"):
            raise ValueError(f"init must be 'shared' or 'plain', got {self.init!r}.")
        if self.every < 1 or self.steps < 1:
            raise ValueError("steps and every must be at least 1.")
        if not self.stop_below >= 0:
            raise ValueError(f"stop_below must be 0 (never stop) or a loss in nats above 0, got {self.stop_below}.")
        settings = {k: v for k, v in asdict(self).items() if k not in SWEEP_ONLY}
        model, task, train = with_settings(settings, p.model, p.task, replace(p.train, log_every=NO_LOG))
        task.validate(model.vocab_size)
        train.validate()
        if self.init == "plain":
            train = replace(train, embed_scale=1.0, embed_shared=0.0)
        if train.seq_len:  # as core.training.train_settings: the preset's shorter sequences only where they fit
            fits = 2 * task.period_max <= train.seq_len < task.seq_len
            train = replace(train, seq_len=train.seq_len if fits else 0)
        check_interventions(model, train)
        return model, task, train.validate()

    def run_id(self, code: str) -> str:
        """The run's id in a results table: a hash of every field and `code` (the code version). A field added
        after tables were shipped (ADDED) is left out while it is off, so those tables' ids stay what they were."""
        fields = {k: v for k, v in asdict(self).items() if ADDED.get(k, object()) != v}
        return hashlib.sha256(repr((sorted(fields.items()), code)).encode()).hexdigest()[:16]


SETTINGS = [f.name for f in fields(RunSpec)]  # the table's settings columns, in this order
SWEEP_ONLY = {"init", "every", "stop_below", "preset"}  # the fields the run reads itself; the rest set a config
# settings added after the first tables were written, with the value those tables ran
ADDED = {"clamp": "none", "decay_steps": 300, "stop_below": 0.0}


def grid(values: dict[str, list], preset: str = DEFAULT_PRESET) -> list[RunSpec]:
    """Every combination of `values` (field -> the values it takes; fields not named keep the preset's),
    seeds varying fastest. A key naming several fields with commas ("period_min, period_max, seq_len")
    takes tuples that set them together; "period" is short for "period_min, period_max". Each spec is
    checked (ValueError names the bad one)."""
    values = dict(values)
    if "period" in values:
        values["period_min, period_max"] = values.pop("period")
    joint = {key: [n.strip() for n in key.split(",")] for key in values}
    unknown = {n for names in joint.values() for n in names} - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown sweep fields: {', '.join(sorted(unknown))}.")
    named = [n for names in joint.values() for n in names]
    if len(named) != len(set(named)):
        raise ValueError(f"a field is given twice: {', '.join(sorted({n for n in named if named.count(n) > 1}))}.")
    for key, names in joint.items():
        if len(names) > 1 and any(len(tuple(v)) != len(names) for v in values[key]):
            raise ValueError(f"each value of {key!r} must give {len(names)} numbers, one per field.")
    keys = sorted(values, key=lambda k: min(SETTINGS.index(n) for n in joint[k]))
    base = RunSpec.defaults(preset)
    specs = []
    for combo in itertools.product(*(values[k] for k in keys)):
        changes = {}
        for key, value in zip(keys, combo):
            names = joint[key]
            changes.update(zip(names, tuple(value)) if len(names) > 1 else [(names[0], value)])
        specs.append(replace(base, **changes))
    for spec in specs:
        try:
            spec.configs()
        except ValueError as e:
            raise ValueError(f"{e} (run {label(spec)})") from None
    return specs


def label(spec: RunSpec) -> str:
    base = RunSpec.defaults(spec.preset)
    changed = [f"{n}={getattr(spec, n)}" for n in SETTINGS if n != "seed" and getattr(spec, n) != getattr(base, n)]
    return ", ".join(changed + [f"seed={spec.seed}"])


def int_list(text: str) -> list[int]:
    """ "1,2" -> [1, 2]; "0-9" -> [0, ..., 9]; "0-3,7" -> [0, 1, 2, 3, 7]."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part[1:]:
            lo, hi = part.split("-", 1) if not part.startswith("-") else (part, part)
            out += list(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def period_list(text: str) -> list[tuple[int, int]]:
    """ "16-32,8-16" -> [(16, 32), (8, 16)]; "12" -> [(12, 12)]."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.append((int(lo), int(hi or lo)))
    return out
