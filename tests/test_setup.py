"""ui/setup.py's lab_script: a server whose visitors only read pages holds no training machinery
(issue #30): no forkserver and no resource tracker until the first training starts one."""
from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT

_PROBE = r'''
import json, os
from pathlib import Path
import ui.setup
ui.setup.lab_script()
ui.setup.lab_script()
from multiprocessing import forkserver, resource_tracker
children = [p.parent.name for p in Path("/proc").glob("[0-9]*/stat")
            if p.read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())]
print(json.dumps({"forkserver": forkserver._forkserver._forkserver_pid,
                  "tracker": resource_tracker._resource_tracker._pid, "children": children}))
'''


def test_the_first_script_run_starts_no_process():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["forkserver"] is None and seen["tracker"] is None
    assert seen["children"] == []
