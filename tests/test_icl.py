"""In-context learning (core/training/icl.py): the typed-symbol mapping, the restart sampler, the training
replay, and the checks on the shipped two-block model."""
import math

import pytest
import torch

import core.model.task as task_mod
from core.model.checkpoints import read_checkpoint
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.reading.restarts import restart_context_probe, restart_curve, restart_positions, sample_restarts
from core.training.config import TrainConfig
from core.training.icl import in_context_check, predict_each, random_pattern, replay_training_sequences, tile
from core.training.trainer import Trainer

from helpers import ROOT, SHIPPED, open_app, shipped, tiny_model

TASK = TaskConfig(period_min=4, period_max=6, seq_len=20)


def test_tile_and_random_pattern():
    assert tile([1, 2, 3], 7) == [1, 2, 3, 1, 2, 3, 1]
    p = random_pattern([5, 9], 50, seed=1)
    assert set(p) == {5, 9} and p == random_pattern([5, 9], 50, seed=1)


def test_predict_each_matches_the_model():
    model = tiny_model(2, seed=1)
    tokens = [3, 1, 4, 1, 5, 9, 2, 6, 3, 1, 4, 1]
    rows = predict_each(model, tokens, period=6)
    probs = model(torch.tensor([tokens]))[0].softmax(-1)
    assert [r["position"] for r in rows] == list(range(1, 12))
    for r in rows:
        p = probs[r["position"] - 1]
        assert r["predicted"] == int(p.argmax())
        assert math.isclose(r["p_target"], float(p[r["target"]].detach()), rel_tol=1e-5)
        assert r["correct"] == (r["predicted"] == r["target"])
    assert [r["copy"] for r in rows[:7]] == ["first"] * 5 + ["second"] * 2


def test_restart_segments_are_fresh_tiled_patterns():
    rb = sample_restarts(TASK, 200, 16, n_restarts=2, generator=torch.Generator().manual_seed(0))
    assert not rb.restart[:, 0].any() and (rb.restart.sum(-1) == 2).all()
    for b in range(200):
        for t in range(20):
            assert (rb.since[b, t] == 0) == (t == 0 or bool(rb.restart[b, t]))
            if rb.since[b, t] >= rb.period[b, t]:  # inside a segment the pattern repeats
                assert rb.tokens[b, t] == rb.tokens[b, t - rb.period[b, t]]
    assert ((rb.period >= 4) & (rb.period <= 6)).all()
    assert torch.equal(rb.after_restart, rb.restart.long().cumsum(-1) > 0)


def test_restart_positions_do_not_depend_on_tokens():
    """Same random numbers for the positions, different ones for the tokens: same restarts."""
    a = sample_restarts(TASK, 64, 16, 1, torch.Generator().manual_seed(3), torch.Generator().manual_seed(10))
    b = sample_restarts(TASK, 64, 16, 1, torch.Generator().manual_seed(3), torch.Generator().manual_seed(11))
    assert torch.equal(a.restart, b.restart) and not torch.equal(a.tokens, b.tokens)
    assert torch.equal(a.restart, restart_positions(64, 20, 1, torch.Generator().manual_seed(3)))


def test_restart_rate_is_the_same_whatever_the_tokens():
    """Statistically: P(restart at t | token at t = a), P(restart | token at t-1 = a) and
    P(restart | the new token happens to continue the old pattern) all match the overall rate."""
    V, B = 8, 6000
    rb = sample_restarts(TASK, B, V, n_restarts=1, generator=torch.Generator().manual_seed(5))
    r = rb.restart[:, 1:].float()
    rate = float(r.mean())
    assert math.isclose(rate, 1 / 19, rel_tol=1e-6)  # one restart over positions 1..19
    for tok in (rb.tokens[:, 1:], rb.tokens[:, :-1]):
        for a in range(V):
            sel = tok == a
            n = int(sel.sum())
            se = math.sqrt(rate * (1 - rate) / n)
            assert abs(float(r[sel].mean()) - rate) < 4.5 * se, (a, float(r[sel].mean()), rate)
    # positions: each of 1..T-1 equally often
    counts = rb.restart[:, 1:].sum(0).float()
    expected = B / 19
    assert ((counts - expected).abs() < 4.5 * math.sqrt(expected)).all()
    # at a restart, the new token equals what the old pattern would have shown only by chance (1/V)
    t_idx = rb.restart.float().argmax(-1)
    old_p = rb.period.gather(1, (t_idx - 1).clamp(min=0)[:, None])[:, 0]
    ok = t_idx >= old_p  # the old pattern has a token to continue from
    prev = rb.tokens.gather(1, (t_idx - old_p).clamp(min=0)[:, None])[:, 0]
    same = (prev == rb.tokens.gather(1, t_idx[:, None])[:, 0])[ok].float()
    assert abs(float(same.mean()) - 1 / V) < 4.5 * math.sqrt((1 / V) * (1 - 1 / V) / len(same))


def test_restart_curve_counts_every_target():
    model = tiny_model(2, seed=2)
    curve = restart_curve(model, TASK, n_seqs=50, seed=0, chunk=16)
    assert sum(curve["n_restart"]) + sum(curve["n_start"]) == 50 * 19
    assert sum(curve["n_rel_restart"]) == sum(curve["n_restart"])
    assert all(0 <= a <= 1 for a in curve["acc_restart"])
    assert curve["n_start"][0] == 0  # position 0 is never a target
    assert curve["summary"]["n_after_restart"] == sum(curve["n_restart"])


def test_replay_gives_the_sequences_the_trainer_drew(monkeypatch):
    """The replay mirrors core.training.trainer exactly: record what the trainer samples (through the task,
    core.model.task.TaskConfig.sample) and compare."""
    drawn = []
    real = task_mod.sample_batch

    def recording(task, batch_size, vocab_size, generator=None, period=None):
        out = real(task, batch_size, vocab_size, generator=generator, period=period)
        drawn.append((generator, out[0]))
        return out

    monkeypatch.setattr(task_mod, "sample_batch", recording)
    cfg = TrainConfig(steps=5, batch_size=3, seed=4, log_every=100, eval_size=4)
    t = Trainer(ModelConfig(vocab_size=16, d_model=32, n_heads=4, n_layers=1), TASK, cfg)
    t.run(5)
    train_batches = [tok for _, tok in drawn if tok.shape[0] == 3]  # the evaluation batch has 4
    assert len(train_batches) == 5
    train = t.checkpoint_fields()["train"]
    tokens, periods = replay_training_sequences(TASK, 16, train, n_seqs=7)
    assert torch.equal(tokens, torch.cat(train_batches)[-7:])
    tokens, _ = replay_training_sequences(TASK, 16, train, n_seqs=4, end_step=3)
    assert torch.equal(tokens, torch.cat(train_batches[:3])[-4:])
    assert replay_training_sequences(TASK, 16, {"seed": 1}, 7) is None
    assert replay_training_sequences(TASK, 16, train, 7, end_step=6) is None


@pytest.fixture(scope="module")
def two_block():
    return read_checkpoint(shipped())


def test_shipped_model_is_as_good_on_unseen_patterns(two_block):
    """Sequences seen halfway through training and never-seen ones score alike; a swapped first copy
    drops the second copy to near chance."""
    model, info = two_block
    check = in_context_check(model, info["task"], info["train"], n_seqs=128)
    mid, fresh, swapped = check["seen_mid"], check["fresh"], check["swapped"]
    assert mid is not None and check["seen_last"] is not None and fresh["acc_second"] > 0.5
    se = math.hypot(mid["acc_second_se"], fresh["acc_second_se"])
    assert abs(mid["acc_second"] - fresh["acc_second"]) < 4 * se
    assert abs(mid["loss_first"] - fresh["loss_first"]) < 0.1
    assert swapped["acc_second"] < 0.2
    assert check["p_fresh_in_training"] < 1e-10


def test_shipped_model_predicts_again_one_exposure_after_a_restart(two_block):
    """Chance through the new pattern's first copy and on its second copy's first token; far above
    chance at the first token it could know; right from the next one on."""
    model, info = two_block
    s = restart_curve(model, info["task"], n_seqs=192, seed=1)["summary"]
    assert s["first_copy"] < 0.25 < s["first_predictable"]
    assert s["second_copy_first_token"] < 0.25  # its predecessor was never followed by anything yet
    assert s["rest"] > 0.9
    assert s["median_lag"] <= 1


def test_restart_context_probe_shows_the_two_token_match(two_block):
    """The shipped model matches two tokens: its first knowable prediction after a restart is right
    about half the time as sampled, and nearly always once the token before the restart agrees.
    A one-block model is at chance either way."""
    model, info = two_block
    probe = restart_context_probe(model, info["task"], n_seqs=256, seed=0)
    assert probe["n"] > 100
    assert probe["two_tokens_match"] > 0.9 and probe["two_tokens_match"] - probe["as_sampled"] > 0.2, probe
    one, one_info = read_checkpoint(ROOT / "checkpoints" / "variable-period-1block.pt")
    flat = restart_context_probe(one, one_info["task"], n_seqs=256, seed=0)
    assert max(flat["as_sampled"], flat["two_tokens_match"]) < 0.2, flat


# ---------------------------------------------------------------------------------------------
# The page, through AppTest, with every shipped checkpoint



@pytest.mark.app
@pytest.mark.parametrize("file", SHIPPED)
def test_icl_page_with_every_shipped_checkpoint(file):
    at = open_app("app_pages/icl.py", file)
    assert not at.warning
    assert len(at.metric) == 6  # the restart summary and the one-or-two-tokens probe
    infos = " ".join(i.value for i in at.info)
    assert ("cannot build an induction circuit" in infos) == (file != "variable-period-2block.pt")
    if file == "variable-period-2block.pt":
        text = " ".join(m.value for m in at.markdown)
        assert "second copy**:" in text or "second copy" in text
        assert at.dataframe[0].value.shape[0] == 4  # seen halfway, seen last, fresh, swapped
        # the probe's first number is the restart summary's "2nd token" figure: the same sequences
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["first knowable token"] == metrics["2nd copy, 2nd token"]


@pytest.mark.app
def test_icl_page_bad_typed_input_gets_a_message():
    at = open_app("app_pages/icl.py", "variable-period-2block.pt")
    for text, words in [("", "at least one symbol"), ("abc+def", "no token for"), ("Zürich", "'ü'"),
                        ("A" * 97, "the limit here is 96")]:
        at.text_input(key="icl_text").set_value(text).run()
        assert not at.exception
        assert any(words in w.value for w in at.warning), (text, [w.value for w in at.warning])
        assert len(at.metric) == 6  # the rest of the page still renders
    at.text_input(key="icl_text").set_value("abcdefghijklmnopq").run()
    assert not at.warning  # and a good pattern clears the message


@pytest.mark.app
def test_icl_page_draw_mode_and_bad_symbol_set():
    at = open_app("app_pages/icl.py", "variable-period-2block.pt")
    at.radio(key="icl_mode").set_value("draw").run()
    assert not at.exception and not at.warning
    at.text_input(key="icl_pool").set_value("AB?").run()
    assert any("'?'" in w.value for w in at.warning)


def test_recovery_counts_tokens_until_predictions_are_right_again():
    from core.reading.restarts import RUN, RestartBatch, _recoveries

    T = 14
    restart = torch.zeros(1, T, dtype=torch.bool)
    restart[0, 3] = True
    period = torch.tensor([[5] * 3 + [4] * 11])
    rb = RestartBatch(torch.zeros(1, T, dtype=torch.long), restart, torch.zeros(1, T, dtype=torch.long), period,
                      restart.long().cumsum(-1) > 0)
    correct = torch.zeros(1, T - 1, dtype=torch.bool)  # targets 1..T-1
    correct[0, 4 - 1] = True  # a lone lucky hit at target 4 does not count
    correct[0, 8 - 1:8 - 1 + RUN] = True  # right from target 8 = restart + 5 (one period + 1) on
    assert _recoveries(rb, correct) == [(5, 4)]
    assert _recoveries(rb, torch.zeros(1, T - 1, dtype=torch.bool)) == [(None, 4)]


def test_restart_example_is_a_sampler_draw_with_room_for_both_patterns():
    from core.reading.restarts import RUN, restart_example

    task = TaskConfig(period_min=4, period_max=8, seq_len=30)
    for seed in range(5):
        ex = restart_example(task, 16, seed)
        r, old, new = ex["restart"], ex["old_period"], ex["new_period"]
        assert ex["seed"] >= seed and r >= old and r + new + 1 + RUN <= 30
        rb = sample_restarts(task, 1, 16, 1, torch.Generator().manual_seed(ex["seed"]))
        assert ex["tokens"] == rb.tokens[0].tolist() and bool(rb.restart[0, r])
