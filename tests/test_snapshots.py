"""Checkpoint format version 2: snapshots of the weights during training (core.model.snapshots).

Round trips are bit-exact, version-1 files still load, every kind of bad snapshot is refused with
one sentence, the thinning keeps the drop dense, and snapshotting leaves the trajectory unchanged."""
from __future__ import annotations

import math
import re

import pytest
import torch

from core.model.checkpoints import CheckpointError, read_checkpoint, save_checkpoint
from core.model.config import ModelConfig
from core.model.snapshots import (
    EVERY,
    MARGIN,
    MAX_SNAPSHOTS,
    SnapshotRecorder,
    keep_indices,
    model_at_step,
    snapshot_model,
)
from core.model.task import TaskConfig
from core.training.config import TrainConfig
from core.training.trainer import Trainer

from helpers import TINY, design_payload, shipped

TASK = TaskConfig(4, 8, 24)


def _trainer(steps=30, seed=3, **kw):
    t = Trainer(ModelConfig(**TINY, n_layers=2), TASK, TrainConfig(steps=steps, batch_size=4, log_every=10,
                                                                   eval_size=8, seed=seed, decay_steps=0, **kw))
    t.run(steps)
    return t


def _one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and len(re.findall(r"[.!?](\s|$)", message)) == 1


def test_round_trip_is_bit_exact(tmp_path):
    trainer = _trainer(steps=35)
    fields = trainer.checkpoint_fields()
    assert [s["step"] for s in fields["snapshots"]] == [0, 10, 20, 30]  # final step 35 is the top level
    path = tmp_path / "v2.pt"
    save_checkpoint(trainer.model, path, **fields)
    raw = torch.load(path, weights_only=True)
    assert raw["version"] == 2 and [s["step"] for s in raw["snapshots"]] == [0, 10, 20, 30]
    _, info = read_checkpoint(path)
    for mine, back in zip(fields["snapshots"], info["snapshots"]):
        assert mine["step"] == back["step"] and set(mine["state_dict"]) == set(back["state_dict"])
        for k, t in mine["state_dict"].items():
            assert t.dtype == back["state_dict"][k].dtype and torch.equal(t, back["state_dict"][k])


def test_snapshots_are_the_weights_at_their_step():
    """A snapshot at step 20 of a 30-step run equals (to float16) the final weights of a 20-step run."""
    long, short = _trainer(steps=30), _trainer(steps=20)
    snap = {s["step"]: s["state_dict"] for s in long.checkpoint_fields()["snapshots"]}[20]
    for k, v in short.model.state_dict().items():
        assert torch.equal(snap[k], v.to(torch.float16)), k
    assert snapshot_model(short.model, snap).W_E.dtype == torch.float32


def test_model_at_step_loads_that_snapshot_and_names_the_steps_it_lacks(tmp_path):
    trainer = _trainer(steps=35)
    save_checkpoint(trainer.model, tmp_path / "v2.pt", **trainer.checkpoint_fields())
    model, info = read_checkpoint(tmp_path / "v2.pt")
    at20 = model_at_step(model, info, 20)
    snap = {s["step"]: s["state_dict"] for s in info["snapshots"]}[20]
    assert all(torch.equal(v, snap[k].float()) for k, v in at20.state_dict().items())
    assert not torch.equal(at20.W_E, model.W_E)
    with pytest.raises(ValueError, match=r"no snapshot at step 25 \(it has 0, 10, 20, 30\)\."):
        model_at_step(model, info, 25)
    with pytest.raises(ValueError, match="it has no snapshots"):
        model_at_step(model, {"snapshots": []}, 0)


def test_snapshotting_leaves_the_trajectory_unchanged():
    """The same run with the recorder replaced by one that keeps nothing ends bit-identical."""
    a = _trainer(steps=25)
    b = Trainer(ModelConfig(**TINY, n_layers=2), TASK, TrainConfig(steps=25, batch_size=4, log_every=10,
                                                                   eval_size=8, seed=3, decay_steps=0))
    b.snapshots.offer = lambda *args: None
    b.run(25)
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k]), k


@pytest.mark.parametrize("budget", [pytest.param(None, marks=pytest.mark.slow), 6])  # the default budget: the rest tier
def test_a_checkpoint_is_the_same_byte_for_byte_whether_its_snapshots_were_spilled_or_held(budget, monkeypatch):
    """The recorder keeps its snapshots in a temporary file; a run whose recorder holds them in
    memory, as before, writes the same file, byte for byte: the worker's final checkpoint and one taken
    mid-run ("keep"). With a budget of 6 snapshots the recorder thins while it trains, and the freed slots
    of its file are reused. (The history's seconds are wall time: the trainer's clock ticks 1 ms a reading.)"""
    runs = [_run_checkpoints(spill, budget, monkeypatch) for spill in (False, True)]
    assert runs[0] == runs[1]
    if budget is not None:
        assert len(runs[1][2]) <= budget and runs[1][2][0] == 0 and runs[1][2][-1] == 90
        assert runs[1][2] != list(range(0, 91, 10))  # it did thin


def _run_checkpoints(spill: bool, budget: int | None, monkeypatch) -> tuple[bytes, bytes, list[int]]:
    """A 95-step run's checkpoint at step 50 and at its end, and its live snapshot steps; `budget`: that
    many snapshots live (None: the default budget)."""
    import core.training.trainer as trainer_module
    from core.model.snapshots import MEMORY_BUDGET
    from core.pool.worker import final_checkpoint

    ticks = iter(range(10**6))
    monkeypatch.setattr(trainer_module, "time", type("Clock", (), {"perf_counter": lambda t=ticks: next(t) / 1000}))
    t = Trainer(ModelConfig(**TINY, n_layers=2), TASK, TrainConfig(steps=95, batch_size=4, log_every=10,
                                                                   eval_size=8, seed=5, decay_steps=0))
    t.snapshots = SnapshotRecorder(budget=MEMORY_BUDGET if budget is None else 1, spill=spill)
    if budget is not None:  # the bytes of `budget` snapshots, known once the first is taken
        t.snapshots.offer(0, t.model, math.nan)
        t.snapshots.budget = budget * t.snapshots._bytes
    t.run(50)
    middle = final_checkpoint(t)
    t.run(45)
    return middle, final_checkpoint(t), list(t.snapshots.steps)


@pytest.mark.parametrize("fault", ["no temporary folder", "disk full after 3 snapshots"])
def test_a_run_whose_spill_file_fails_holds_its_snapshots_in_memory_and_writes_the_same_file(fault, monkeypatch):
    """Faults: no temporary file can be made, or the disk fills mid-run. The run goes on with
    its snapshots in memory (those already in the file read back) and writes the checkpoint a run that held
    them in memory from the start writes."""
    import tempfile

    from core.model import snapshots

    held = _run_checkpoints(False, 6, monkeypatch)
    if fault == "no temporary folder":
        def refuse(*a, **k):
            raise PermissionError(13, "Permission denied: the temporary folder")
        monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    else:
        real, writes = snapshots.SpillFile.write, []

        def fill(self, model):
            writes.append(1)
            if len(writes) > 3:
                raise OSError(28, "No space left on device")
            return real(self, model)
        monkeypatch.setattr(snapshots.SpillFile, "write", fill)
    assert _run_checkpoints(True, 6, monkeypatch) == held


def test_a_spilled_snapshot_reads_back_as_its_weights_and_leaves_memory():
    """The spill file holds the packed float16 weights; reading gives them back, one buffer per snapshot."""
    from core.model.snapshots import pack

    t = _trainer(steps=20)
    rec = SnapshotRecorder()
    rec.offer(0, t.model, math.nan)
    packed = pack(t.model)
    back = rec.states[0]
    assert list(back) == list(packed)
    for k, v in packed.items():
        assert back[k].dtype == torch.float16 and torch.equal(back[k], v), k
    storages = {v.untyped_storage().data_ptr() for v in back.values()}
    assert len(storages) == 1
    assert rec._spill._file.seek(0, 2) == rec._spill.slot_bytes


def test_version_1_files_still_load(tmp_path):
    path = tmp_path / "v1.pt"
    torch.save(design_payload(), path)
    model, info = read_checkpoint(path)
    assert info["snapshots"] == [] and model.cfg.n_layers == 1


def _v2(**change) -> dict:
    payload = design_payload(n_layers=1, bias=True) | {"version": 2}
    sd = payload["state_dict"]
    snaps = [{"step": s, "state_dict": {k: (v * (s + 1)).half() for k, v in sd.items()}} for s in (0, 10, 20)]
    payload["snapshots"] = snaps
    for fn in change.values():
        fn(payload)
    return payload


def _refusal(tmp_path, name, fn) -> str:
    path = tmp_path / f"{name}.pt"
    torch.save(_v2(x=fn), path)
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    return str(err.value)


BAD = {
    "not-a-list": (lambda p: p.update(snapshots={"step": 0}), "not a list"),
    "missing-key": (lambda p: p["snapshots"][1]["state_dict"].pop("blocks.0.W_O"), "exactly the weights"),
    "extra-key": (lambda p: p["snapshots"][1]["state_dict"].update(extra=torch.zeros(2)), "exactly the weights"),
    "wrong-shape": (lambda p: p["snapshots"][2]["state_dict"].update({"blocks.0.W_K": torch.zeros(4, 32, 9)}),
                    "shape (4, 32, 9)"),
    "float64": (lambda p: p["snapshots"][0]["state_dict"].update(W_E=p["state_dict"]["W_E"].double()), "float16"),
    "bfloat16": (lambda p: p["snapshots"][0]["state_dict"].update(W_E=p["state_dict"]["W_E"].bfloat16()), "float16"),
    "integer": (lambda p: p["snapshots"][0]["state_dict"].update(W_E=p["state_dict"]["W_E"].long()), "float16"),
    "nan": (lambda p: p["snapshots"][1]["state_dict"]["W_E"].__setitem__((0, 0), math.nan), "NaN"),
    "inf": (lambda p: p["snapshots"][1]["state_dict"]["W_E"].__setitem__((0, 0), math.inf), "NaN or infinite"),
    "steps-equal": (lambda p: p["snapshots"][2].update(step=10), "must increase"),
    "steps-decreasing": (lambda p: p["snapshots"][2].update(step=5), "must increase"),
    "step-negative": (lambda p: p["snapshots"][0].update(step=-10), "whole number"),
    "step-float": (lambda p: p["snapshots"][0].update(step=0.0), "whole number"),
    "step-bool": (lambda p: p["snapshots"][0].update(step=True), "whole number"),
    "extra-entry": (lambda p: p["snapshots"][0].update(loss=1.0), "exactly the entries"),
    "not-a-dict": (lambda p: p["snapshots"].append([0, {}]), "exactly the entries"),
    "too-many": (lambda p: p.update(snapshots=[{"step": i, "state_dict": p["snapshots"][0]["state_dict"]}
                                              for i in range(MAX_SNAPSHOTS + 1)]), f"at most {MAX_SNAPSHOTS}"),
    "in-version-1": (lambda p: p.update(version=1), "version 1"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_every_bad_snapshot_is_refused_with_one_sentence(tmp_path, name):
    fn, phrase = BAD[name]
    message = _refusal(tmp_path, name, fn)
    assert _one_sentence(message), message
    assert phrase in message, message
    assert f"{name}.pt" in message


def test_a_good_version_2_file_written_by_hand_loads(tmp_path):
    path = tmp_path / "good.pt"
    payload = _v2()
    torch.save(payload, path)
    model, info = read_checkpoint(path)
    assert [s["step"] for s in info["snapshots"]] == [0, 10, 20]
    tokens = torch.randint(0, 16, (2, 12), generator=torch.Generator().manual_seed(0))
    snap = snapshot_model(model, info["snapshots"][1]["state_dict"])
    ref = snapshot_model(model, {k: v.float() for k, v in payload["snapshots"][1]["state_dict"].items()})
    assert torch.equal(snap(tokens), ref(tokens))


def _plateau_drop(n_steps=800, drop_at=300, width=30):
    """A loss curve at EVERY-step snapshots: 4.1 nats, then a linear fall to 0.3 over `width` steps."""
    steps = list(range(0, n_steps + 1, EVERY))
    losses = [4.1 if s < drop_at else max(0.3, 4.1 - 3.8 * (s - drop_at) / width) for s in steps]
    return steps, losses


@pytest.mark.parametrize("drop_at", [60, 150, 300, 610, 760])
@pytest.mark.parametrize("cap", [20, 31])
def test_thinning_keeps_every_10_steps_from_50_before_to_50_after_the_drop(drop_at, cap):
    steps, losses = _plateau_drop(drop_at=drop_at)
    kept = [steps[i] for i in keep_indices(steps, losses, cap)]
    assert len(kept) <= cap and kept[0] == 0
    start = max(s for s, l in zip(steps, losses) if l >= 3 and s < drop_at + 30)
    end = min(s for s, l in zip(steps, losses) if l < 1)
    for s in range(max(start - 50, 0), min(end + 50, 800) + 1, 10):
        assert s in kept, (s, kept)


@pytest.mark.parametrize("drop_at", [100, 250, 480])
def test_the_live_recorder_never_loses_the_drop_whatever_its_budget(drop_at):
    """Offered one step at a time with a budget of 20 snapshots, thinning as it goes (not knowing
    when the drop will come), the recorder still holds every 10th step across the drop."""
    steps, losses = _plateau_drop(drop_at=drop_at)
    model = torch.nn.Linear(1, 1)  # any module: only its state_dict is copied
    model.cfg = None
    rec = SnapshotRecorder(budget=20 * 4)  # the Linear's two float16 tensors take 4 bytes
    for s, l in zip(steps, losses):
        rec.offer(s, model, l)
        assert len(rec.steps) <= 20
    start = max(s for s, l in zip(steps, losses) if l >= 3 and s < drop_at + 30)
    end = min(s for s, l in zip(steps, losses) if l < 1)
    for s in range(max(start - 50, 0), min(end + 50, 800) + 1, 10):
        assert s in rec.steps, (s, rec.steps)
    assert MARGIN >= 50


# ---------------------------------------------------------------------------------------------
# The shipped 2-block file: its snapshots resolve the drop

SHIPPED_2BLOCK = shipped()


@pytest.fixture(scope="module")
def shipped_curve():
    if not SHIPPED_2BLOCK.is_file():
        pytest.fail("the shipped 2-block checkpoint is not installed")
    from core.training.trainer import eval_batch, evaluate
    model, info = read_checkpoint(SHIPPED_2BLOCK)
    tokens, periods = eval_batch(info["task"], model.cfg.vocab_size)
    rows = {}
    for snap in info["snapshots"]:
        rows[snap["step"]] = evaluate(snapshot_model(model, snap["state_dict"]), tokens, periods)
    return info, rows


def test_the_shipped_file_is_version_2_and_small():
    if not SHIPPED_2BLOCK.is_file():
        pytest.fail("the shipped 2-block checkpoint is not installed")
    assert SHIPPED_2BLOCK.stat().st_size <= 10 * 10**6
    assert torch.load(SHIPPED_2BLOCK, weights_only=True)["version"] == 2


def test_the_shipped_snapshots_hold_the_circuit_before_and_after_the_drop(shipped_curve):
    info, rows = shipped_curve
    steps = sorted(rows)
    before = [s for s in steps if rows[s]["loss_later_copies"] > 3 and max(rows[s]["induction"][1]) < 0.2]
    after = [s for s in steps if rows[s]["loss_later_copies"] < 1 and max(rows[s]["induction"][1]) > 0.5]
    assert before and after
    assert min(before) < min(after)


def test_the_shipped_snapshots_are_at_most_10_steps_apart_across_the_drop(shipped_curve):
    from core.training.transition import describe_curve
    info, rows = shipped_curve
    steps = sorted(rows)
    d = describe_curve(steps, [rows[s]["loss_later_copies"] for s in steps])
    assert d["dropped"]
    lo, hi = d["drop_start"] - 50, d["drop_end"] + 50
    dense = [s for s in steps if lo <= s <= hi]
    assert dense[0] <= max(lo, 0) and dense[-1] >= hi, (lo, hi, dense)
    assert all(b - a <= 10 for a, b in zip(dense, dense[1:])), dense


def test_a_file_read_mapped_gives_the_same_model_and_snapshots_as_its_bytes(tmp_path):
    """read_checkpoint(path, mmap=True) (how the server loads the shipped files) keeps the
    tensors as pages of the file; the model, its history and every snapshot equal a read of the bytes."""
    trainer = _trainer(steps=35)
    path = tmp_path / "mapped.pt"
    save_checkpoint(trainer.model, path, **trainer.checkpoint_fields())
    mapped, info = read_checkpoint(path, mmap=True)
    copied, info2 = read_checkpoint(path.read_bytes())
    for k, v in copied.state_dict().items():
        assert torch.equal(mapped.state_dict()[k], v), k
    assert repr(info["history"]) == repr(info2["history"])  # step 0 has a NaN train_loss
    assert [s["step"] for s in info["snapshots"]] == [s["step"] for s in info2["snapshots"]] == [0, 10, 20, 30]
    for a, b in zip(info["snapshots"], info2["snapshots"]):
        for k, t in b["state_dict"].items():
            assert a["state_dict"][k].dtype == t.dtype and torch.equal(a["state_dict"][k], t), k
