"""Attention Lab's computation: no streamlit and no chart library anywhere below this folder.

Subpackages, each importing only those listed before it (tests/test_layout.py checks this):
- core.model: TinyCharLM, its task, metrics, token and head labels, checkpoints and snapshots.
- core.reading: reading a trained model: head scores, attention views, QK/OV circuits, the OV copying
  matrix, composition, ablations, probes, exact path sums, restarts, the headline report.
- core.causal: causal experiments: activation and path patching, the logit lens, the Causal page's runs.
- core.archetypes: GPT-2 small's head archetypes, their detectors on text, and IOI's head groups.
- core.training: training (config, initial weights, interventions, the Trainer), the presets, the
  timeline and the transition study, the in-context-learning checks, the Home page's overview.
- core.pool: trainings in worker processes: the pool that runs them, its backends, training slots.
- core.sweeps: grids of trainings on local processes or Ray into resumable results tables.
- core.laws: the Laws page's tables read: the fits of the drop step, clamps, readings, stages, Markov onsets.
- core.series: runs one after another through the pool: several seeds, the Laws page's small sweep.
- core.quiz: the predict-then-reveal questions, built from measured numbers.

The modules at this level are the command lines README gives: `python -m core.train`,
`python -m core.report`, `python -m core.patch`, `python -m core.sweep`. Importing `core` itself loads
nothing: the short public API below (README's and docs/DESIGN.md's examples) imports its submodule on first access.
"""
from __future__ import annotations

import importlib

# public name -> the module that defines it
_API = {
    "TinyCharLM": "core.model.tinycharlm",
    "ModelConfig": "core.model.config",
    "TaskConfig": "core.model.task",
    "sample_batch": "core.model.task",
    "load_checkpoint": "core.model.checkpoints",
    "read_checkpoint": "core.model.checkpoints",
    "save_checkpoint": "core.model.checkpoints",
    "CheckpointError": "core.model.checkpoints",
    "TrainConfig": "core.training.config",
    "Trainer": "core.training.trainer",
}
_SUBPACKAGES = ("model", "reading", "causal", "archetypes", "training", "pool", "sweeps", "laws", "series", "quiz")

__all__ = sorted(_API)


def __getattr__(name: str):
    """PEP 562: `core.load_checkpoint` imports core.model.checkpoints the first time it is read;
    `core.reading` (any subpackage) imports it, so `import core; core.reading.analysis` works too
    once that module is imported."""
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # later reads skip this function
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"core.{name}")
    raise AttributeError(f"module 'core' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__, *_SUBPACKAGES})
