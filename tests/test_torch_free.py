"""A server whose pages read shipped views never imports torch (core/model/lazy.py, ui.state.ShippedModel):
torch was half a reading server's memory (143 MB of 305) and the larger part of its first walk's CPU.

On every shipped checkpoint, reading the shipped data (checkpoints/data/) as a fresh clone has it, a fresh
interpreter in which importing torch raises opens every page without an exception, computes no view, and has
not loaded torch at the end. A page that imported a computing module at its top, a default view that is not
shipped, or a view shipped with a tensor in it, fails."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ui.pages import ALL_PAGES

from helpers import ROOT

TORCH_FREE = tuple(p.file for p in ALL_PAGES)

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
from streamlit.testing.v1 import AppTest
import ui.shipped_data
from ui.state import shipped_models

rows = []
ui.shipped_data.recorded = []
for entry in shipped_models():
    at = AppTest.from_file(sys.argv[1], default_timeout=120)
    at.run()
    at.selectbox(key="picked_model").set_value(entry.key)
    for page in json.loads(sys.argv[2]):
        at.switch_page(page).run()
        rows.append([entry.file, page, [str(e.value)[:200] for e in at.exception]])
computed = sorted({f"{c.view} on {c.checkpoint}" for c in ui.shipped_data.recorded if c.computed})
print(json.dumps({"rows": rows, "asked": asked, "loaded": "torch" in sys.modules, "computed": computed,
                  "read": len(ui.shipped_data.recorded)}))
"""


@pytest.mark.worker
@pytest.mark.app
def test_every_page_opens_on_every_shipped_file_without_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", _WALK, str(ROOT / "dashboard.py"), json.dumps(TORCH_FREE)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    failed = [r for r in got["rows"] if r[2]]
    assert len(got["rows"]) >= 4 * len(TORCH_FREE) and not failed, failed[:3]
    assert not got["asked"] and not got["loaded"], got["asked"][:5]
    assert not got["computed"] and got["read"] >= 40, got["computed"][:5]


def _env(tmp_path) -> dict:
    """This environment, with a fresh folder for what the process may build ($ATTENTION_LAB_CACHE)."""
    import os

    return {**os.environ, "ATTENTION_LAB_CACHE": str(tmp_path / "cache")}
