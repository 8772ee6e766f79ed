"""Every third-party module the tracked code imports is named in a requirements file.

A module that a fresh virtual environment does not get from requirements*.txt fails there (".ci/run"
builds one on every run), even when the machine that wrote the import has it installed. A module
that only arrives as another package's dependency counts as missing: that package may drop it.
Reads the files' text only: no network, no installed metadata.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

# import name -> distribution name, where they differ (the rest: the import name, `_` read as `-`)
DISTRIBUTION = {
    "PIL": "pillow",
    "yaml": "pyyaml",
    "sklearn": "scikit-learn",
    "vl_convert": "vl-convert-python",
    "cv2": "opencv-python",
    "google": "protobuf",
    "dateutil": "python-dateutil",
}


@functools.cache
def tracked_python_files() -> tuple[Path, ...]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return tuple(ROOT / f for f in out.stdout.split())


def local_names(files) -> set[str]:
    """Top-level names the repository itself provides (packages, modules, and the modules that
    sys.path entries such as tests/ and exercises/ make importable)."""
    return {f.relative_to(ROOT).parts[0].removesuffix(".py") for f in files} | {f.stem for f in files}


def third_party_imports(files, local: set[str]) -> dict[str, str]:
    """Top-level module -> the first file importing it, for every absolute import outside the
    standard library and the `local` names."""
    found: dict[str, str] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local and top != "__future__":
                    found.setdefault(top, os.path.relpath(f, ROOT))
    return found


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def named_distributions() -> set[str]:
    """The distributions requirements*.txt name (pins, `-r` includes and options aside)."""
    named = set()
    for req in ROOT.glob("requirements*.txt"):
        for line in req.read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                named.add(normalise(re.match(r"[A-Za-z0-9_.\-]+", line).group(0)))
    return named


def undeclared() -> dict[str, str]:
    named = named_distributions()
    files = tracked_python_files()
    return {mod: f for mod, f in sorted(third_party_imports(files, local_names(files)).items())
            if normalise(DISTRIBUTION.get(mod, mod)) not in named}


def test_every_third_party_import_is_named_in_a_requirements_file():
    missing = undeclared()
    assert not missing, "imported but named in no requirements*.txt (add a pinned line or drop the import): " + \
        "; ".join(f"{mod} (first in {f}, distribution {DISTRIBUTION.get(mod, mod)})" for mod, f in missing.items())


def test_the_check_sees_an_undeclared_import(tmp_path):
    """A planted file importing a module no requirements file names is reported; the names the
    check must not report (the standard library, the repository's own packages, relative imports)
    are not."""
    planted = tmp_path / "planted.py"
    planted.write_text("import json\nimport core.model\nfrom . import sibling\nimport streamlit as st\n"
                       "from yaml import safe_load\nimport PIL.Image\n")
    found = third_party_imports([planted], local_names(tracked_python_files()))
    assert {"yaml", "PIL", "streamlit"} <= set(found)
    assert not {"json", "core", "sibling"} & set(found)
    named = named_distributions()
    assert "streamlit" in named and "torch" in named and "pytest" in named  # read through the files
    assert normalise(DISTRIBUTION["yaml"]) not in named  # so `yaml` above would fail the check
