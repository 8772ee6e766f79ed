"""What one run of a sweep (core.sweeps.run) trains: a core.training.run_config.RunConfig, its run id and
its row of settings in a results table, and the grid of runs that `python -m core.sweep`'s flags describe.

    runs = grid({"n_layers": [1, 2], "seed": [0, 1, 2]})     # every other setting: the sweep's defaults
    runs[0].configs()                                           # (ModelConfig, TaskConfig, TrainConfig)
    run_id(runs[0], code)                                       # settings + seed + code version

A run's settings in a table are SETTINGS, the settings the first tables were written with, under their names
there: init ("shared" or "plain"), hold, clamp and knockout ("none" for off), every and stop_below (the run's),
and the preset's name. Any other setting (a model, task or TrainConfig field by its name) gets a column of its
own in a table that varies it, and enters the run id only where it differs from the sweep's defaults, so
adding a training option leaves the shipped tables' ids as they were.
"""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import fields

from core.training.presets import DEFAULT_PRESET
from core.training.run_config import NOT_FIELDS, PARTS, RUN_FIELDS, RunConfig

NO_LOG = 10 ** 9  # log_every of a sweep run: its curve is the later-copy loss every `every` steps, nothing else
EVERY = 10  # a sweep run's default steps between measurements
SETTINGS = ["n_layers", "period_min", "period_max", "seq_len", "vocab_size", "batch_size", "lr", "warmup_steps",
            "decay_steps", "init", "hold", "clamp", "knockout", "steps", "every", "stop_below", "seed", "preset"]
# settings added after the first tables were written, with the value those tables ran
ADDED = {"clamp": "none", "decay_steps": 300, "stop_below": 0.0}
DERIVED = {"embed_scale", "embed_shared"}  # named by init (when it is "shared" or "plain")


def sweep_run(preset: str = DEFAULT_PRESET, **settings) -> RunConfig:
    """A sweep's run: RunConfig.of with the sweep's defaults (a measurement every EVERY steps, no logs)."""
    preset = settings.pop("preset", preset)
    return RunConfig.of(preset, **{"every": EVERY, "log_every": NO_LOG, **settings})


def row_settings(run: RunConfig) -> dict:
    """The run's settings as a table's columns: SETTINGS (their old names and forms), then any other setting
    that differs from the sweep's defaults (extra_settings)."""
    m, t, tr = run.model, run.task, run.train
    off = "none"
    return {"n_layers": m.n_layers, "period_min": getattr(t, "period_min", None),
            "period_max": getattr(t, "period_max", None), "seq_len": t.seq_len, "vocab_size": m.vocab_size,
            "batch_size": tr.batch_size, "lr": tr.lr, "warmup_steps": tr.warmup_steps, "decay_steps": tr.decay_steps,
            "init": run.init or "custom", "hold": tr.hold or off, "clamp": tr.clamp or off,
            "knockout": tr.knockout or off, "steps": tr.steps, "every": run.every, "stop_below": run.stop_below,
            "seed": tr.seed, "preset": run.preset, **extra_settings(run)}


def extra_settings(run: RunConfig) -> dict:
    """The run's settings beyond SETTINGS that differ from the sweep's defaults, by the name RunConfig.of takes."""
    mine, base = run.changes(), sweep_run(run.preset).changes()
    names = (set(mine) | set(base)) - set(SETTINGS) - set(NOT_FIELDS) - set(RUN_FIELDS)
    if run.init is not None:
        names -= DERIVED
    out = {}
    for name in sorted(names):
        value = mine[name] if name in mine else run.get(name)
        if value != (base[name] if name in base else sweep_run(run.preset).get(name)):
            out[name] = value
    return out


def run_id(run: RunConfig, code: str) -> str:
    """The run's id in a results table: a hash of its settings (row_settings) and `code` (the code version). A
    setting of SETTINGS added after tables were shipped (ADDED) is left out while it is off, and any other
    setting is in only where it differs from the sweep's defaults, so those tables' ids stay what they were."""
    settings = {k: v for k, v in row_settings(run).items() if ADDED.get(k, object()) != v}
    return hashlib.sha256(repr((sorted(settings.items()), code)).encode()).hexdigest()[:16]


def _names(preset: str) -> set[str]:
    """Every setting a grid may vary."""
    base = sweep_run(preset)
    return set(SETTINGS) | {"init"} | {f.name for part in PARTS for f in fields(getattr(base, part))}


def grid(values: dict[str, list], preset: str = DEFAULT_PRESET) -> list[RunConfig]:
    """Every combination of `values` (setting -> the values it takes; settings not named keep the sweep's
    defaults), seeds varying fastest. A key naming several settings with commas ("period_min, period_max,
    seq_len") takes tuples that set them together; "period" is short for "period_min, period_max". Each run
    is checked (ValueError names the bad one)."""
    values = dict(values)
    if "period" in values:
        values["period_min, period_max"] = values.pop("period")
    joint = {key: [n.strip() for n in key.split(",")] for key in values}
    unknown = {n for names in joint.values() for n in names} - _names(preset)
    if unknown:
        raise ValueError(f"unknown sweep fields: {', '.join(sorted(unknown))}.")
    named = [n for names in joint.values() for n in names]
    if len(named) != len(set(named)):
        raise ValueError(f"a field is given twice: {', '.join(sorted({n for n in named if named.count(n) > 1}))}.")
    for key, names in joint.items():
        if len(names) > 1 and any(len(tuple(v)) != len(names) for v in values[key]):
            raise ValueError(f"each value of {key!r} must give {len(names)} numbers, one per field.")
    order = {n: i for i, n in enumerate(SETTINGS)}
    keys = sorted(values, key=lambda k: min((order.get(n, len(order)), n) for n in joint[k]))
    runs = []
    for combo in itertools.product(*(values[k] for k in keys)):
        changes = {}
        for key, value in zip(keys, combo):
            names = joint[key]
            changes.update(zip(names, tuple(value)) if len(names) > 1 else [(names[0], value)])
        try:
            run = sweep_run(preset, **changes)
            run.validate()
        except ValueError as e:
            raise ValueError(f"{e} (run {_label(changes)})") from None
        runs.append(run)
    return runs


def _label(changes: dict) -> str:
    return ", ".join([f"{n}={v}" for n, v in changes.items() if n != "seed"] + [f"seed={changes.get('seed', 0)}"])


def label(run: RunConfig) -> str:
    """The settings that differ from the sweep's defaults, then the seed: "n_layers=1, seed=3"."""
    mine, base = row_settings(run), row_settings(sweep_run(run.preset))
    changed = [f"{n}={v}" for n, v in mine.items() if n != "seed" and v != base.get(n)]
    return ", ".join(changed + [f"seed={run.train.seed}"])


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
