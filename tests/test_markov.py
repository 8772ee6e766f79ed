"""The Markov-chain task (core.model.markov): sampling, the strategies against a naive reference written
from the spec with loops, the KL of planted predictors, and bad settings refused."""
from __future__ import annotations

import math

import pytest
import torch

from core.model import markov
from core.model.markov import MarkovTask, sample_markov, strategy_kl, strategy_probs


def naive_strategy(seq: list[int], t: int, k: int, alpha: float, n: int) -> list[float]:
    """The order-n count predictor at position t of one sequence (n = 0: uniform), from the spec with loops."""
    if n == 0:
        return [1.0 / k] * k
    if n == 1:
        counts = [alpha] * k
        for i in range(t + 1):
            counts[seq[i]] += 1
        return [c / sum(counts) for c in counts]
    if t < n - 2:
        return [1.0 / k] * k
    context = tuple(seq[t - n + 2 : t + 1])
    counts = [alpha] * k
    for i in range(n - 1, t + 1):  # the event "context seq[i-n+1..i-1], then seq[i]"
        if tuple(seq[i - n + 1 : i]) == context:
            counts[seq[i]] += 1
    return [c / sum(counts) for c in counts]


class BigramCounter(torch.nn.Module):
    """A planted model built by hand: logits = log of the in-context transition counts plus alpha, by loops."""

    def __init__(self, k: int, alpha: float, vocab: int):
        super().__init__()
        self.k, self.alpha, self.vocab = k, alpha, vocab

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, T = tokens.shape
        out = torch.full((B, T, self.vocab), -1e9, dtype=torch.float64)  # tokens this task never shows
        for b in range(B):
            seen: dict[tuple[int, int], int] = {}
            for t in range(T):
                if t >= 1:
                    pair = (int(tokens[b, t - 1]), int(tokens[b, t]))
                    seen[pair] = seen.get(pair, 0) + 1
                cur = int(tokens[b, t])
                for j in range(self.k):
                    out[b, t, j] = math.log(seen.get((cur, j), 0) + self.alpha)
        return out


@pytest.mark.parametrize("task", [MarkovTask(n_states=3, concentration=1.0, seq_len=30),
                                  MarkovTask(n_states=4, concentration=0.3, seq_len=25),
                                  MarkovTask(n_states=2, concentration=2.0, seq_len=20, order=3)])
def test_strategies_match_the_naive_reference(task):
    g = torch.Generator().manual_seed(3)
    tokens, _ = sample_markov(task, 4, g)
    probs = strategy_probs(tokens, task)
    assert list(probs) == list(task.strategies)
    for n, name in enumerate(task.strategies):
        for b in range(tokens.shape[0]):
            seq = tokens[b].tolist()
            for t in range(task.seq_len):
                want = naive_strategy(seq, t, task.n_states, task.concentration, n)
                assert probs[name][b, t].tolist() == pytest.approx(want, abs=1e-12), (name, b, t)


def test_sampling_is_seeded_and_follows_the_tables():
    task = MarkovTask(n_states=3, concentration=1.0, seq_len=2000)
    a, pa = sample_markov(task, 16, torch.Generator().manual_seed(0))
    b, pb = sample_markov(task, 16, torch.Generator().manual_seed(0))
    c, _ = sample_markov(task, 16, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and torch.equal(pa, pb) and not torch.equal(a, c)
    assert a.shape == (16, 2000) and pa.shape == (16, 3, 3)
    assert torch.allclose(pa.sum(-1), torch.ones(16, 3, dtype=torch.float64))
    # each sequence's transition frequencies are its own table's, not another sequence's
    counts = torch.zeros(16, 3, 3, dtype=torch.float64)
    for t in range(1, 2000):
        counts[torch.arange(16), a[:, t - 1], a[:, t]] += 1
    rows = counts.sum(-1, keepdim=True)

    def off(tables):
        return float((counts - tables * rows).abs().sum() / counts.sum())

    assert off(pa) < 0.1 < 0.25 < off(pa.roll(1, 0))
    # a small concentration makes peaked rows, a large one flat rows
    peaked = sample_markov(MarkovTask(concentration=0.1), 256, torch.Generator().manual_seed(0))[1]
    flat = sample_markov(MarkovTask(concentration=50.0), 256, torch.Generator().manual_seed(0))[1]
    assert peaked.max(-1).values.mean() > 0.8 > 0.45 > flat.max(-1).values.mean()


def test_planted_bigram_counter_has_kl_zero_to_bigram_only():
    task = MarkovTask(n_states=3, concentration=1.0, seq_len=60)
    tokens, _ = sample_markov(task, 8, torch.Generator().manual_seed(5))
    kl = strategy_kl(BigramCounter(3, 1.0, vocab=5)(tokens), tokens, task)
    assert kl["bigram"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert kl["bigram"]["per_position"].shape == (59,)
    assert kl["bigram"]["per_position"].abs().max() < 1e-9
    assert kl["unigram"]["mean"] > 0.01 and kl["uniform"]["mean"] > 0.01
    # the wrong prior is caught: a counter with add-2 instead of add-1 is not the bigram strategy
    assert strategy_kl(BigramCounter(3, 2.0, vocab=3)(tokens), tokens, task)["bigram"]["mean"] > 1e-4


def test_uniform_predictor_has_kl_zero_to_uniform():
    task = MarkovTask(n_states=4, seq_len=40)
    tokens, _ = sample_markov(task, 6, torch.Generator().manual_seed(2))
    kl = strategy_kl(torch.zeros(6, 40, 4), tokens, task)
    assert kl["uniform"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert kl["unigram"]["mean"] > 0.01 and kl["bigram"]["mean"] > kl["unigram"]["mean"]


def test_kl_matches_its_definition():
    task = MarkovTask(n_states=3, seq_len=12)
    tokens, _ = sample_markov(task, 2, torch.Generator().manual_seed(9))
    logits = torch.randn(2, 12, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    probs = strategy_probs(tokens, task)
    got = strategy_kl(logits, tokens, task)
    for name, p in probs.items():
        total = []
        for t in range(11):
            per_seq = []
            for b in range(2):
                q = torch.softmax(logits[b, t], -1)
                per_seq.append(sum(float(p[b, t, j]) * math.log(float(p[b, t, j]) / float(q[j])) for j in range(3)))
            total.append(sum(per_seq) / 2)
            assert float(got[name]["per_position"][t]) == pytest.approx(total[-1], abs=1e-10)
        assert got[name]["mean"] == pytest.approx(sum(total) / 11, abs=1e-10)


def test_nearest_strategies_reads_stages_from_rows():
    names = ("uniform", "unigram", "bigram")
    rows = [{"step": s, "kl_uniform": u, "kl_unigram": a, "kl_bigram": b} for s, u, a, b in [
        (0, 0.01, 0.2, 0.3), (10, 0.02, 0.2, 0.3), (20, 0.2, 0.05, 0.1), (30, 0.3, 0.02, 0.1),
        (40, 0.3, 0.1, 0.05), (50, 0.3, 0.02, 0.1),  # one row nearest to bigram: not yet confirmed
        (60, 0.3, 0.1, 0.01), (70, 0.4, 0.12, 0.005)]]
    st = markov.nearest_strategies(rows, names)
    assert st["onset"] == {"uniform": 0, "unigram": 20, "bigram": 60}
    assert st["closest_step"] == {"uniform": 0, "unigram": 30, "bigram": 70}
    assert markov.nearest_strategies(rows[:6], names)["onset"]["bigram"] is None
    # the start needs no confirmation: a uniform stage shorter than one log still has its onset at step 0
    short = [dict(rows[0])] + rows[2:]
    assert markov.nearest_strategies(short, names)["onset"]["uniform"] == 0
    later = [dict(rows[2], step=0)] + rows[3:]  # a run whose first log is already nearest to unigram
    assert markov.nearest_strategies(later, names)["onset"] == {"uniform": None, "unigram": 0, "bigram": 60}


@pytest.mark.parametrize("fields, words", [
    ({"n_states": 1}, "n_states must be between 2"),
    ({"n_states": 65}, "n_states must be between 2"),
    ({"concentration": 0.0}, "concentration must be a positive"),
    ({"concentration": float("nan")}, "concentration must be a positive"),
    ({"order": 1}, "order must be between 2"),
    ({"order": 5}, "order must be between 2"),
    ({"seq_len": 2}, "too short"),
    ({"seq_len": 5000}, "above this lab's limit"),
    ({"n_states": 3.5}, "whole number"),
    ({"n_states": 64, "order": 4}, "transition rows"),
    ({"prior": "uniform"}, "prior must be one of dirichlet, doubly_stochastic"),
    ({"prior": "doubly_stochastic", "order": 3}, "needs a bigram chain"),
    ({"unigram_share": 0.25, "order": 3}, "needs a bigram chain"),
    ({"unigram_share": 1.0}, "unigram_share must be a number from 0"),
    ({"unigram_share": -0.1}, "unigram_share must be a number from 0"),
    ({"unigram_share": True}, "unigram_share must be a number from 0"),
])
def test_bad_settings_are_refused(fields, words):
    with pytest.raises(ValueError, match=words):
        MarkovTask(**fields).validate()


def test_model_vocabulary_must_hold_the_states_and_tokens_must_be_states():
    with pytest.raises(ValueError, match="smaller than n_states"):
        MarkovTask(n_states=5).validate(vocab_size=3)
    with pytest.raises(ValueError, match="states 0..2"):
        strategy_probs(torch.tensor([[0, 1, 3]]), MarkovTask(seq_len=3))
    with pytest.raises(ValueError, match="logits must be"):
        strategy_kl(torch.zeros(1, 3, 2), torch.tensor([[0, 1, 2]]), MarkovTask(seq_len=3))


def test_task_round_trips_through_a_checkpoint(tmp_path):
    from core.model.checkpoints import CheckpointError, read_checkpoint, save_checkpoint
    from core.model.config import ModelConfig
    from core.model.tinycharlm import TinyCharLM

    model = TinyCharLM(ModelConfig(vocab_size=3, d_model=16, n_heads=2, n_layers=1))
    task = MarkovTask(n_states=3, concentration=0.5, seq_len=50)
    save_checkpoint(model, tmp_path / "m.pt", task=task)
    assert read_checkpoint(tmp_path / "m.pt")[1]["task"] == task
    save_checkpoint(model, tmp_path / "bad.pt", task={**task.to_dict(), "concentration": -1.0})
    with pytest.raises(CheckpointError, match="impossible Markov task"):
        read_checkpoint(tmp_path / "bad.pt")
    save_checkpoint(model, tmp_path / "big.pt", task=MarkovTask(n_states=4).to_dict())
    with pytest.raises(CheckpointError, match="smaller than n_states"):
        read_checkpoint(tmp_path / "big.pt")


def test_head_scores_of_planted_patterns():
    tokens = torch.tensor([[0, 1, 1, 0, 0, 1]])  # no query whose previous-but-one token is its own
    T = 6
    prev = torch.zeros(1, 1, T, T)
    prev[0, 0, 0, 0] = 1
    for i in range(1, T):
        prev[0, 0, i, i - 1] = 1
    from core.training.interventions import induction_pattern

    ideal = induction_pattern(tokens)[:, None]
    scores = markov.head_scores(torch.cat([prev, ideal], 1), tokens)
    assert scores["prev_token"][0].item() == pytest.approx(1.0) and scores["prev_token"][1].item() < 0.5
    assert scores["induction"][1].item() == pytest.approx(1.0)
    assert scores["induction"][0].item() == 0.0


def test_the_new_priors_are_written_only_when_not_the_defaults_and_read_back():
    """A Dirichlet task's entry is what it was before the priors existed (checkpoints, manifests and sweep ids stay
    the same); the others carry their prior and share and read back to the same task."""
    assert MarkovTask().to_dict() == {"kind": "markov", "n_states": 3, "concentration": 1.0, "seq_len": 100,
                                      "order": 2}
    ds = MarkovTask(prior="doubly_stochastic")
    assert ds.to_dict()["prior"] == "doubly_stochastic" and "unigram_share" not in ds.to_dict()
    mix = MarkovTask(prior="doubly_stochastic", unigram_share=0.25)
    assert mix.to_dict()["unigram_share"] == 0.25
    for task in (MarkovTask(), ds, mix, MarkovTask(unigram_share=0.5)):
        assert markov.task_from_dict(task.to_dict()) == task
    assert MarkovTask().standard and not ds.standard and not MarkovTask(unigram_share=0.1).standard


def test_sinkhorn_balances_rows_and_columns_and_refuses_what_cannot_be():
    import numpy as np

    t = np.random.default_rng(0).dirichlet(np.ones(4), size=(6, 4))
    d = markov.sinkhorn(t)
    assert np.abs(d.sum(-1) - 1).max() <= 1e-9 and np.abs(d.sum(-2) - 1).max() <= 1e-9
    assert (d > 0).all() and not np.allclose(d, t)
    # a row scaling and a column scaling of t (Sinkhorn's theorem: the balanced matrix is D1 t D2)
    ratio = d / t
    assert np.allclose(ratio / ratio[:, :, :1], (ratio / ratio[:, :, :1])[:, :1, :])
    with pytest.raises(RuntimeError, match="did not reach"):  # no doubly stochastic matrix has this zero pattern
        markov.sinkhorn(np.array([[1.0, 1.0], [0.0, 1.0]]) + np.array([[0, 0], [1e-300, 0]]))


def test_doubly_stochastic_and_unigram_optimal_chains_are_sampled_as_said():
    """The doubly stochastic prior's tables are the Sinkhorn balance of the Dirichlet draw the same seed gives; the
    last round(share x B) tables of a batch repeat one row; the tokens follow each sequence's table; seeded."""
    g = lambda: torch.Generator().manual_seed(7)  # noqa: E731
    _, plain = sample_markov(MarkovTask(), 16, g())
    tokens, ds = sample_markov(MarkovTask(prior="doubly_stochastic"), 16, g())
    assert torch.allclose(ds, torch.from_numpy(markov.sinkhorn(plain.numpy())), atol=0, rtol=0)
    mix = MarkovTask(prior="doubly_stochastic", unigram_share=0.25)
    tokens, tables = sample_markov(mix, 16, g())
    again = sample_markov(mix, 16, g())
    assert torch.equal(tokens, again[0]) and torch.equal(tables, again[1])
    assert torch.equal(tables[12:], tables[12:, :1].expand(-1, 3, -1))  # 4 of 16: every row the same
    assert not torch.allclose(tables[:12], tables[:12, :1].expand(-1, 3, -1))
    assert torch.allclose(tables[:12].sum(-2), torch.ones(12, 3, dtype=torch.float64), atol=1e-9)  # doubly stochastic
    assert not torch.allclose(tables[12:].sum(-2), torch.ones(4, 3, dtype=torch.float64), atol=1e-3)
    # the tokens follow the tables: the empirical transitions of many long unigram-optimal sequences
    long = MarkovTask(n_states=3, seq_len=2000, unigram_share=0.5)
    tok, tab = sample_markov(long, 2, g())
    seq, row = tok[1], tab[1, 0]
    counts = torch.bincount(seq[1:], minlength=3).double()
    assert torch.allclose(counts / counts.sum(), row, atol=0.04)
