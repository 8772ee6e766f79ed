"""The key of a model in the sidebar's list, the one place that builds or reads it: "shipped:<file>" for a
shipped checkpoint, "session:<uuid>" for a session's own model (ui.state), and "<key>@step<N>" for either at
a snapshot of its training (ui/steps.py). Every view of a model is cached by its key (ui/cache.py)."""
from __future__ import annotations

SHIPPED = "shipped:"
STEP_TAG = "@step"


def shipped_key(file: str) -> str:
    """'variable-period-2block.pt' -> 'shipped:variable-period-2block.pt'."""
    return SHIPPED + file


def shipped_file(key: str) -> str | None:
    """The checkpoint file of a shipped model's key, None for any other key (a snapshot's too: split_step_key)."""
    return key[len(SHIPPED):] if key.startswith(SHIPPED) and STEP_TAG not in key else None


def step_key(key: str, step: int) -> str:
    """The key of the model `key` at snapshot `step`."""
    return f"{key}{STEP_TAG}{step}"


def split_step_key(key: str) -> tuple[str, int | None]:
    """(the model's key, the snapshot step or None) of a model key."""
    base, _, step = key.partition(STEP_TAG)
    return base, int(step) if step else None
