"""What the Markov pages may say and no more, pinned on the shipped files: how short the uniform stage is, what
even attention scores on the successor row, and how near a head that misses the successor bar comes."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from core.model.checkpoints import read_checkpoint
from core.model.markov import MarkovTask, nearest_strategies
from core.reading.markov import SUCCESSOR_MARGIN, even_share, even_successor, markov_view

from helpers import ROOT

MARKOV = ROOT / "checkpoints" / "markov"
TABLE = ROOT / "checkpoints" / "laws" / "markov.csv"


@pytest.mark.parametrize("name", ["markov-2block", "markov-1block", "markov-1block-smeared"])
def test_a_shipped_runs_uniform_stage_is_its_first_log(name):
    """The Train page's preset blurb and INTRO: nearest the uniform strategy only at the start (the untrained
    model, already some way from uniform), then the unigram strategy."""
    _, info = read_checkpoint(MARKOV / f"{name}.pt")
    nearest = nearest_strategies(info["history"], info["task"].strategies)["nearest"]
    assert nearest[0] == "uniform" and "uniform" not in nearest[1:]
    assert nearest[1] == "unigram"
    assert info["history"][0]["kl_uniform"] > 0.05


def test_at_3_states_the_uniform_stage_is_one_to_three_logs_over_the_tables_seeds():
    """core.training.markov's docstring and the Train page's INTRO: on the ten 3-state seeds of the Markov table
    the unigram stage starts at step 10 to 30 (logs every 10 steps)."""
    if not TABLE.is_file():
        pytest.skip("checkpoints/laws/markov.csv is not shipped")
    t = pd.read_csv(TABLE, comment="#")
    k3 = t[(t["n_states"] == 3) & (t["concentration"] == 1.0)]
    assert len(k3) == 10 and k3["unigram_step"].notna().all()
    assert (k3["unigram_step"].min(), k3["unigram_step"].max()) == (10, 30)


@pytest.mark.parametrize("k", [2, 3])
def test_even_attention_scores_more_than_1_over_k_on_these_chains(k):
    """The Train page's head-score note: even attention's successor score is computed on the evaluation batch, and
    on Dirichlet chains it is above 1/k (a token is followed by itself or by its likely successor more often than
    by chance)."""
    from core.training.trainer import eval_batch

    task = MarkovTask(n_states=k)
    share = even_share(task)
    assert share == even_successor(eval_batch(task, k)[0])
    assert share > 1 / k + 0.05


def test_the_smeared_block_misses_the_successor_bar_by_a_named_margin():
    """The 1-block smeared run: head 1.1's key is mostly the previous position's and its successor score falls
    just short of twice even attention's; the sentence names the score, the bar and the gap."""
    from core.model.checkpoints import load_checkpoint

    path = MARKOV / "markov-1block-smeared.pt"
    model, (_, info) = load_checkpoint(path), read_checkpoint(path)
    view = markov_view(model, info["task"], 0)
    scores = view.scores.set_index("label")
    bar = SUCCESSOR_MARGIN * view.even
    best = scores.loc[scores["smear"] <= 0.5, "successor"].idxmax()
    s = float(scores.loc[best, "successor"])
    assert view.successor_heads == [] and s < bar
    assert (f"No head clears the successor bar here, head {best} missing it by {bar - s:.3f}" in view.sentence)
    assert (f"head {best} scores {s:.3f} on successor against the bar of {SUCCESSOR_MARGIN:g} × {view.even:.3f} = "
            f"{bar:.3f}") in view.sentence
    assert f"(head {best}'s {1 - scores.loc[best, 'smear']:.0%})" in view.sentence
    assert not math.isnan(s)
