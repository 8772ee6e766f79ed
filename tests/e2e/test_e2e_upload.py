"""Uploading checkpoints through the sidebar picker in a real browser: a good file becomes the picked
model and every page analyses it; bad files get a message and the picked model stays."""
from __future__ import annotations

import io
import pickle

import pytest
import torch

from conftest import ARTIFACTS

from core.checkpoints import checkpoint_bytes
from core.model import ModelConfig, TinyCharLM
from core.task import TaskConfig


class Plant:
    """Unpickling this creates a file: proof that loading ran code from the upload."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def tiny(n_layers: int = 1) -> bytes:
    g = torch.Generator().manual_seed(0)
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=n_layers))
    model.reset_parameters(g)
    return checkpoint_bytes(model, task=TaskConfig(4, 8, 24))


def edited(**changes) -> bytes:
    obj = torch.load(io.BytesIO(tiny()), weights_only=True)
    for key, value in changes.items():
        if key == "weight":
            obj["state_dict"].update(value)
        else:
            obj[key] = value
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.fixture
def files(tmp_path):
    marker = tmp_path / "pickle-ran-code"
    contents = {
        "good": tiny(2),
        "corrupt": bytes(range(256)) * 40,
        "foreign-pickle": pickle.dumps({"format": "tinycharlm", "x": Plant(marker)}),
        "version-3": edited(version=3),
        "wrong-shape": edited(weight={"blocks.0.W_Q": torch.zeros(4, 32, 5)}),
        "empty": b"",
    }
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
    for name in ("corrupt", "foreign-pickle", "version-3", "wrong-shape", "empty"):
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
    big.write_bytes(b"\0" * (6 * 2**20))
    app.page.locator('[data-testid="stSidebar"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(big))
    chip = app.page.locator('[data-testid="stSidebar"] [data-testid="stFileChip"][aria-invalid="true"]')
    chip.wait_for(state="attached")
    refusal = app.page.locator('[data-testid="stSidebar"] [data-testid="stFileUploader"]').inner_text()
    assert "must be 5.0MB or smaller" in refusal, refusal
    with (ARTIFACTS / "upload-messages.txt").open("a") as f:
        f.write("big (6 MB): " + " ".join(refusal.split()) + "\n")
    app.screenshot("upload-too-big")
    assert app.picked_label() == "good.pt (uploaded)"
    assert not server.tracebacks(), server.tracebacks()[-1]
