"""Which pages and sections the picked model's task gets: the one place the app asks a model's task (core.model.tasks)
what applies to it, and the model whether its keys are plain.

dashboard.py calls `page_runs` before it runs a page: a page that does not apply to the picked model's task, or
that reads the heads' QK circuits from the weights of a model with smeared keys, says why here and is not run;
a task with its own version of a page (OWN, by task name and page name) gets that version instead. A page with
a section that does not apply (the home page's overview, the archetypes page's match of the model's heads)
asks `offered`, which writes the note and returns False.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from ui.pages import LabPage
    from ui.state import LabModel

# task name -> {page or section name -> "module:function"}: the task's own version, imported when it runs
OWN: dict[str, dict[str, str]] = {
    "markov": {
        "attention": "ui.markov_reading:attention_page",  # (entry): the whole page below its title
        "causal": "ui.markov_reading:causal_page",  # (entry)
        "train_intro": "ui.markov_train:INTRO",  # the Train page's first paragraph (a string)
        "train_live": "ui.markov_train:live_markov_charts",  # (run)
        "train_result": "ui.markov_train:result_markov",  # (run)
        "train_panels": "ui.markov_train:settings_panels",  # (settings, bad, active)
    },
}


def own(task_name: str, name: str):
    """The task's own version of page or section `name` (a function, or a string), or None."""
    where = OWN.get(task_name, {}).get(name)
    if where is None:
        return None
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)


def not_offered_note(entry: LabModel, page: str) -> str | None:
    """The note for a page or reading that does not apply to the model's task, or None when it applies."""
    task = entry.task
    why = task.why_not(page)
    if why is None:
        return None
    return " ".join(x for x in (f"**{entry.label}** was trained on {task.title}.", why,
                                getattr(task, "read_instead", "")) if x)


def smeared_note(entry: LabModel, reads: str) -> str | None:
    """The note for a page that reads `reads` from W_Q and W_K when the model's keys are smeared
    (ModelConfig.smeared_keys): W_Q W_Kᵀ takes each key from its own position, and a smeared key mixes in the
    previous position's, so the reading would describe another model. None for plain keys."""
    if not reads or not getattr(entry.info["config"], "smeared_keys", False):
        return None
    return (f"**{entry.label}** has smeared keys (Olsson et al. 2022): each head's key mixes in the previous "
            f"position's. This page reads {reads} from W_Q and W_K as if each key came from its own position alone, "
            "so it would not describe this model. The **Attention** and **Causal** pages run the model itself.")


def page_runs(page: LabPage, entry: LabModel | None) -> bool:
    """Whether the shell runs the page's file for the picked model: False after writing why the page does not
    apply to it, or after running its task's own version of the page."""
    if entry is None:
        return True
    note = not_offered_note(entry, page.name) or smeared_note(entry, page.reads_qk)
    if note:
        st.info(note)
        return False
    version = own(entry.task.name, page.name)
    if version is not None:
        version(entry)
        return False
    return True


def offered(entry: LabModel, reading: str) -> bool:
    """Whether the reading (a section of a page, core.model.tasks.READINGS) applies to the model's task; when not,
    writes why and returns False."""
    note = not_offered_note(entry, reading)
    if note:
        st.info(note)
    return note is None
