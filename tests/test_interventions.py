"""Training experiments (core.training.interventions): a held previous-token head (the hold, the counterpart of
Singh et al.'s one-head opto_prev_token_heads), a block-2 head clamped to the ideal induction pattern (the
induction clamp, their opto_induction_heads), a knocked-out head, and their command-line flags."""
from __future__ import annotations

import pytest
import torch

from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.reading.heads import head_scores
from core.training.config import TrainConfig
from core.training.interventions import describe, induction_pattern, release
from core.training.train import build_parser, configs_from_args
from core.training.trainer import Trainer

from helpers import TINY

TASK = TaskConfig(4, 8, 24)


def _run(steps=12, **kw):
    t = Trainer(ModelConfig(**TINY, n_layers=2), TASK,
                TrainConfig(steps=steps, batch_size=4, log_every=4, eval_size=8, seed=1, **kw))
    t.run(steps)
    return t


def test_a_held_head_attends_to_the_previous_position_throughout():
    t = _run(hold="1.3")
    for row in t.history:
        assert row["prev_token"][0][2] == pytest.approx(1.0)  # every logged step, from step 0
    tokens = torch.randint(0, 16, (3, 24), generator=torch.Generator().manual_seed(0))
    _, cache = t.model.run_with_cache(tokens)
    P = cache["pattern"][0][:, 2].detach()
    assert torch.equal(P[:, 0, 0], torch.ones(3))
    for i in range(1, 24):
        assert torch.equal(P[:, i, i - 1], torch.ones(3)) and float(P[:, i].sum()) == 3.0
    # the fused training forward computes the same thing as the explicit per-head path
    with torch.no_grad():
        assert torch.allclose(t.model(tokens), t.model.run_with_cache(tokens)[0], atol=1e-4)
    # W_Q and W_K of the held head get no gradient; its W_V does
    ref = _run()
    init = Trainer(ModelConfig(**TINY, n_layers=2), TASK, TrainConfig(steps=1, batch_size=4, eval_size=8, seed=1))
    wq0 = init.model.blocks[0].W_Q[2]
    assert not torch.equal(ref.model.blocks[0].W_Q[2], wq0)
    decayed = wq0 * torch.prod(torch.tensor([1 - t.lr_at(s) * 0.1 for s in range(12)]))
    assert torch.allclose(t.model.blocks[0].W_Q[2], decayed, atol=1e-6)  # weight decay alone moved it
    # released, the model computes the head's pattern from its weights again
    release(t.model)
    _, cache = t.model.run_with_cache(tokens)
    assert not torch.equal(cache["pattern"][0][:, 2], P)


def ideal_induction(seq: list[int]) -> torch.Tensor:
    """The oracle, by loops: row i spread evenly over the positions just after an earlier copy of token i, else on i."""
    T = len(seq)
    P = torch.zeros(T, T)
    for i in range(T):
        keys = [j + 1 for j in range(i) if seq[j] == seq[i]]
        for j in keys or [i]:
            P[i, j] = 1 / len(keys or [i])
    return P


def test_the_ideal_induction_pattern_follows_earlier_copies_of_the_token():
    seq = [3, 1, 4, 1, 5, 3, 1, 4]
    P = induction_pattern(torch.tensor([seq, seq[::-1]]))
    assert torch.equal(P[0], ideal_induction(seq)) and torch.equal(P[1], ideal_induction(seq[::-1]))
    assert P[0, 6].tolist() == [0, 0, 0.5, 0, 0.5, 0, 0, 0]  # token 1 seen at 1 and 3: the keys after them
    assert P[0, 2, 2] == 1.0  # 4 not seen before: on itself


def test_a_clamped_head_computes_with_the_ideal_pattern_and_its_queries_and_keys_learn_nothing():
    t = _run(clamp="2.2")
    tokens = torch.randint(0, 16, (3, 24), generator=torch.Generator().manual_seed(0))
    ideal = torch.stack([ideal_induction(seq) for seq in tokens.tolist()])

    def planted(pattern):  # head 2.2's pattern replaced by the oracle's
        return torch.cat([pattern[:, :1], ideal[:, None], pattern[:, 2:]], 1)

    with torch.no_grad():
        want, cache = t.model.run_with_hooks(tokens, edits={"blocks.1.attn.hook_pattern": planted},
                                             cache=["blocks.1.attn.hook_pattern"])
        assert torch.allclose(t.logits(tokens), want, atol=1e-6)  # the run computes with the clamped pattern
        assert not torch.allclose(t.model(tokens), want, atol=1e-3)  # the weights alone compute another one
    assert t.history[-1]["induction_any"][1][1] == pytest.approx(float(
        head_scores(ideal_pattern_of(t), t.log_periods)["induction_any"][1]), abs=1e-6)
    # one training step's gradient: nothing reaches the clamped head's W_Q and W_K, its W_V and the others' do
    loss = t.logits(tokens)[:, :-1].logsumexp(-1).mean()
    t.model.zero_grad()
    loss.backward()
    block = t.model.blocks[1]
    assert not block.W_Q.grad[1].any() and not block.W_K.grad[1].any()
    assert block.W_Q.grad[0].any() and block.W_K.grad[2].any() and block.W_V.grad[1].any()
    assert describe(t.cfg.to_dict()).startswith("head 2.2 clamped to the ideal induction pattern")


def ideal_pattern_of(t):
    """The evaluation batch's block-2 patterns as the clamped run logs them: the oracle in head 2.2."""
    _, cache = t.model.run_with_hooks(t.log_tokens, cache=["blocks.1.attn.hook_pattern"])
    P = cache["blocks.1.attn.hook_pattern"].detach().clone()
    P[:, 1] = torch.stack([ideal_induction(seq) for seq in t.log_tokens.tolist()])
    return P


def test_a_knocked_out_head_writes_nothing_for_the_whole_run():
    t = _run(knockout="2.4")
    assert torch.equal(t.model.blocks[1].W_O[3], torch.zeros_like(t.model.blocks[1].W_O[3]))
    assert t.model.blocks[1].W_O[2].abs().sum() > 0
    tokens = torch.randint(0, 16, (2, 24), generator=torch.Generator().manual_seed(0))
    _, cache = t.model.run_with_cache(tokens)
    assert torch.equal(cache["head_out"][1][:, 3], torch.zeros_like(cache["head_out"][1][:, 3]))
    for snap in t.checkpoint_fields()["snapshots"]:
        assert not snap["state_dict"]["blocks.1.W_O"][3].any()


def test_ordinary_runs_are_unchanged_by_the_experiment_code():
    a, b = _run(), _run(hold=None, clamp="none", knockout="")
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])
    c = _run(knockout="1.1")
    assert not torch.equal(a.model.W_E, c.model.W_E)


@pytest.mark.parametrize("argv, fields", [
    (["--hold-prev-head", "1.2"], {"hold": "1.2"}),
    (["--clamp-induction-head", "2.3"], {"clamp": "2.3"}),
    (["--knockout", "2.4"], {"knockout": "2.4"}),
    (["--plain-embedding"], {"embed_scale": 1.0, "embed_shared": 0.0}),
])
def test_flags_set_the_experiment(argv, fields):
    _, _, train = configs_from_args(build_parser().parse_args(["--out", "x.pt", *argv]))
    for k, v in fields.items():
        assert getattr(train, k) == v


@pytest.mark.parametrize("argv, phrase", [
    (["--hold-prev-head", "2.1"], "block 1"), (["--hold-prev-head", "x"], "block.head"),
    (["--knockout", "3.1"], "3.1 is not in this model"), (["--knockout", "1.5"], "1.5 is not in this model"),
    (["--knockout", "0.1"], "from 1"), (["--layers", "0", "--hold-prev-head", "1.1"], "not a head of block 1"),
    (["--hold-prev-head", "1.1", "--knockout", "1.1"], "must differ"),
    (["--clamp-induction-head", "1.2"], "block 2"), (["--layers", "1", "--clamp-induction-head", "2.1"],
                                                     "not a head of block 2"),
    (["--clamp-induction-head", "2.1", "--knockout", "2.1"], "must differ"),
])
def test_bad_experiment_flags_are_refused(argv, phrase):
    with pytest.raises(ValueError, match=phrase):
        configs_from_args(build_parser().parse_args(["--out", "x.pt", *argv]))
