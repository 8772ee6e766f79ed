"""The pages on a model with smeared keys, through AppTest: the Attention page on the shipped smeared 1-block
Markov run shows its computed transition sentence (naming the smear weight) and each head's σ(a), Causal patches
it, the weight-reading pages refuse it clearly, and the Train page trains a smeared Markov model."""
from __future__ import annotations

import pytest
import torch

from core.model.checkpoints import read_checkpoint
from core.reading.markov import markov_view

from helpers import ROOT, open_app

SMEARED = "markov/markov-1block-smeared.pt"


def _text(at) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "info", "caption", "error") for e in getattr(at, kind))


@pytest.mark.app
def test_the_reading_pages_on_the_shipped_smeared_run():
    model, info = read_checkpoint(ROOT / "checkpoints" / SMEARED)
    view = markov_view(model, info["task"])
    at = open_app("app_pages/attention.py", SMEARED)
    shown = _text(at)
    assert view.sentence in shown and "σ(a)" in view.sentence
    assert "keys are **smeared**" in shown
    assert "1 block × 2 heads, smeared keys" in " ".join(c.value for c in at.sidebar.caption)
    scores = next(d.value for d in at.dataframe if "smear" in d.value.columns)
    sigma = torch.sigmoid(model.blocks[0].smear.detach().double()).tolist()
    assert list(scores["smear"]) == pytest.approx(sigma)
    at.switch_page("app_pages/causal.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.dataframe
    for page in ("app_pages/circuits.py", "app_pages/icl.py", "app_pages/depth.py", "app_pages/archetypes.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert "was trained on the Markov-chain task" in " ".join(x.value for x in at.info), page
    at.switch_page("app_pages/home.py").run()
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.app
def test_the_weight_reading_pages_refuse_a_smeared_model_of_the_repeat_task():
    from core.model.config import ModelConfig
    from core.model.task import TaskConfig
    from core.model.tinycharlm import TinyCharLM
    from ui.state import LabModel

    at = open_app()
    torch.manual_seed(0)
    model = TinyCharLM(ModelConfig(n_layers=2, smeared_keys=True)).eval()
    entry = LabModel("session:smeared", "smeared 2-block", model,
                     {"config": model.cfg, "task": TaskConfig(), "train": None, "history": None, "snapshots": []},
                     "uploaded")
    at.session_state["lab_models"] = {entry.key: entry}
    at.run()
    at.selectbox(key="picked_model").set_value(entry.key).run()
    for page in ("app_pages/circuits.py", "app_pages/depth.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert "has smeared keys" in " ".join(x.value for x in at.info), page
    at.switch_page("app_pages/attention.py").run()  # the patterns come from the model itself: shown
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.app
def test_the_train_page_trains_a_smeared_markov_model():
    from test_markov_page import markov_settings
    from test_pages_train import app, rerun_until

    at = app("app_pages/train.py")
    markov_settings(at, steps=10)
    at.slider(key="tr_layers").set_value(1)
    at.checkbox(key="tr_mk_smear").check().run()
    assert not at.exception, at.exception
    shipped = next(m.value for m in at.markdown if "shipped Markov-chain runs" in m.value)
    assert "markov-1block-smeared" in shipped
    at.button(key="tr_train").click().run()
    run = rerun_until(at, lambda r: not r.active, what="the smeared Markov run to finish")
    at.run()
    assert not at.exception, at.exception
    assert run.step == 10 and run.model_cfg.smeared_keys and run.model_cfg.n_layers == 1
    assert "blocks.0.smear" in run.result[0].state_dict()
    settings = next(d.value for d in at.dataframe if "this lab" in d.value.columns)
    assert "smeared keys" in settings.set_index("")["this lab"]["model"]
    notes = " ".join(m.value for m in at.markdown)
    assert "This model's keys are smeared" in notes and "One block cannot do the match" not in notes
