"""Training on the Markov-chain task through the lab's training path: the Trainer's logged KL is the KL of
its model, recomputed; runs are seeded and chunk-invariant; the page's settings build the task and refuse
bad ones; the pool dedupes and stops Markov runs like repeat runs; the stages are read off the logged rows."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from test_runs import thread_pool

from core.model.checkpoints import checkpoint_bytes, read_checkpoint
from core.model.markov import MarkovTask, strategy_kl
from core.pool.status import RunStatus
from core.training import markov as mk
from core.training.run_config import RunConfig
from core.training.trainer import Trainer

from helpers import ROOT, wait_until

MARKOV = RunConfig.of(task="markov", n_layers=2, seq_len=40, n_states=3, concentration=1.0,
                 batch_size=8, steps=20, shared_embedding=False)


def test_settings_build_the_markov_task_and_refuse_bad_ones():
    model, task, train = MARKOV.configs()
    assert task == MarkovTask(n_states=3, concentration=1.0, seq_len=40)
    assert model.vocab_size == 3 and model.n_layers == 2 and train.log_every == mk.MARKOV_TRAIN.log_every
    assert train.embed_shared == 0.0
    assert MARKOV.with_settings(shared_embedding=True).configs()[2].embed_shared > 0
    assert "concentration must be a positive" in MARKOV.with_settings(concentration=0.0).problem()
    with pytest.raises(ValueError, match="n_states must be between 2"):  # the model's vocabulary: refused at once
        MARKOV.with_settings(n_states=1)
    assert "too short" in MARKOV.with_settings(seq_len=2).problem()
    with pytest.raises(ValueError, match="task must be one of"):
        MARKOV.with_settings(task="chess")
    assert "not a head of block 1" in MARKOV.with_settings(hold="1.4").problem()  # 2 heads a block here
    assert "Markov chains of 3 states" in MARKOV.label()


def test_logged_kl_is_the_models_kl_and_runs_are_seeded_and_chunk_invariant():
    a = Trainer(*MARKOV.configs())
    a.run(7)
    a.run(13)
    b = Trainer(*MARKOV.configs())
    b.run(20)
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert [r["kl_bigram"] for r in a.history] == [r["kl_bigram"] for r in b.history]
    last = a.history[-1]
    assert last["step"] == 20 and {"loss", "loss_optimal", "kl_uniform", "kl_unigram", "kl_bigram"} <= set(last)
    with torch.no_grad():
        kl = strategy_kl(a.model.eval()(a.log_tokens), a.log_tokens, a.task_cfg)
    for name in a.task_cfg.strategies:
        assert last[f"kl_{name}"] == pytest.approx(kl[name]["mean"], rel=1e-5, abs=1e-7)
        assert len(last["kl_positions"][name]) == a.task_cfg.seq_len - 1  # the last log keeps them
    kept = [r["step"] for r in a.history if "kl_positions" in r]
    assert kept == [s for s in (0, 10, 20) if s % (5 * a.cfg.log_every) == 0 or s == 20]
    assert len(last["prev_token"]) == 2 and len(last["prev_token"][0]) == 2
    c = Trainer(*MARKOV.with_settings(seed=1).configs())
    c.run(20)
    assert c.history[-1]["kl_bigram"] != last["kl_bigram"]
    with pytest.raises(ValueError, match="no drop to stop at"):
        a.run(1, stop_at_loss=0.5)


def test_a_markov_checkpoint_reads_back_with_its_task_and_history():
    t = Trainer(*MARKOV.configs())
    t.run(10)
    model, info = read_checkpoint(checkpoint_bytes(t.model, **t.checkpoint_fields()))
    assert info["task"] == t.task_cfg and info["history"][-1]["kl_bigram"] == t.history[-1]["kl_bigram"]
    assert info["snapshots"] and info["config"].vocab_size == 3


def test_a_training_seq_len_other_than_the_tasks_is_refused():
    model, task, train = MARKOV.configs()
    with pytest.raises(ValueError, match="trains on the task's own length"):
        Trainer(model, task, replace(train, seq_len=20))


def test_stages_are_read_from_the_logged_rows():
    rows = [{"step": s, "seconds": s / 10, "kl_uniform": u, "kl_unigram": a, "kl_bigram": b}
            for s, u, a, b in [(0, 0.1, 0.2, 0.3), (10, 0.1, 0.2, 0.3), (20, 0.2, 0.02, 0.1), (30, 0.2, 0.02, 0.1),
                               (40, 0.3, 0.1, 0.02), (50, 0.3, 0.1, 0.01)]]
    st = mk.stages(rows, MarkovTask())
    assert st["onset"] == {"uniform": 0, "unigram": 20, "bigram": 40}
    assert st["seconds"] == {"uniform": 0.0, "unigram": 2.0, "bigram": 4.0}
    assert mk.stage_sentence(rows[:4], MarkovTask()).endswith("bigram not reached.")
    assert list(mk.stage_frame(rows, MarkovTask())["step"]) == [0, 20, 40]


def test_a_run_is_set_beside_the_papers_run_in_training_sequences():
    rows = [{"step": s, "kl_uniform": u, "kl_unigram": a, "kl_bigram": b}
            for s, u, a, b in [(0, 0.01, 0.2, 0.3), (10, 0.1, 0.02, 0.15), (20, 0.12, 0.01, 0.14),
                               (30, 0.2, 0.1, 0.05), (40, 0.25, 0.15, 0.02)]]
    rows[2]["kl_positions"] = {"uniform": [0.0, 0.3], "unigram": [0.0, 0.05], "bigram": [0.0, 0.2]}
    rows[4]["kl_positions"] = {"uniform": [0.1, 0.4], "unigram": [0.1, 0.2], "bigram": [0.0, 0.01]}
    spread = {"seqs": [4_000, 10_000, 20_000], "censored": 1, "batch": 32, "ratios": [25.0, 10.0, 5.0]}
    table, sentence = mk.beside_paper(rows, MarkovTask(), batch_size=25, lr=1e-2, spread=spread)
    cells = {r[""]: r["this run"] for r in table}
    assert cells["unigram stage from (training sequences)"] == "250 (step 10 x batch 25)"
    assert cells["bigram stage from (training sequences)"] == "750 (step 30 x batch 25)"
    # the unigram stage is a window (steps 10 and 20, before the bigram onset), read as the median of its logs, in
    # both measures: the mean over positions (the lab's) and the last position (the paper's, logs that keep it)
    stage = "KL to uniform / unigram / bigram over the unigram stage"
    assert cells[f"{stage}, mean over positions (the lab's)"] == "0.110 / 0.015 / 0.145 (median of 2 logs, steps 10-20)"
    assert cells[f"{stage}, last position (the paper's)"].startswith("0.300 / 0.050 / 0.200 (median of the 1 logs")
    assert cells["KL to uniform / unigram / bigram at the end, mean over positions (the lab's)"] == \
        "0.250 / 0.150 / 0.020 (1,000 sequences)"
    assert cells["KL to uniform / unigram / bigram at the end, last position (the paper's)"] == \
        "0.400 / 0.200 / 0.010 (1,000 sequences)"
    assert "This run reached the bigram stage after 750 training sequences; the paper's figure shows about 100,000" \
        in sentence and "read by eye" in sentence
    # the lab's seeds at 3 states as a distribution against the figure, not one run
    assert ("The lab's 4 seeds at 3 states (checkpoints/laws/markov.csv, the 2-block preset at batch 32) reached it "
            "after 4,000 to 20,000 sequences (median 10,000), 5.0 to 25.0 times fewer than that figure (median "
            "10.0); 1 never reached it within the cap.") in sentence
    # every setting that differs is named: batch and rate here (20 and 333 times the code's and the text's)
    assert "batch 25 against 64; learning rate 1e-2 against 3e-5 in the paper's text and 5e-4 in its code (333 " \
           "times and 20 times); the lab's model" in sentence
    assert "sequences of" not in sentence and "states against" not in sentence
    assert "0.020 nats from the bigram strategy averaged over positions and 0.010 at the last position" in sentence
    _, other = mk.beside_paper(rows, MarkovTask(n_states=5, seq_len=50, concentration=0.5), batch_size=64,
                               spread=None)
    assert "5 states against 3; sequences of 50 tokens against 100; a Dirichlet(0.5) prior against Dirichlet(1)" \
        in other and "batch 64 against" not in other
    assert "the lab's learning rate (the settings table) against 3e-5" in other
    _, never = mk.beside_paper(rows[:3], MarkovTask(), batch_size=25, spread=None)
    assert never.startswith("This run never reached the bigram stage in 500 training sequences")
    assert mk.beside_paper([], MarkovTask(), 25) == ([], "")
    diverged = [dict(r, kl_bigram=float("nan")) for r in rows]  # a diverged run: nothing to set beside
    assert mk.beside_paper(diverged, MarkovTask(), 25) == ([], "")


def test_the_pool_dedupes_and_stops_markov_runs():
    pool = thread_pool()
    try:
        alice = pool.start(MARKOV, "alice")
        bob = pool.start(MARKOV, "bob")
        repeat = pool.start(RunConfig.of(period_min=4, period_max=8, seq_len=24, batch_size=8, steps=20), "carol")
        assert bob.shared == "live" and alice.shared is None and repeat.shared is None
        for run in (alice, bob):
            wait_until(lambda run=run: run.ended.is_set(), what="the Markov runs to finish")
            assert run.status == RunStatus.FINISHED and run.step == MARKOV.train.steps
        assert alice.history()[-1]["kl_bigram"] == bob.history()[-1]["kl_bigram"]
        assert alice.result[1]["task"] == MARKOV.configs()[1]
        long = pool.start(MARKOV.with_settings(steps=100_000, seed=3), "dan")
        wait_until(lambda: long.step > 2, what="the long run to train")
        pool.stop(long)
        wait_until(lambda: long.ended.is_set(), what="the stopped run to end")
        assert long.status == RunStatus.STOPPED and long.result[1]["history"][-1]["step"] == long.step
    finally:
        pool.shutdown()


def test_two_blocks_reach_the_bigram_stage_and_one_block_does_not():
    """The lab's default Markov settings, seed 0, read from the shipped runs' logged histories
    (tests/test_markov_shipped.py trains each again and holds it to the same onsets; bench/markov_stages.py
    measures more seeds)."""
    runs = {}
    for name in ("markov-2block", "markov-1block"):
        _, info = read_checkpoint(ROOT / "checkpoints" / "markov" / f"{name}.pt")
        runs[name] = mk.stages(info["history"], info["task"])["onset"]
    assert runs["markov-2block"]["unigram"] is not None and runs["markov-2block"]["bigram"] is not None
    assert runs["markov-2block"]["unigram"] < runs["markov-2block"]["bigram"]
    assert runs["markov-1block"]["unigram"] is not None and runs["markov-1block"]["bigram"] is None


def test_a_run_on_another_prior_trains_on_it_and_is_measured_on_the_dirichlet_batch():
    """Edelman et al. (2024) evaluate on the full distribution: the evaluation batch of a run on doubly stochastic
    or partly unigram-optimal chains is the Dirichlet task's, while its training batches are its own prior's."""
    from core.training.trainer import eval_batch, training_batches

    plain = MarkovTask()
    for other in (MarkovTask(prior="doubly_stochastic"), MarkovTask(prior="doubly_stochastic", unigram_share=0.25),
                  MarkovTask(unigram_share=0.5)):
        assert torch.equal(eval_batch(other, 3)[0], eval_batch(plain, 3)[0])
        train = replace(mk.MARKOV_TRAIN, steps=2)
        assert not torch.equal(next(training_batches(other, 3, train))[0], next(training_batches(plain, 3, train))[0])
        trainer = Trainer(mk.model_for(other, 2), other, train)
        assert torch.equal(trainer.log_tokens, eval_batch(plain, 3)[0])
