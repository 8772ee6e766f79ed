"""The notebook download (ui/notebook.py): valid nbformat-4 JSON holding the page's snippets in order,
whose code cells run top to bottom (executed in order here, in one namespace, without Jupyter)."""
import json
import os
import re
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from ui import notebook
from ui.python_panel import RUN_KEY

from helpers import ROOT, open_app

PAGES = [None, "app_pages/attention.py", "app_pages/circuits.py", "app_pages/depth.py", "app_pages/icl.py",
         "app_pages/archetypes.py", "app_pages/causal.py", "app_pages/train.py"]  # None: Home


RUNNER = r"""
import json, sys
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] == "code":
        print(f"--- cell {i}", flush=True)
        exec(compile("".join(cell["source"]), f"<cell {i}>", "exec"), ns)
print("ALL CELLS RAN")
"""


def check_nbformat4(nb: dict) -> None:
    """The nbformat 4.5 schema's required structure (nbformat itself is not a dependency)."""
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 5
    assert isinstance(nb["metadata"], dict) and isinstance(nb["cells"], list)
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(r"[a-zA-Z0-9-_]{1,64}", i) for i in ids)
    for c in nb["cells"]:
        assert c["cell_type"] in ("markdown", "code")
        assert isinstance(c["metadata"], dict)
        assert isinstance(c["source"], list) and all(isinstance(s, str) for s in c["source"])
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None
            assert set(c) == {"cell_type", "id", "metadata", "source", "outputs", "execution_count"}
        else:
            assert set(c) == {"cell_type", "id", "metadata", "source"}


@pytest.mark.app
@pytest.mark.parametrize("page", PAGES, ids=[p or "home" for p in PAGES])
def test_page_notebook_is_valid_and_runs_top_to_bottom(page, tmp_path):
    at = open_app(page, "variable-period-2block.pt", timeout=180)
    shown = list(at.session_state[RUN_KEY])
    assert shown and any(b.proto.label.startswith("📓") for b in at.get("download_button"))
    nb = json.loads(json.dumps(notebook.build(page or "Home", "test", shown)))  # what the button serves, as JSON
    check_nbformat4(nb)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert ["".join(c["source"]) for c in code] == list(dict.fromkeys(s["code"].rstrip("\n") for s in shown))
    text = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert len(text) == len(code) + 1  # a title, then one explanation before each code cell
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps(nb))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    out = subprocess.run([sys.executable, "-c", RUNNER, str(path)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0 and "ALL CELLS RAN" in out.stdout, out.stderr[-3000:]
    assert out.stdout.count("--- cell") == len(code)


@pytest.mark.app
def test_download_button_serves_the_same_notebook():
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.run()
    at.switch_page("app_pages/circuits.py")
    at.run()
    shown = list(at.session_state[RUN_KEY])
    nb = notebook.build("Circuits & ablations", "x", shown)
    check_nbformat4(nb)
    assert nb["cells"][1]["source"][0] == shown[0]["title"]
