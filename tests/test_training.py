"""Training: a short run learns, presets say what they claim, chunking changes nothing, the stop
check, the manifest and the transition study, and the shipped checkpoints show the source's figures."""
from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest
import torch

from core.model.checkpoints import read_checkpoint
from core.model.config import ModelConfig
from core.model.metrics import METRIC_NAMES, copy_metrics
from core.model.task import TaskConfig, sample_batch
from core.reading.copying import ov_copying_matrix, ov_diag_top1
from core.reading.report import build_report
from core.training.config import TrainConfig
from core.training.presets import PRESETS, get_preset
from core.training.train import build_parser, configs_from_args
from core.training.trainer import LaterCopyLoss, Trainer, eval_batch, training_batches
from core.training.transition import describe_curve, load_study, study_command, summarize

from helpers import CHECKPOINTS as CKPT
from helpers import shipped

N_SEQS = 96  # report sample for the shipped-checkpoint checks: quick, and stable to about +-0.02

EASY_MODEL = ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=1, bias=True)
EASY_TASK = TaskConfig(period_min=6, period_max=6, seq_len=18)


def _rows(trainer: Trainer) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in trainer.history]


# ---------------------------------------------------------------------------------------------
# Training behaviour


def test_short_run_on_an_easy_setting_learns():
    """One block with biases on one fixed period learns the fixed-offset copy: the second-copy loss
    falls from ln 16 = 2.77 nats to well under 1 nat (an untrained model cannot beat 2.77)."""
    # the plain initialisation, as the fixed-period preset uses: the enlarged embedding of the default is
    # tuned for d_model 128 (its logits start at about 9 nats here)
    trainer = Trainer(EASY_MODEL, EASY_TASK, TrainConfig(steps=150, batch_size=16, lr=3e-2, log_every=50, eval_size=64,
                                                         embed_scale=1.0, embed_shared=0.0))
    start = trainer.history[0]["loss_second_copy"]
    trainer.run(150)
    end = trainer.history[-1]
    assert start > 2.5
    assert end["loss_second_copy"] < 1.0, end
    assert end["acc_second_copy"] > 0.7, end


def test_embedding_init_scales_rows_and_adds_one_shared_direction():
    """embed_scale multiplies the plain init of W_E; embed_shared adds the same vector, of exactly that
    norm, to every row. Nothing else in the model changes."""
    model_cfg = dataclasses.replace(EASY_MODEL, bias=False)
    plain = Trainer(model_cfg, EASY_TASK, TrainConfig(steps=0, embed_scale=1.0, embed_shared=0.0)).model
    shaped = Trainer(model_cfg, EASY_TASK, TrainConfig(steps=0, embed_scale=2.5, embed_shared=3.0)).model
    diff = shaped.W_E.detach() - 2.5 * plain.W_E.detach()  # [V, D]: one row repeated
    assert torch.allclose(diff, diff[:1].expand_as(diff), atol=1e-5)
    assert diff[0].norm().item() == pytest.approx(3.0, rel=1e-5)
    for name, tensor in plain.state_dict().items():
        if name != "W_E":
            assert torch.equal(tensor, shaped.state_dict()[name]), name
    for bad in ({"embed_scale": 0.0}, {"embed_shared": -1.0}, {"embed_scale": math.inf}):
        with pytest.raises(ValueError, match="embed_"):
            TrainConfig(**bad).validate()


def test_chunked_running_equals_one_run():
    """run(7) then run(13) leaves exactly the weights and history of one run(20)."""
    cfg = TrainConfig(steps=20, batch_size=8, lr=1e-2, log_every=5, eval_size=16, seed=3)
    model_cfg = dataclasses.replace(EASY_MODEL, n_layers=2, bias=False)
    a, b = Trainer(model_cfg, EASY_TASK, cfg), Trainer(model_cfg, EASY_TASK, cfg)
    assert a.run(7) == 7 and a.run(13) == 13
    assert b.run(20) == 20
    assert a.step == b.step == 20 and a.done
    assert _rows(a) == _rows(b)
    assert [r["step"] for r in a.history] == [0, 5, 10, 15, 20]
    for (k, va), (_, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(va, vb), k
    assert a.run(5) == 0  # never past cfg.steps


def test_stop_at_loss_stops_at_the_first_check_below_and_logs_it():
    cfg = TrainConfig(steps=40, batch_size=8, lr=3e-2, log_every=1000, check_every=4, eval_size=16)
    trainer = Trainer(EASY_MODEL, EASY_TASK, cfg)
    trainer.run(40, stop_at_loss=100.0)  # any loss is below 100: the first check stops the run
    assert trainer.stopped_early
    first = trainer.stop_checks[0][0]
    assert trainer.step == first <= 4
    assert trainer.history[-1]["step"] == trainer.step  # the stopping step is logged with head scores
    assert trainer.reached(100.0)

    never = Trainer(EASY_MODEL, EASY_TASK, cfg)
    never.run(12, stop_at_loss=-1.0)
    assert not never.stopped_early and never.step == 12


def test_gated_stop_checks_are_at_least_check_gap_steps_apart():
    """A training loss that stays near the target (here: always, with a huge margin) triggers a check
    at most once per check_gap steps; check_gap=1 checks every step."""
    base = TrainConfig(steps=12, batch_size=8, log_every=1000, check_every=1000, check_margin=100.0, eval_size=16)
    for gap, expected in ((3, [3, 6, 9]), (1, list(range(1, 12)))):  # step 12, the last, is a full log
        trainer = Trainer(EASY_MODEL, EASY_TASK, dataclasses.replace(base, check_gap=gap))
        trainer.run(12, stop_at_loss=-1.0)
        assert [s for s, _ in trainer.stop_checks] == expected, gap


def test_stop_check_equals_the_logged_metric():
    """The fused stop check gives the same loss_later_copies as the full evaluation."""
    trainer = Trainer(dataclasses.replace(EASY_MODEL, n_layers=2), EASY_TASK,
                      TrainConfig(steps=10, batch_size=8, log_every=10, eval_size=32))
    trainer.run(10)
    assert trainer.check_loss() == pytest.approx(trainer.history[-1]["loss_later_copies"], abs=1e-5)
    tokens, periods = eval_batch(EASY_TASK, 16, 32)
    assert LaterCopyLoss(tokens, periods)(trainer.model) == pytest.approx(trainer.check_loss(), abs=1e-6)


def test_training_batches_is_the_trainers_stream():
    """training_batches replays what a Trainer draws (pages regenerate training data with it),
    including a shorter training length."""
    task = TaskConfig(4, 8, 24)
    for seq_len in (0, 16):
        cfg = TrainConfig(steps=3, batch_size=4, seed=5, seq_len=seq_len, log_every=10)
        trainer = Trainer(dataclasses.replace(EASY_MODEL, n_layers=1), task, cfg)
        drawn = []
        real_next = trainer.batches.__next__

        class Spy:
            def __next__(self, real_next=real_next, drawn=drawn):
                batch = real_next()
                drawn.append(batch)
                return batch

        trainer.batches = Spy()
        trainer.run(3)
        replay = training_batches(task, 16, cfg.to_dict())
        for tokens, periods in drawn:
            t2, p2 = next(replay)
            assert torch.equal(tokens, t2) and torch.equal(periods, p2)
        assert drawn[0][0].shape == (4, seq_len or 24)


def test_training_length_must_hold_a_second_copy():
    with pytest.raises(ValueError, match="seq_len"):
        TrainConfig(seq_len=40).train_task(TaskConfig())  # periods up to 32 need 64
    with pytest.raises(ValueError, match="above"):
        TrainConfig(seq_len=128).train_task(TaskConfig())
    assert TrainConfig(seq_len=64).train_task(TaskConfig()).seq_len == 64


# ---------------------------------------------------------------------------------------------
# Presets


def test_presets_produce_the_configs_they_claim():
    expect = {  # docs/DESIGN.md "Presets": blocks, bias, periods
        "fixed-period-1block-bias": (1, True, 32, 32),
        "variable-period-1block": (1, False, 16, 32),
        "zero-block": (0, False, 16, 32),
        "variable-period-2block": (2, False, 16, 32),
    }
    assert set(PRESETS) == set(expect)
    for name, (blocks, bias, lo, hi) in expect.items():
        p = get_preset(name)
        assert (p.model.n_layers, p.model.bias, p.task.period_min, p.task.period_max) == (blocks, bias, lo, hi)
        assert (p.model.vocab_size, p.model.d_model, p.model.n_heads) == (64, 128, 4)
        assert p.task.seq_len == 96
        model, task, train = configs_from_args(build_parser().parse_args(["--preset", name, "--out", "x.pt"]))
        assert (model, task, train) == (p.model, p.task, p.train)
    # the one-block comparison gets the same training budget as the two-block run
    assert get_preset("variable-period-1block").train == get_preset("variable-period-2block").train
    # explicit flags override the preset
    model, task, train = configs_from_args(build_parser().parse_args(
        ["--preset", "variable-period-2block", "--out", "x.pt", "--layers", "1", "--steps", "9", "--seed", "4"]))
    assert (model.n_layers, train.steps, train.seed) == (1, 9, 4)
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("three-block")


def test_default_training_config_is_the_live_default():
    """The live page starts from the 2-block preset; TrainConfig() holds the same settings."""
    assert get_preset("variable-period-2block").train == TrainConfig()
    assert get_preset("fixed-period-1block-bias").train != TrainConfig()  # its own short, fast run


# ---------------------------------------------------------------------------------------------
# Shipped checkpoints


def _load(preset: str):
    path = CKPT / f"{preset}.pt"
    assert path.is_file(), f"missing shipped checkpoint {path.name}"
    assert path.stat().st_size <= 10 * 10**6  # format v2 with snapshots: at most 10 MB, so a clone stays small
    return read_checkpoint(path)


def _grid(report: dict, score: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for h in report["heads"]:
        out.setdefault(h["layer"], []).append(h[score])
    return out


@pytest.fixture(scope="module")
def two_block_report():
    """The shipped 2-block model and its report on N_SEQS sequences (built once for the tests below)."""
    model, info = _load("variable-period-2block")
    return model, build_report(model, info["task"], n_seqs=N_SEQS)


def test_two_block_checkpoint_does_induction(two_block_report):
    model, r = two_block_report
    assert r["metrics"]["loss_later_copies"] <= 0.45
    assert r["metrics"]["acc_later_copies"] >= 0.87
    prev, ind = _grid(r, "prev_token"), _grid(r, "induction")
    # the previous-token signal is in block 1 (summed over its heads), the induction attention in block 2
    assert sum(prev[0]) >= 0.9 and sum(prev[1]) < 0.3
    assert sum(v >= 0.4 for v in ind[1]) >= 2 and max(ind[0]) < 0.1
    # and block 2 copies: its summed OV circuit, read from what block 1 makes of each token, puts the
    # attended token's own logit on top
    C = ov_copying_matrix(model, 1, None, effective=True)
    assert ov_diag_top1(C) >= 0.9


def test_two_block_heads_are_as_sharp_as_the_source(two_block_report):
    """The source's figure: one block-1 head at 0.95 previous-token, block-2 heads at 0.65-0.71 induction."""
    r = two_block_report[1]
    assert max(_grid(r, "prev_token")[0]) >= 0.9
    assert sum(v >= 0.6 for v in _grid(r, "induction")[1]) >= 2


def test_one_block_checkpoint_cannot_do_induction():
    model, info = _load("variable-period-1block")
    two = _load("variable-period-2block")[1]
    assert info["train"]["steps_done"] == two["train"]["steps_done"]  # same budget
    r = build_report(model, info["task"], n_seqs=N_SEQS)
    assert r["metrics"]["loss_later_copies"] >= 3.0
    assert r["metrics"]["acc_later_copies"] <= 0.2


def test_fixed_period_checkpoint_learns_a_fixed_offset():
    model, info = _load("fixed-period-1block-bias")
    assert info["config"].bias and info["config"].n_layers == 1
    r32 = build_report(model, info["task"], period=32, n_seqs=N_SEQS)
    assert r32["metrics"]["loss_second_copy"] <= 0.1
    assert r32["metrics"]["acc_second_copy"] >= 0.99
    r24 = build_report(model, info["task"], period=24, offsets=[23, 31], n_seqs=N_SEQS)
    assert r24["metrics"]["acc_later_copies"] <= 0.1
    mass = {(m["layer"], m["head"], m["offset"]): m["mass"] for m in r24["offset_mass"]}
    assert any(mass[(0, h, 31)] >= 0.9 and mass[(0, h, 23)] <= 0.05 for h in range(model.cfg.n_heads))


def test_zero_block_checkpoint_is_the_gram_form():
    model, info = _load("zero-block")
    assert model.cfg.n_layers == 0
    tokens = torch.arange(model.cfg.vocab_size)[None, :]
    with torch.no_grad():
        logits = model(tokens)[0]
        gram = model.W_E @ model.W_E.T
    assert torch.equal(logits, gram)


def test_checkpoints_carry_their_training_history():
    for preset in PRESETS:
        model, info = _load(preset)
        history = info["history"]
        assert history and history[0]["step"] == 0 and history[-1]["step"] == info["train"]["steps_done"]
        L, H = model.cfg.n_layers, model.cfg.n_heads
        for row in history:
            assert math.isfinite(row["loss_later_copies"])
            for score in ("prev_token", "induction"):
                assert len(row[score]) == L and all(len(heads) == H for heads in row[score])


def test_manifest_lists_every_checkpoint_with_its_measurements():
    data = json.loads((CKPT / "manifest.json").read_text())
    rows = {r["file"]: r for r in data["checkpoints"]}
    assert set(rows) == {p.name for p in CKPT.glob("*.pt")} == {f"{name}.pt" for name in PRESETS}
    for file, row in rows.items():
        model, info = read_checkpoint(CKPT / file)
        assert row["preset"] == file[:-3] == info["train"]["preset"]
        assert row["seed"] == info["train"]["seed"]
        assert row["command"].startswith(f"python -m core.train --preset {row['preset']} --out checkpoints/{file}")
        assert row["train"]["steps_done"] == info["train"]["steps_done"]
        # the recorded figures are those of the file: the manifest measures build_report's sample (256
        # sequences, seed 0); its copy metrics are one forward pass (the whole report also ablates every head)
        g = torch.Generator().manual_seed(0)
        tokens, periods = sample_batch(info["task"], 256, model.cfg.vocab_size, generator=g)
        with torch.no_grad():
            measured = copy_metrics(model(tokens), tokens, periods)
        for name in METRIC_NAMES:
            if math.isfinite(row["metrics"][name]):
                assert row["metrics"][name] == pytest.approx(measured[name], abs=1e-4), (file, name)


# ---------------------------------------------------------------------------------------------
# The transition study


def test_describe_curve_on_hand_made_curves():
    steps = list(range(0, 200, 10))
    sharp = [4.1] * 10 + [3.5, 2.0, 0.8] + [0.2] * 7  # 3.5 at 100, 0.8 at 120
    d = describe_curve(steps, sharp)
    assert d["dropped"] and d["abrupt"]
    assert (d["drop_start"], d["drop_end"], d["width"], d["drop_step"]) == (100, 120, 20, 110)
    assert d["plateau_loss"] == pytest.approx(4.1)
    slow = [4.1 - 0.2 * i for i in range(20)]  # linear, 3.1 at 50, 0.9 at 160
    d = describe_curve(steps, slow)
    assert d["dropped"] and not d["abrupt"] and d["width"] == 110
    flat = describe_curve(steps, [3.6] * 20)
    assert not flat["dropped"] and flat["drop_step"] is None and flat["width"] is None


def test_head_figures_and_their_summary():
    """The optional head columns: block 1's best prev_token, the count of last-block heads with
    induction_any >= 0.6 and the two largest induction_any; the summary counts runs with a sharp
    previous-token head and with two induction heads, and the Train page's sentence says so."""
    from core.training.transition import head_figures
    from ui.text import study_sentence

    fig = head_figures([[0.1, 0.93, 0.0], [0.0, 0.1, 0.2]], [[0.0, 0.0, 0.0], [0.61, 0.6, 0.59]])
    assert fig == {"prev_token_block1": 0.93, "induction_heads": 2, "induction_any_max": 0.61, "induction_any_2nd": 0.6}
    assert head_figures([[0.2]], [[0.7]]) == {"prev_token_block1": 0.2, "induction_heads": 1, "induction_any_max": 0.7,
                                             "induction_any_2nd": None}
    steps = list(range(0, 200, 10))
    curve = [4.0] * 10 + [0.4] * 10
    rows = [{"blocks": 2, "seed": i, "steps_run": 190, **describe_curve(steps, curve),
             "prev_token_block1": p, "induction_heads": k} for i, (p, k) in enumerate([(0.95, 4), (0.5, 2), (0.97, 1)])]
    s = summarize(pd.DataFrame(rows)).set_index("blocks")
    assert (s.loc[2, "sharp_prev_token"], s.loc[2, "two_induction_heads"]) == (2, 2)
    sentence = study_sentence(summarize(pd.DataFrame(rows)), 2)
    assert "3 seeds dropped" in sentence and "2 of 3 had a block-1 head" in sentence and "2 had two or more" in sentence


def test_shipped_transition_study_loads():
    from core.training.transition import STUDY_FILE

    if not STUDY_FILE.is_file():
        pytest.fail("checkpoints/transition_study.csv is not shipped yet (bench/transition_study.py writes it)")
    frame = load_study()
    assert set(frame["blocks"]) == {1, 2}
    assert (frame.groupby("blocks").size() >= 10).all()
    assert study_command().startswith("python bench/transition_study.py")
    s = summarize(frame).set_index("blocks")
    assert s.loc[1, "dropped"] == 0  # one block never gets the later copies
    assert s.loc[2, "dropped"] >= 1


def test_linear_decay_schedule_and_its_old_name():
    """lr is held, then falls linearly over the last decay_steps to 10% of lr; checkpoints written
    before the rename store schedule="constant" and still load as the same schedule."""
    cfg = TrainConfig(steps=10, lr=1.0, decay_steps=4)
    trainer = Trainer(EASY_MODEL, EASY_TASK, cfg)
    lrs = [trainer.lr_at(s) for s in range(10)]
    assert lrs[:6] == [1.0] * 6 and lrs[6:] == pytest.approx([1.0, 0.775, 0.55, 0.325])
    old = TrainConfig.from_dict({"steps": 10, "lr": 1.0, "decay_steps": 4, "schedule": "constant"}).validate()
    assert old.schedule == "linear_decay" and old == cfg
    stored = read_checkpoint(shipped())[1]["train"] | {"schedule": "constant"}  # as files before the rename hold it
    loaded = TrainConfig.from_dict(stored).validate()
    assert loaded.schedule == "linear_decay"
    with pytest.raises(ValueError, match="linear_decay"):
        TrainConfig(schedule="step").validate()
