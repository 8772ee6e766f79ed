"""How many of the repository's source files one chart's view passes through: the Attention page's call of its
sequence view (`task_view`) on the default shipped checkpoint, from a new process (empty memory caches).

    python bench/view_files.py [--miss] [--json]

A hit reads the view from the shipped data (checkpoints/data/); --miss computes it (`read_shipped` off once
Home has opened, as `python -m ui.cache --ship --fresh` does), which loads the checkpoint and runs the model.
A profile hook on the page's script thread counts the distinct files under the repository (not the
libraries) of every frame entered from the call to its return, the page's own file included.
"""
from __future__ import annotations

import argparse
import ast
import json
import logging
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PAGE = ROOT / "app_pages" / "attention.py"
VIEW = "task_view"


def call_lines(path: Path, name: str) -> set[int]:
    """The lines of `path` where `name(...)` is called."""
    return {n.lineno for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name}


def files_passed(miss: bool) -> list[str]:
    from streamlit.testing.v1 import AppTest

    import ui.cache
    import ui.shipped_data

    switch = ui.shipped_data if hasattr(ui.shipped_data, "read_shipped") else ui.cache  # where this tree keeps it

    lines, page = call_lines(PAGE, VIEW), str(PAGE)
    passed: set[str] = set()
    state = {"frame": None}

    def profile(frame, event, arg):
        if event != "call":
            if event == "return" and frame is state["frame"]:
                state["frame"] = None
            return
        if state["frame"] is None:
            back = frame.f_back
            if back is None or back.f_code.co_filename != page or back.f_lineno not in lines or passed:
                return
            state["frame"] = frame
            passed.add(page)
        name = frame.f_code.co_filename
        if name.startswith(str(ROOT)):
            passed.add(name)

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
    at.run()  # Home, read from the shipped data
    switch.read_shipped = not miss
    threading.setprofile(profile)
    try:
        at.switch_page("app_pages/attention.py").run()
    finally:
        threading.setprofile(None)
    assert not at.exception, at.exception[0].value
    return sorted(str(Path(p).relative_to(ROOT)) for p in passed)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--miss", action="store_true", help="compute the view instead of reading it")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.disable(logging.CRITICAL)
    files = files_passed(args.miss)
    out = {"case": "miss" if args.miss else "hit", "files": len(files), "paths": files,
           "torch_imported": "torch" in sys.modules}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{VIEW} on a shipped-data {out['case']}: {len(files)} project files; torch imported: "
              f"{out['torch_imported']}")
        for f in files:
            print(f"  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
