"""A view is named, not located, and a reading server needs no torch: in a scratch copy of the repository whose
Attention page file is moved and whose sequence view function is renamed, a fresh interpreter in which importing
torch raises walks every page on every shipped checkpoint (the Markov runs too) and reads every default from the
shipped data as it is: no page shows an exception, no view is computed, torch is never asked for nor loaded.

torch was half a reading server's memory (143 MB of 305) and the larger part of its first walk's CPU
(core/model/lazy.py, ui.state.ShippedModel). A page that imported a computing module at its top, a default view
that is not shipped, a view shipped with a tensor in it, or a shipped file keyed by where its code sits, fails.
(One walk holds both: until 5 Dec tests/test_torch_free.py walked every page again in the repository itself.)"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT

OLD_PAGE, NEW_PAGE = "app_pages/attention.py", "app_pages/attention_heads.py"
OLD_FN, NEW_FN = "task_view", "sequence_view"

_WALK = r"""
import importlib.abc, json, logging, sys
asked = []

class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "torch":
            asked.append(name)
            raise ImportError("this process may not import torch")

sys.meta_path.insert(0, NoTorch())
logging.disable(logging.CRITICAL)
import ui.cache
from ui import shipped_data

shipped_data.recorded = []
rows = ui.cache.walk()
calls = shipped_data.recorded
print(json.dumps({
    "rows": len(rows), "failed": [r for r in rows if r["exception"]][:3],
    "computed": sorted({f"{c.view} on {c.checkpoint}" for c in calls if c.computed}), "read": len(calls),
    "renamed": sorted({(c.fn.__name__, c.fn.__code__.co_filename.rpartition("/")[2]) for c in calls
                       if c.view == "attention.task_view"}),
    "checkpoints": sorted({c.checkpoint for c in calls if c.checkpoint}),
    "torch": "torch" in sys.modules, "asked": asked}))
"""


def scratch_copy(to) -> None:
    """The repository's tracked files, as they are in the working tree, copied to `to`."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


def move_page_and_rename_view(root) -> None:
    """Move the Attention page (every reference to its file follows: ui/pages.py's entry, the exercises'
    links) and rename its sequence view's function and its calls."""
    page = root / OLD_PAGE
    text = page.read_text()
    assert f"def {OLD_FN}(" in text
    (root / NEW_PAGE).write_text(text.replace(f"{OLD_FN}(", f"{NEW_FN}("))
    page.unlink()
    moved = 0
    for path in [*root.glob("*.py"), *(root / "ui").rglob("*.py"), *(root / "app_pages").glob("*.py"),
                 *(root / "exercises").rglob("*.py")]:
        text = path.read_text()
        if OLD_PAGE in text:
            path.write_text(text.replace(OLD_PAGE, NEW_PAGE))
            moved += 1
    assert NEW_PAGE in (root / "ui" / "pages.py").read_text() and moved >= 1


@pytest.mark.worker
@pytest.mark.app
@pytest.mark.slow
def test_moving_a_page_and_renaming_a_view_stales_no_shipped_view(tmp_path):
    root = tmp_path / "repo"
    scratch_copy(root)
    move_page_and_rename_view(root)
    env = {**os.environ, "ATTENTION_LAB_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _WALK], cwd=root, capture_output=True, text=True, timeout=900,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not got["failed"], got["failed"]
    assert got["renamed"] == [[NEW_FN, NEW_PAGE.rpartition("/")[2]]]  # the moved, renamed function was asked
    assert len(got["checkpoints"]) >= 7 and any(c.startswith("markov/") for c in got["checkpoints"])
    assert got["read"] >= 80 and got["computed"] == [], got["computed"][:5]
    assert got["torch"] is False and got["asked"] == [], got["asked"][:5]
