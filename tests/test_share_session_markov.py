"""ui/share.py: a share link cannot carry a model trained in this session, whatever its task (issue 58: a Markov
model trained in the session got no note and its link silently opened the shipped repeat model)."""

import pytest
from streamlit.testing.v1 import AppTest

from ui import share

from helpers import ROOT

MARKOV = ROOT / "checkpoints" / "markov" / "markov-2block.pt"


def _address(at: AppTest) -> dict:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


@pytest.mark.app
@pytest.mark.parametrize("page", ["app_pages/attention.py", "app_pages/causal.py", "app_pages/train.py"])
def test_a_session_markov_model_gets_the_note_and_no_model_in_its_link(page):
    from core.model.checkpoints import read_checkpoint
    from ui.state import LabModel

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.run()
    model, info = read_checkpoint(MARKOV)
    at.session_state["lab_models"] = {"session:mk": LabModel("session:mk", "trained #1 (markov)", model, info,
                                                             "trained")}
    at.session_state["pending_pick"] = "session:mk"
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["picked_model"] == "session:mk"
    assert "model" not in _address(at)
    assert any("cannot carry it" in c.value for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    assert not any("copy it to share the view" in c.value for c in at.sidebar.caption)
    assert share.link_of("causal", {"picked_model": "session:mk"}) == {}
