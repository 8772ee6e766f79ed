"""Head scores come with a 95% bootstrap interval over the sequences measured
(core.reading.heads.score_intervals), and the previous-token question's margin is that interval."""
from __future__ import annotations

import torch

from core.model.checkpoints import read_checkpoint
from core.quiz import questions as quiz
from core.reading import heads
from core.reading.analysis import task_sequence_view

from helpers import ROOT


def test_intervals_hold_the_scores_of_the_shipped_model():
    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    view = task_sequence_view(model, info["task"], 24)
    both = view.scores.merge(view.intervals, on=["label", "layer", "head"])
    for name in ("prev_token", "induction_any"):
        assert (both[f"{name}_low"] <= both[name] + 1e-9).all() and (both[name] <= both[f"{name}_high"] + 1e-9).all()
    assert quiz.previous_token_head(view.scores, view.intervals).answer == "1.4"


def test_two_heads_within_each_others_interval_get_no_answer():
    g = torch.Generator().manual_seed(0)
    B, T = 16, 12
    prev = torch.zeros(T, T)
    prev[0, 0] = 1
    prev[torch.arange(1, T), torch.arange(T - 1)] = 1
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    mix = torch.rand(B, 2, 1, 1, generator=g) * 0.4 + 0.5  # two heads, each 0.5-0.9 previous-token per sequence
    pattern = mix * prev + (1 - mix) * uniform
    periods = torch.full((B,), 4)
    iv = heads.score_intervals([pattern], periods)
    scores = heads.head_score_table([pattern], periods)
    q = quiz.previous_token_head(scores, iv)
    assert q.answer is None and "95% intervals" in q.why
    apart = scores.assign(prev_token=[0.9, 0.3])
    assert quiz.previous_token_head(apart).answer == "1.1"  # without intervals: the CLEAR_GAP rule
