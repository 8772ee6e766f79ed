"""ui/state.py's shipped_files: manifest.json is parsed once, and again whenever the file changes."""
from __future__ import annotations

import json
import os

from ui import state


def test_the_manifest_is_read_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(state, "CHECKPOINT_DIR", tmp_path)
    for name in ("a.pt", "b.pt"):
        (tmp_path / name).write_bytes(b"x")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"checkpoints": [{"file": "a.pt", "preset": "a"}]}))
    assert [r["file"] for r in state.shipped_files()] == ["a.pt"]
    reads = []
    real = json.loads
    monkeypatch.setattr(state.json, "loads", lambda text: reads.append(1) or real(text))
    rows = state.shipped_files()
    rows[0]["preset"] = "changed by a caller"
    assert [r["preset"] for r in state.shipped_files()] == ["a"] and reads == []  # kept, and not shared
    manifest.write_text(json.dumps({"checkpoints": [{"file": "a.pt", "preset": "a"}, {"file": "b.pt", "preset": "b"}]}))
    os.utime(manifest, ns=(1, 1))  # a new mtime even on a coarse clock
    assert [r["file"] for r in state.shipped_files()] == ["a.pt", "b.pt"] and reads == [1]
    manifest.unlink()
    assert [r["file"] for r in state.shipped_files()] == ["a.pt", "b.pt"]  # no manifest: the .pt files
