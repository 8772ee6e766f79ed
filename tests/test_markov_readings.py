"""The reading pages' computations on Markov-chain models (core.reading.markov, the another-chain
corruption and head patching in core.causal), against planted numbers and the shipped Markov runs."""
from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch

from core.causal.corruptions import another_chain
from core.causal.experiments import markov_patch_view
from core.model.checkpoints import read_checkpoint
from core.model.markov import MarkovTask
from core.reading.markov import even_successor, markov_view, transition_heads
from core.training import markov as mk

from helpers import ROOT

MARKOV = ROOT / "checkpoints" / "markov"


@pytest.fixture(scope="module")
def two_block():
    return read_checkpoint(MARKOV / "markov-2block.pt")


def test_another_chain_gives_each_row_a_fresh_chains_sequence_of_the_same_shape():
    task = MarkovTask(n_states=3, seq_len=40)
    g = torch.Generator().manual_seed(0)
    clean = another_chain(torch.zeros(5, 40, dtype=torch.long), task, g)
    donor = another_chain(clean, task, torch.Generator().manual_seed(1))
    assert donor.shape == clean.shape and donor.min() >= 0 and donor.max() < 3
    assert not torch.equal(donor, clean)
    with pytest.raises(ValueError, match=r"\[B, 40\]"):
        another_chain(clean[:, :10], task)


def test_even_successor_is_the_mean_share_of_qualifying_keys_counted_by_hand():
    tokens = torch.tensor([[0, 1, 0, 1, 1, 0], [2, 2, 2, 0, 1, 2]])
    shares = []
    for row in tokens.tolist():
        for i in range(len(row)):
            keys = [j for j in range(1, i + 1) if row[j - 1] == row[i]]
            if keys:
                shares.append(len(keys) / (i + 1))
    assert even_successor(tokens) == pytest.approx(sum(shares) / len(shares))


def _scores(rows):
    return pd.DataFrame(rows, columns=["label", "layer", "head", "prev_token", "successor"])


def test_transition_heads_names_exactly_the_planted_pair():
    scores = _scores([("1.1", 0, 0, 0.9, 0.1), ("1.2", 0, 1, 0.2, 0.1),
                      ("2.1", 1, 0, 0.1, 0.8), ("2.2", 1, 1, 0.1, 0.5)])
    prev, succ, sentence = transition_heads(scores, even=0.3)
    assert (prev, succ) == (["1.1"], ["2.1"])  # 0.5 < 2 x 0.3
    assert "1.1" in sentence and "2.1" in sentence and "2.2" not in sentence
    prev, succ, sentence = transition_heads(scores.assign(prev_token=0.1), even=0.3)
    assert prev == [] and sentence.startswith("No pair of heads")
    _, succ, sentence = transition_heads(scores[scores["layer"] == 0], even=0.3)
    assert succ == [] and sentence.startswith("One block with plain keys cannot count transitions")


def test_the_shipped_two_block_run_has_a_statistical_induction_head_and_one_block_none(two_block):
    model, info = two_block
    view = markov_view(model, info["task"])
    assert view.prev_heads and all(h.startswith("1.") for h in view.prev_heads)
    assert view.successor_heads and all(h.startswith("2.") for h in view.successor_heads)
    assert view.kl.set_index("strategy")["kl"]["bigram"] < view.kl.set_index("strategy")["kl"]["unigram"]
    one, info1 = read_checkpoint(MARKOV / "markov-1block.pt")
    assert markov_view(one, info1["task"]).successor_heads == []


def test_patching_a_head_that_writes_nothing_moves_nothing_and_the_clean_run_is_nearer_the_bigram(two_block):
    model, info = two_block
    silent = copy.deepcopy(model)
    with torch.no_grad():
        silent.blocks[1].W_O[0] = 0.0
    out = markov_patch_view(silent, info["task"], n_seqs=4)
    heads = out["heads"]
    assert out["clean"]["neg_kl_bigram"] > out["corrupted"]["neg_kl_bigram"]
    zero = heads[(heads["layer"] == 1) & (heads["head"] == 0)]
    assert (zero["patched"] - zero["corrupted"]).abs().max() < 1e-9
    assert heads[(heads["layer"] == 1) & (heads["head"] == 1)]["patch_effect"].abs().max() > 0.01


def test_a_model_without_blocks_or_with_too_few_states_is_refused_clearly(two_block):
    model, info = two_block
    from core.model.config import ModelConfig
    from core.model.tinycharlm import TinyCharLM

    with pytest.raises(ValueError, match="no attention blocks"):
        markov_view(TinyCharLM(ModelConfig(vocab_size=model.cfg.vocab_size, n_layers=0)), info["task"])
    with pytest.raises(ValueError):
        markov_view(TinyCharLM(ModelConfig(vocab_size=2, d_model=16, n_heads=2)), info["task"])


MARKOV_2 = "markov/markov-2block.pt"


@pytest.mark.app
def test_the_attention_and_causal_pages_read_a_markov_model_and_the_others_say_why_not(two_block):
    from helpers import open_app

    model, info = two_block
    view = markov_view(model, info["task"])
    at = open_app("app_pages/attention.py", MARKOV_2)
    shown = " ".join(x.value for x in [*at.markdown, *at.info, *at.caption])
    assert view.sentence in shown
    assert mk.beside_paper(info["history"], info["task"], info["train"]["batch_size"])[1] in shown
    at.switch_page("app_pages/causal.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.dataframe or at.get("vega_lite_chart")
    for page in ("app_pages/circuits.py", "app_pages/icl.py", "app_pages/depth.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert "was trained on the Markov-chain task" in " ".join(x.value for x in at.info), page


@pytest.mark.app
def test_the_remaining_pages_and_the_step_slider_on_a_markov_model(two_block):
    """Archetypes, Home and the exercises open on the Markov run without an exception; the Attention page's
    training-step slider reads a snapshot (its sentence is that snapshot's, computed again)."""
    from core.model.snapshots import model_at_step

    from helpers import open_app

    model, info = two_block
    at = open_app("app_pages/archetypes.py", MARKOV_2)
    assert "was trained on the Markov-chain task" in " ".join(x.value for x in at.info)
    for page in ("app_pages/home.py", "app_pages/exercise_page.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    assert "their notebooks check on the default model" in " ".join(x.value for x in at.info)
    notebooks = [b.label for b in at.get("download_button") if "Notebook" in b.label]
    assert notebooks[:-1] and all(label == "📓 Notebook for the default model" for label in notebooks[:-1])
    assert notebooks[-1] != "📓 Notebook for the default model"  # part 5 checks on the Markov run itself
    at.switch_page("app_pages/attention.py").run()
    early = next(s for s in info["snapshots"] if s["step"] > 0)
    at.select_slider(key="att_step").set_value(early["step"]).run()
    assert not at.exception, [e.value for e in at.exception]
    then = markov_view(model_at_step(model, info, early["step"]), info["task"])
    shown = " ".join(x.value for x in [*at.markdown, *at.info, *at.caption])
    assert then.sentence in shown and then.sentence != markov_view(model, info["task"]).sentence


@pytest.mark.app
def test_a_link_to_a_markov_model_opens_it_and_ignores_the_repeat_tasks_parameters():
    from streamlit.testing.v1 import AppTest

    from ui.model_keys import shipped_key

    from helpers import ROOT

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=120)
    at.run()
    at.switch_page("app_pages/attention.py")
    at.query_params.update({"model": "markov/markov-2block", "head": "9.9", "period": "x", "seq": "text"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["picked_model"] == shipped_key(MARKOV_2)
    assert "transition" in " ".join(x.value for x in [*at.markdown, *at.info]).lower()


def test_when_no_head_clears_the_bar_but_the_outputs_are_bigram_the_sentence_says_both():
    from core.reading.markov import _outputs_sentence

    kl = {"uniform": 0.2, "unigram": 0.12, "bigram": 0.03}
    said = _outputs_sentence([], kl)
    assert "nearest the bigram strategy (KL 0.030 nats, against 0.120 to unigram)" in said
    assert _outputs_sentence(["1.1"], kl) == ""  # a head named: the head sentence says it
    assert _outputs_sentence([], {"uniform": 0.2, "unigram": 0.05, "bigram": 0.08}) == ""  # not at bigram
    model, info = read_checkpoint(ROOT / "checkpoints" / "markov" / "markov-1block-smeared.pt")
    view = markov_view(model, info["task"], seed=0)  # the page's default sample: the bar is missed, by 0.02
    assert view.successor_heads == [] and "nonetheless nearest the bigram strategy" in view.sentence
