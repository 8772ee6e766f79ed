"""Helpers shared by the test modules (import them: `from helpers import ROOT, open_app`).

tests/ is on sys.path when pytest collects it (rootdir-relative imports of conftest work the same way).
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"
TWO_BLOCK = "variable-period-2block.pt"
# the shipped checkpoints, as the sidebar lists them (checkpoints/manifest.json)
SHIPPED = sorted(p.name for p in CHECKPOINTS.glob("*.pt"))


def shipped(file: str = TWO_BLOCK) -> Path:
    """The path of a shipped checkpoint; fails the test when the repository lacks it."""
    path = CHECKPOINTS / file
    if not path.is_file():
        pytest.fail(f"checkpoints/{file} is not shipped")
    return path


def open_app(page: str | None = None, file: str | None = None, timeout: float = 120):
    """dashboard.py in AppTest, run once, with the shipped checkpoint `file` picked in the sidebar
    (default: the app's own pick) and switched to `page` (a page file; None stays home). Asserts
    that nothing raised on the way. Needs the navigation_apps_only fixture (tests/conftest.py)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=timeout)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if file is not None:
        shipped(file)
        at.selectbox(key="picked_model").set_value(f"shipped:{file}").run()
        assert at.session_state["picked_model"] == f"shipped:{file}"
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


class Plant:
    """An object whose unpickling creates the file `path`: proof that a loader ran code from a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def planted_pickle(marker: Path, protocol: int = 2) -> bytes:
    """A pickle that claims to be a checkpoint and runs code (creates `marker`) when unpickled."""
    return pickle.dumps({"format": "tinycharlm", "x": Plant(marker)}, protocol=protocol)


def torch_bytes(obj) -> bytes:
    """torch.save(obj) into bytes."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()
