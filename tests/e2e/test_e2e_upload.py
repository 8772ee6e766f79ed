"""Uploading checkpoints through the sidebar picker in a real browser: a good file becomes the picked
model and every page analyses it; bad files get a message and the picked model stays."""
from __future__ import annotations

import pytest
import torch

from core.model.checkpoints import checkpoint_bytes
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from ui.state import MAX_UPLOAD_MB

from helpers import bad_checkpoints
from streamlit_server import ARTIFACTS

pytestmark = pytest.mark.e2e

BAD = ("random-bytes", "arbitrary-pickle", "version-3", "wrong-shape", "empty")


def tiny(n_layers: int = 1) -> bytes:
    g = torch.Generator().manual_seed(0)
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=n_layers))
    model.reset_parameters(g)
    return checkpoint_bytes(model, task=TaskConfig(4, 8, 24))


@pytest.fixture
def files(tmp_path):
    marker = tmp_path / "pickle-ran-code"
    bad = bad_checkpoints(marker)  # the loader's bad files (tests/helpers.py): five kinds here
    contents = {"good": tiny(2)} | {name: bad[name][0] for name in BAD}
    paths = {}
    for name, data in contents.items():
        paths[name] = tmp_path / f"{name}.pt"
        paths[name].write_bytes(data)
    return paths, marker


def sidebar_error(app) -> str:
    alerts = app.page.locator('[data-testid="stSidebar"] [data-testid="stAlertContentError"]')
    return alerts.first.inner_text() if alerts.count() else ""


def test_upload_good_then_bad_files(app, server, files, tmp_path):
    paths, marker = files
    app.goto("attention")
    app.upload(paths["good"])
    app.assert_no_exception()
    assert app.picked_label() == "good.pt (uploaded)"
    assert not sidebar_error(app)
    app.wait_charts(1)
    app.screenshot("upload-good-attention")

    seen = {}
    for name in BAD:
        app.upload(paths[name])
        app.assert_no_exception()
        seen[name] = sidebar_error(app)
        assert f"{name}.pt" in seen[name] and "unchanged" in seen[name], f"{name}: the sidebar shows {seen[name]!r}"
        assert app.picked_label() == "good.pt (uploaded)", f"{name}: the picked model changed"
        assert app.sidebar_options().count("good.pt (uploaded)") == 1
        assert not any(name in o for o in app.sidebar_options()), f"{name} was added to the picker"
        assert not marker.exists(), f"{name}: loading ran code from the file"
    app.screenshot("upload-bad-message")
    (ARTIFACTS / "upload-messages.txt").write_text("".join(f"{k}: {v}\n" for k, v in seen.items()))

    # A file over the size cap: the browser's uploader refuses it before it reaches the app.
    big = tmp_path / "big.pt"
    big.write_bytes(b"\0" * ((MAX_UPLOAD_MB + 1) * 2**20))
    app.page.locator('[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(big))
    chip = app.page.locator('[data-testid="stSidebar"] [data-testid="stFileChip"][aria-invalid="true"]')
    chip.wait_for(state="attached")
    refusal = app.page.locator('[data-testid="stSidebar"] [data-testid="stFileUploader"]').inner_text()
    assert f"must be {MAX_UPLOAD_MB:.1f}MB or smaller" in refusal, refusal
    with (ARTIFACTS / "upload-messages.txt").open("a") as f:
        f.write(f"big ({MAX_UPLOAD_MB + 1} MB): " + " ".join(refusal.split()) + "\n")
    app.screenshot("upload-too-big")
    assert app.picked_label() == "good.pt (uploaded)"
    assert not server.tracebacks(), server.tracebacks()[-1]
