"""Helpers shared by the test modules (import them: `from helpers import ROOT, open_app`).

tests/ is on sys.path when pytest collects it (rootdir-relative imports of conftest work the same way).
"""
from __future__ import annotations

import io
import math
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the tests import core and ui from the repository
    sys.path.insert(0, str(ROOT))

from core.model.config import ModelConfig  # noqa: E402
from core.model.tinycharlm import TinyCharLM  # noqa: E402
from ui.model_keys import shipped_key  # noqa: E402

CHECKPOINTS = ROOT / "checkpoints"
TWO_BLOCK = "variable-period-2block.pt"
# the shipped checkpoints, as the sidebar lists them (checkpoints/manifest.json)
SHIPPED = sorted(p.name for p in CHECKPOINTS.glob("*.pt"))


def wait_until(predicate, timeout: float = 60, what: str = "the condition", poll: float = 0.05):
    """Poll predicate() until it is true; fail the test naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll)
    pytest.fail(f"{what} did not happen within {timeout:g} s")


# A small model keeps every test fast; d_head = 8 still has four rotary frequencies.
TINY = dict(vocab_size=16, d_model=32, n_heads=4)


def tiny_model(n_layers: int = 2, bias: bool = False, seed: int = 0, dtype=torch.float32, **overrides) -> TinyCharLM:
    """A TinyCharLM with every parameter (biases included) drawn at a scale where attention is
    far from uniform and every block changes the logits, so a wrong formula shows up."""
    cfg = ModelConfig(**{**TINY, "n_layers": n_layers, "bias": bias, **overrides})
    model = TinyCharLM(cfg).to(dtype)
    g = torch.Generator().manual_seed(seed)
    D, dh = cfg.d_model, cfg.d_head
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = dh if name.endswith("W_O") else D
            scale = 1.0 if name == "W_E" else 0.5 if name.split(".")[-1].startswith("b_") else 1.5 * fan_in ** -0.5
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * scale)
    return model.eval()


def random_tokens(batch: int, seq: int, vocab: int = TINY["vocab_size"], seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def python_m(module: str, *args, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """A real `python -m module args` process (slow to start: use for a few cross-checks only)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def shipped(file: str = TWO_BLOCK) -> Path:
    """The path of a shipped checkpoint; fails the test when the repository lacks it."""
    path = CHECKPOINTS / file
    if not path.is_file():
        pytest.fail(f"checkpoints/{file} is not shipped")
    return path


def open_app(page: str | None = None, file: str | None = None, timeout: float = 120):
    """dashboard.py in AppTest, run once, with the shipped checkpoint `file` picked in the sidebar
    (default: the app's own pick) and switched to `page` (a page file; None stays home). Asserts
    that nothing raised on the way."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=timeout)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if file is not None:
        shipped(file)
        at.selectbox(key="picked_model").set_value(shipped_key(file)).run()
        assert at.session_state["picked_model"] == shipped_key(file)
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_link(page: str, params: dict, timeout: float = 120):
    """A fresh session opening `page` (a page file, or "home") with `params` in its address."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=timeout)
    at.run()
    if page != "home":
        at.switch_page(page)
    at.query_params.clear()
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def address(at) -> dict:
    """The address an AppTest session's page wrote: parameter -> its (last) value."""
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def spec_params(spec) -> list[dict]:
    """Every selection parameter of a Vega-Lite spec (a dict, or a drawn chart's JSON string), however deep."""
    import json

    def found(node) -> list[dict]:
        if isinstance(node, dict):
            return [p for p in node.get("params", []) if isinstance(p, dict)] + [
                p for v in node.values() for p in found(v)]
        return [p for v in node for p in found(v)] if isinstance(node, list) else []

    return found(json.loads(spec) if isinstance(spec, str) else spec)


def torch_bytes(obj) -> bytes:
    """torch.save(obj) into bytes."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# Checkpoint files written by hand from docs/DESIGN.md's key list, and bad ones


def design_weights(config: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """A state_dict with exactly docs/DESIGN.md's keys and shapes for `config`, random values."""
    g = torch.Generator().manual_seed(seed)
    V, D, H = config["vocab_size"], config["d_model"], config["n_heads"]
    dh = D // H
    shapes = {"W_E": (V, D)}
    for l in range(config["n_layers"]):
        shapes |= {f"blocks.{l}.W_Q": (H, D, dh), f"blocks.{l}.W_K": (H, D, dh), f"blocks.{l}.W_V": (H, D, dh),
                   f"blocks.{l}.W_O": (H, dh, D)}
        if config["bias"]:
            shapes |= {f"blocks.{l}.b_Q": (H, dh), f"blocks.{l}.b_K": (H, dh), f"blocks.{l}.b_V": (H, dh),
                       f"blocks.{l}.b_O": (D,)}
    return {k: torch.randn(s, generator=g) * (1.0 if k == "W_E" else 1.5 / math.sqrt(s[-2] if len(s) > 1 else D))
            for k, s in shapes.items()}


def design_payload(n_layers: int = 1, bias: bool = True, seed: int = 0) -> dict:
    """A complete version-1 checkpoint as a plain dict, built from docs/DESIGN.md alone."""
    config = {"vocab_size": 16, "d_model": 32, "n_heads": 4, "n_layers": n_layers, "bias": bias,
              "rope_base": 10000.0}
    return {"format": "tinycharlm", "version": 1, "config": config,
            "task": {"period_min": 4, "period_max": 8, "seq_len": 24},
            "state_dict": design_weights(config, seed)}


class Plant:
    """An object whose unpickling creates the file `path`: proof that a loader ran code from a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def planted_pickle(marker: Path, protocol: int = 2) -> bytes:
    """A pickle that claims to be a checkpoint and runs code (creates `marker`) when unpickled."""
    return pickle.dumps({"format": "tinycharlm", "x": Plant(marker)}, protocol=protocol)


def bad_checkpoints(marker: Path) -> dict[str, tuple[bytes, str]]:
    """Every kind of file the loader must refuse: {name: (its bytes, a phrase its message must hold)}.
    Three of them plant an object whose unpickling would create `marker`."""
    out = {}

    def edit(name, phrase, change):
        payload = design_payload()
        change(payload)
        out[name] = (torch_bytes(payload), phrase)

    good = torch_bytes(design_payload())
    out["arbitrary-object"] = (torch_bytes(design_payload() | {"train": {"note": Plant(marker)}}), "Python objects")
    out["arbitrary-pickle"] = (planted_pickle(marker, protocol=2), "Python objects")
    # protocol 4 stops torch's reader at its first opcode (and makes torch warn on stderr)
    out["arbitrary-pickle-4"] = (pickle.dumps({"x": Plant(marker)}, protocol=4), "not a torch checkpoint")
    out["truncated"] = (good[: len(good) // 2], "truncated")
    edit("version-3", "version 3", lambda p: p.update(version=3))
    edit("wrong-shape", "blocks.0.W_K", lambda p: p["state_dict"].update({"blocks.0.W_K": torch.zeros(4, 32, 9)}))
    edit("missing-key", "blocks.0.W_O", lambda p: p["state_dict"].pop("blocks.0.W_O"))
    edit("extra-key", "blocks.1.W_Q", lambda p: p["state_dict"].update({"blocks.1.W_Q": torch.zeros(4, 32, 8)}))
    edit("nan-weights", "NaN", lambda p: p["state_dict"]["blocks.0.W_V"].view(-1).__setitem__(5, float("nan")))
    edit("impossible-task", "period_min", lambda p: p["task"].update(period_min=9))
    edit("bad-config", "config", lambda p: p["config"].update(rope_base=float("nan")))
    out["foreign-dict"] = (torch_bytes({"model": {"weight": torch.zeros(3, 3)}, "epoch": 3}),
                           "not a TinyCharLM checkpoint")
    out["non-dict"] = (torch_bytes([torch.zeros(3)]), "not a TinyCharLM checkpoint")
    noise = torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0)).to(torch.uint8)
    out["random-bytes"] = (noise.numpy().tobytes(), "not a torch checkpoint")
    out["empty"] = (b"", "not a torch checkpoint")
    return out


def write_bad_files(folder: Path, marker: Path) -> dict[str, tuple[Path, str]]:
    """bad_checkpoints written into `folder`, plus a path with no file: {name: (path, phrase)}."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, (data, phrase) in bad_checkpoints(marker).items():
        (folder / f"{name}.pt").write_bytes(data)
        files[name] = (folder / f"{name}.pt", phrase)
    files["no-such-file"] = (folder / "no-such-file.pt", "no checkpoint file")
    return files


def assert_same(got, want, where="value", close: bool = False):
    """Equal in type and content; floating arrays bit for bit (the same code on the same weights), or
    with `close` within what another CPU kind moves (its kernels sum in another order, and gradients
    and differences amplify it: the Causal page's attribution of a head on the AVX2-emulated host differs
    by 3.4e-4 of itself, 4e-6 absolute, from the AVX-512 host's). Text, integers and labels are always exact."""
    import dataclasses

    import numpy as np
    import pandas as pd

    rtol, atol = 2e-3, 2e-5
    assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if close and want.is_floating_point():
            assert torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True), where
        else:
            assert torch.equal(torch.nan_to_num(got, 7.0), torch.nan_to_num(want, 7.0)), where
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        if want.dtype.kind == "f":
            if close:
                np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
            else:
                np.testing.assert_array_equal(got, want, err_msg=where)
        else:
            assert [str(v) for v in got.ravel()] == [str(v) for v in want.ravel()], where
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_exact=not close, rtol=rtol, atol=atol, obj=where)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(got, want, check_exact=not close, rtol=rtol, atol=atol, obj=where)
    elif dataclasses.is_dataclass(want):
        for f in dataclasses.fields(want):
            assert_same(getattr(got, f.name), getattr(want, f.name), f"{where}.{f.name}", close)
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]", close)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]", close)
    elif isinstance(want, float) and np.isnan(want):
        assert np.isnan(got), where
    elif isinstance(want, float) and close:
        assert math.isclose(got, want, rel_tol=rtol, abs_tol=atol), f"{where}: {got} != {want}"
    else:
        assert got == want, where
