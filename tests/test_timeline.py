"""The training timeline (core.training.timeline): the film strip measured from a checkpoint's snapshots, and
the film strip of a run still training, from the patterns its worker streams with each logged row."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from core.model.config import ModelConfig
from core.model.tinycharlm import TinyCharLM
from core.pool.runs import RunPool
from core.pool.status import RunStatus
from core.training import timeline as tl
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

TWO = RunConfig.of(n_layers=2, period_min=4, period_max=8, seq_len=24, batch_size=4,
              steps=5000)


def test_frame_patterns_are_the_models_patterns_on_the_strip_sequence():
    """Against the model's own cached patterns (tests/test_model.py checks those against a naive
    reference): cropped, float16, causal rows summing to one."""
    torch.manual_seed(0)
    model = TinyCharLM(ModelConfig(vocab_size=16, d_model=32, n_heads=2, n_layers=1)).eval()
    tokens = torch.randint(0, 16, (1, 12))
    got = tl.frame_patterns(model, tokens).astype(np.float32)
    _, cache = model.run_with_cache(tokens)
    assert got.shape == (1, 2, 12, 12) and got.dtype == np.float32
    np.testing.assert_allclose(got[0], cache["pattern"][0][0].detach().numpy(), atol=1e-3)  # float16 storage
    assert np.allclose(np.triu(got[0], 1), 0) and np.allclose(got[0].sum(-1), 1, atol=1e-2)


def test_keep_frame_thins_old_frames_and_keeps_the_newest():
    frames = []
    for step in range(0, 25 * 300, 25):
        frames = tl.keep_frame(frames, step, np.zeros((1, 1, 2, 2), np.float16), cap=40)
        assert len(frames) <= 40 and frames[-1][0] == step
    steps = [s for s, _ in frames]
    assert steps == sorted(steps) and steps[0] == 0 and len(steps) >= 20


def planted_history(drop_at: int, last: int) -> list[dict]:
    """Loss 4 until drop_at, 2 at drop_at, 0.5 after; block-1 head 2 is the previous-token head,
    block-2 head 1 the induction head."""
    return [{"step": s, "loss_later_copies": 4.0 if s < drop_at else 2.0 if s == drop_at else 0.5,
             "prev_token": [[0.1, 0.9], [0.1, 0.1]], "induction": [[0.0, 0.0], [0.8, 0.1]]}
            for s in range(0, last + 1, 25)]


def test_live_strip_spreads_six_frames_across_the_drop_and_picks_heads_on_the_latest_row():
    frames = [(s, np.full((2, 2, 4, 4), s / 1000, np.float16)) for s in range(0, 1001, 25)]
    strip = tl.live_strip(frames, planted_history(500, 1000), 64, period=4)
    # the drop runs from 475 (last >= 3 nats) to 525 (first < 1): frames from 425 to 575
    assert strip["frames"][0] == 425 and strip["frames"][-1] == 575 and len(strip["frames"]) == 6
    assert strip["heads"] == {"previous-token": (0, 1), "induction": (1, 0)}
    for pats in strip["patterns"].values():
        assert pats.shape == (6, 4, 4)
        assert np.allclose(pats[:, 0, 0], [s / 1000 for s in strip["frames"]], atol=1e-3)
    before = tl.live_strip(frames[:10], planted_history(500, 225), 64, period=4)  # no drop yet: the run so far
    assert before["frames"][0] == 0 and before["frames"][-1] == 225 and not before["drop"]["dropped"]
    assert tl.live_strip([], [], 64, 4) is None


@pytest.mark.worker
def test_a_worker_streams_the_patterns_of_each_logged_step():
    """The frame at step 50 equals the patterns of the same run trained here to step 50."""
    pool = RunPool(capacity=1, hang_seconds=120)
    try:
        run = pool.start(TWO, "me")
        deadline = time.monotonic() + 120
        while (not run.frames or run.frames[-1][0] < 75) and time.monotonic() < deadline:
            time.sleep(0.05)
        frames = dict(run.frames)
        assert {0, 25, 50, 75} <= set(frames) and run.strip_period >= 4
        assert set(frames) <= {r["step"] for r in run.history()}  # one frame per logged row
        here = Trainer(*TWO.configs())
        here.run(50)
        tokens, period = tl.strip_tokens(here.task_cfg, here.model_cfg.vocab_size)
        assert period == run.strip_period
        want = tl.frame_patterns(here.model.eval(), tokens).astype(np.float32)
        np.testing.assert_allclose(frames[50].astype(np.float32), want, atol=2e-3)
        pool.stop(run)
        assert run.status == RunStatus.STOPPED and run.frames == []  # the checkpoint's snapshots take over
    finally:
        pool.shutdown()


def test_strip_tiles_colour_each_frames_pattern_and_leave_the_future_white():
    from ui.charts.timeline import _VIRIDIS, strip_tiles

    pattern = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]  # uniform over the visible keys
    pattern[3] = [0, 0, 0, 1]
    strip = {"frames": [10, 20], "heads": {"previous-token": (0, 1), "induction": None},
             "patterns": {"previous-token": np.stack([pattern, pattern])}}
    (label, (tiles, captions)), = strip_tiles(strip, scale=2).items()
    assert label == "previous-token head 1.2" and captions == ["1: step 10", "2: step 20"]
    tile = tiles[0]
    assert tile.shape == (8, 8, 3) and tile.dtype == np.uint8
    assert (tile[0:2, 2:4] == 255).all()  # query 0 cannot see key 1
    assert (tile[6, 6] == _VIRIDIS[-1]).all() and (tile[6, 0] == _VIRIDIS[0]).all()  # weight 1 and 0
    assert (tile[0, 0] == _VIRIDIS[-1]).all() and (tile[2:4, 0:2] == tile[2, 0]).all()  # 2x2 blocks


def test_a_frame_of_nan_weights_still_draws():
    """A diverging run's last frame can reach the page before its end: it must not break the strip."""
    from ui.charts.timeline import _VIRIDIS, strip_tiles

    strip = {"frames": [10], "heads": {"previous-token": (0, 0), "induction": None},
             "patterns": {"previous-token": np.full((1, 3, 3), np.nan)}}
    (_, (tiles, _)), = strip_tiles(strip, scale=1).items()
    assert (tiles[0][2, 0] == _VIRIDIS[0]).all() and (tiles[0][0, 2] == 255).all()


def test_strip_pngs_are_the_strip_tiles_encoded_and_each_tile_is_encoded_once():
    import io

    from PIL import Image

    from ui.charts import timeline as tc

    rng = np.random.default_rng(0)
    pats = np.tril(rng.random((3, 6, 6))).astype(np.float32)
    strip = {"frames": [0, 25, 50], "heads": {"previous-token": (0, 1), "induction": (1, 0)},
             "patterns": {"previous-token": pats, "induction": pats[::-1].copy()}}
    pngs, tiles = tc.strip_pngs(strip), tc.strip_tiles(strip)
    assert list(pngs) == list(tiles)
    for (encoded, captions), (raw, raw_captions) in zip(pngs.values(), tiles.values()):
        assert captions == raw_captions
        for png, tile in zip(encoded, raw):
            assert (np.asarray(Image.open(io.BytesIO(png)).convert("RGB")) == tile).all()
    again = tc.strip_pngs({**strip, "frames": [0, 25, 75]})  # the next row: the same patterns, new steps
    assert all(a is b for row in pngs for a, b in zip(pngs[row][0], again[row][0]))
    assert again["previous-token head 1.2"][1][-1] == "3: step 75"


def test_a_timeline_step_measured_in_chunks_is_the_whole_batch_measured_at_once():
    """measure_step takes the evaluation batch CHUNK sequences at a time (the server's memory at the end of a
    run, bench/README.md "Server memory"): on the shipped 2-block run's snapshots its numbers are, bit for bit, those
    of the whole batch through run_with_cache at once, as the timeline measured them before."""
    import torch.nn.functional as F

    from core.model.checkpoints import read_checkpoint
    from core.model.snapshots import snapshot_model
    from core.model.task import copy_masks
    from core.training.trainer import eval_batch

    from helpers import ROOT

    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    tokens, periods = eval_batch(info["task"], model.cfg.vocab_size)
    snaps = info["snapshots"]
    assert tokens.shape[0] > tl.CHUNK
    for m in [snapshot_model(model, snaps[i]["state_dict"]) for i in (0, len(snaps) // 2)] + [model.eval()]:
        logits, cache = m.run_with_cache(tokens, per_head=False)
        T = tokens.shape[1]
        per = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1),
                              reduction="none").view(-1, T - 1)
        got = tl.measure_step(m, tokens, periods)
        assert got["loss_later"] == float(per[copy_masks(periods, T)["later"]].mean())
        assert np.array_equal(got["loss_by_position"], per.mean(0).detach().numpy())
        assert np.array_equal(got["pattern0"], torch.stack([p[0] for p in cache["pattern"]]).detach().numpy())
