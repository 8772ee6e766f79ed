"""The stable names of the classes whose values are stored outside the code: the shipped views
(checkpoints/data/, ui/safe_form.py) name each dataclass, enum or named tuple by its name here, never by
its module, so moving or renaming a class changes one line below and no stored file.

Only the classes listed here are stored, and only they are rebuilt when a file is read (nothing else is
imported by name from a file). A view whose value holds another class cannot be shipped: ui/safe_form.py
says which class to add. Strings only: reading this module imports nothing.
"""
from __future__ import annotations

STORED = {  # stable name -> where the class is defined now ("module:qualified name", under core)
    "ModelConfig": "core.model.config:ModelConfig",
    "TaskConfig": "core.model.task:TaskConfig",
    "MarkovTask": "core.model.markov:MarkovTask",
    "SequenceView": "core.reading.views:SequenceView",
    "HeadCircuitView": "core.reading.views:HeadCircuitView",
    "MarkovView": "core.reading.views:MarkovView",
    "Experiments": "core.causal.results:Experiments",
    "Overview": "core.training.overview:Overview",
}

NAMES = {where: name for name, where in STORED.items()}  # "module:qualified name" -> stable name
