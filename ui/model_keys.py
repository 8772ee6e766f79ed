"""The key of a model in the sidebar's list: "shipped:<file>" for a shipped checkpoint; a session's
own models have keys of their own (ui.state). The one place that builds or reads the shipped form."""
from __future__ import annotations

SHIPPED = "shipped:"


def shipped_key(file: str) -> str:
    """'variable-period-2block.pt' -> 'shipped:variable-period-2block.pt'."""
    return SHIPPED + file


def shipped_file(key: str) -> str | None:
    """The checkpoint file of a shipped model's key, None for any other key."""
    return key[len(SHIPPED):] if key.startswith(SHIPPED) else None
