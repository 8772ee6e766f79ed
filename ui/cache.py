"""`per_model`: the one cache for what a page computes from a model.

A view of a model (its patterns, circuits, patch effects, headline numbers) is computed once per
model and argument values, and kept with st.cache_data. The function takes the model's entry
(ui.state.LabModel) as an argument, and the cache counts the entry by its `key` alone: the key is
unique on the server ("shipped:<file>", "session:<uuid>", "<key>@step<N>" for a snapshot's weights,
ui/steps.py) and stands for one set of weights, so the weights and the info dict are never hashed
(hashing every tensor would cost more than many of the views).

    @per_model(show_spinner="Probing every period…", max_entries=16)
    def sweep(entry: LabModel):
        return analysis.sweep_view(entry.model, entry.task)
"""
from __future__ import annotations

import streamlit as st

from ui.state import LabModel


def _entry_key(entry: LabModel) -> str:
    return entry.key


def per_model(*, show_spinner: bool | str = False, max_entries: int | None = None):
    """st.cache_data(show_spinner, max_entries) for a function of model entries and plain values:
    each LabModel argument counts by its key, every other argument as st.cache_data hashes it."""
    return st.cache_data(show_spinner=show_spinner, max_entries=max_entries, hash_funcs={LabModel: _entry_key})
