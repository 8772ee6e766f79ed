"""A server whose pages read stored views never imports torch (issue #30, core/model/lazy.py): torch is half a
reading server's memory (143 MB of 305) and most of its first page's CPU (2 of 5 CPU-seconds).

The pages below are torch-free: on every shipped checkpoint, with an empty cache folder over the shipped
views, a fresh interpreter in which importing torch raises opens each of them without an exception, and
torch is not loaded at the end. The other pages still import it (the next step of the issue)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

TORCH_FREE = ("app_pages/home.py", "app_pages/attention.py", "app_pages/circuits.py", "app_pages/exercise_page.py")

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
from ui.model_keys import shipped_key
from ui.state import shipped_files

rows = []
for row in shipped_files():
    at = AppTest.from_file(sys.argv[1], default_timeout=120)
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(row["file"]))
    for page in json.loads(sys.argv[2]):
        at.switch_page(page).run()
        rows.append([row["file"], page, [str(e.value)[:200] for e in at.exception]])
print(json.dumps({"rows": rows, "asked": asked, "loaded": "torch" in sys.modules}))
"""


@pytest.mark.worker
@pytest.mark.app
def test_the_reading_pages_open_on_every_shipped_file_without_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", _WALK, str(ROOT / "dashboard.py"), json.dumps(TORCH_FREE)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**_env(), "ATTENTION_LAB_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    failed = [r for r in got["rows"] if r[2]]
    assert len(got["rows"]) >= 4 * len(TORCH_FREE) and not failed, failed[:3]
    assert not got["asked"] and not got["loaded"], got["asked"][:5]
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("*.view"))  # nothing computed


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "ATTENTION_LAB_CACHE"}
