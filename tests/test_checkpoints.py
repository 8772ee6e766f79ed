"""Checkpoint files, format versions 1 and 2 (docs/DESIGN.md "Checkpoint file"): round trips, a file written
by hand from the spec, and every kind of bad file refused with one sentence and nothing executed."""
from __future__ import annotations

import json
import re

import pytest
import torch

from core.model.checkpoints import CheckpointError, checkpoint_bytes, load_checkpoint, read_checkpoint, save_checkpoint
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.training.config import TrainConfig
from core.training.trainer import Trainer

from helpers import TINY, design_payload, random_tokens, tiny_model, write_bad_files
from naive import naive_forward


def _design_keys(n_layers: int, bias: bool) -> set[str]:
    keys = {"W_E"}
    for l in range(n_layers):
        keys |= {f"blocks.{l}.{n}" for n in ("W_Q", "W_K", "W_V", "W_O")}
        if bias:
            keys |= {f"blocks.{l}.{n}" for n in ("b_Q", "b_K", "b_V", "b_O")}
    return keys


@pytest.mark.parametrize("n_layers, bias", [(0, False), (2, False), (2, True), (1, True)])
def test_round_trip_gives_bit_identical_logits(tmp_path, n_layers, bias):
    model = tiny_model(n_layers, bias, seed=n_layers)
    task = TaskConfig(period_min=4, period_max=8, seq_len=24)
    path = tmp_path / "m.pt"
    save_checkpoint(model, path, task=task)
    loaded, info = read_checkpoint(path)
    tokens = random_tokens(3, 24, seed=1)
    with torch.no_grad():
        assert torch.equal(loaded(tokens), model(tokens))
        assert torch.equal(loaded.run_with_cache(tokens)[0], model.run_with_cache(tokens)[0])
    assert not loaded.training
    assert info["config"] == model.cfg and info["task"] == task
    assert info["train"] is None and info["history"] is None

    # the file is what docs/DESIGN.md says: a plain dict that torch.load(weights_only=True) reads
    raw = torch.load(path, weights_only=True)
    assert raw["format"] == "tinycharlm" and raw["version"] == 2
    assert raw["config"] == {**TINY, "n_layers": n_layers, "bias": bias, "rope_base": 10000.0}
    assert raw["task"] == {"period_min": 4, "period_max": 8, "seq_len": 24}
    assert set(raw["state_dict"]) == _design_keys(n_layers, bias)


def test_round_trip_keeps_a_real_training_history(tmp_path):
    trainer = Trainer(ModelConfig(**TINY, n_layers=2, bias=True), TaskConfig(4, 8, 24),
                      TrainConfig(steps=3, batch_size=4, log_every=1, eval_size=8, seed=3))
    trainer.run(3)
    fields = trainer.checkpoint_fields()
    path = tmp_path / "trained.pt"
    save_checkpoint(trainer.model, path, **fields)
    loaded, info = read_checkpoint(path)
    assert json.dumps(info["history"], sort_keys=True) == json.dumps(trainer.history, sort_keys=True)
    assert len(info["history"]) == 4 and info["history"][-1]["step"] == 3
    assert info["train"]["seed"] == 3 and info["train"]["steps_done"] == 3
    assert info["task"] == TaskConfig(4, 8, 24)
    tokens = random_tokens(2, 24, seed=2)
    with torch.no_grad():
        assert torch.equal(loaded(tokens), trainer.model.eval()(tokens))


def test_bytes_round_trip():
    model = tiny_model(1, bias=True, seed=2)
    data = checkpoint_bytes(model, task=TaskConfig(4, 8, 24), history=[{"step": 0, "loss_later_copies": 2.5}])
    loaded, info = read_checkpoint(data, name="upload.pt")
    assert info["history"] == [{"step": 0, "loss_later_copies": 2.5}]
    tokens = random_tokens(2, 24)
    with torch.no_grad():
        assert torch.equal(loaded(tokens), model(tokens))


@pytest.mark.parametrize("n_layers, bias", [(1, True), (2, False)])
def test_file_written_by_hand_from_the_design_loads_and_runs_as_specified(tmp_path, n_layers, bias):
    """Not written by save_checkpoint: a plain dict of tensors with docs/DESIGN.md's keys. Its logits
    match the naive reference computed straight from the same tensors."""
    payload = design_payload(n_layers, bias, seed=7)
    path = tmp_path / "by_hand.pt"
    torch.save(payload, path)
    model = load_checkpoint(path)
    assert isinstance(model, torch.nn.Module) and not model.training
    tokens = random_tokens(1, 20, seed=3)
    with torch.no_grad():
        logits = model(tokens)[0].double()
    expected, _ = naive_forward(payload["state_dict"], payload["config"], tokens[0])
    assert (logits - expected).abs().max() < 1e-5 * expected.abs().max()


def _one_sentence(message: str) -> bool:
    return "\n" not in message and message.strip().endswith(".") and not re.search(r"[.!?]\s+[A-Z]", message)


def test_every_bad_file_is_refused_with_one_sentence_and_nothing_runs(bad_files):
    files, marker = bad_files
    assert len(files) >= 15
    for name, (path, phrase) in files.items():
        with pytest.raises(CheckpointError) as err:
            load_checkpoint(path)
        message = str(err.value)
        assert _one_sentence(message), (name, message)
        assert phrase in message, (name, message)
        assert isinstance(err.value, ValueError)
        if path.exists():  # the same refusal from the bytes (an upload)
            with pytest.raises(CheckpointError):
                read_checkpoint(path.read_bytes(), name="upload.pt")
    assert not marker.exists()


def test_planted_object_would_run_if_unpickled(tmp_path):
    """The marker check above can fail: the same kind of file does create it when fully unpickled."""
    marker = tmp_path / "ran"
    files = write_bad_files(tmp_path / "files", marker)
    with pytest.raises(CheckpointError):
        load_checkpoint(files["arbitrary-object"][0])
    assert not marker.exists()
    torch.load(files["arbitrary-object"][0], weights_only=False)
    assert marker.exists()


def test_messages_name_the_problem(bad_files):
    files, _ = bad_files
    message = lambda name: str(pytest.raises(CheckpointError, load_checkpoint, files[name][0]).value)  # noqa: E731
    assert "shape (4, 32, 9)" in message("wrong-shape") and "(4, 32, 8)" in message("wrong-shape")
    assert "wrong-shape.pt" in message("wrong-shape")  # the file is named
    assert "versions 1 and 2" in message("version-3")
    # random bytes are not mistaken for a file carrying code, and vice versa
    assert "Python objects" not in message("random-bytes")
    assert "Python objects" not in message("truncated")


@pytest.mark.parametrize("version", [True, 1.0, "1", None])
def test_version_must_be_an_integer(tmp_path, version):
    path = tmp_path / "v.pt"
    torch.save(design_payload() | {"version": version}, path)
    with pytest.raises(CheckpointError, match="version"):
        load_checkpoint(path)


@pytest.mark.parametrize("change", [
    {"d_model": 0}, {"n_heads": 0}, {"d_model": 30}, {"n_layers": 7}, {"rope_base": float("inf")},
    {"vocab_size": 1}, {"bias": 1}, {"n_layers": 1.0},
])
def test_impossible_configs_are_refused(tmp_path, change):
    payload = design_payload()
    payload["config"].update(change)
    path = tmp_path / "c.pt"
    torch.save(payload, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert _one_sentence(str(err.value)), str(err.value)


def test_integer_weights_are_refused(tmp_path):
    payload = design_payload()
    payload["state_dict"]["W_E"] = payload["state_dict"]["W_E"].long()
    torch.save(payload, tmp_path / "i.pt")
    with pytest.raises(CheckpointError, match="floating-point"):
        load_checkpoint(tmp_path / "i.pt")
