"""ui/share.py: a share link cannot carry a model trained in this session, whatever its task (issue 58: a link copied
with a Markov model of the session picked silently opened the shipped repeat model). The note says so, and the link
carries none of the settings a visit with a repeat model left in the session: the Markov model's own version of the
page does not draw them, so they would open another model's view."""

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
    at.switch_page(page).run()  # the shipped repeat model first: its widgets' settings stay in the session
    assert not at.exception and _address(at).get("model") == "variable-period-2block"
    model, info = read_checkpoint(MARKOV)
    at.session_state["lab_models"] = {"session:mk": LabModel("session:mk", "trained #1 (markov)", model, info,
                                                             "trained")}
    at.session_state["pending_pick"] = "session:mk"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["picked_model"] == "session:mk"
    assert _address(at) == {}  # no model, and not the repeat model's head, period or corruption either
    assert any("cannot carry it" in c.value for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    assert not any("copy it to share the view" in c.value for c in at.sidebar.caption)
    assert share.link_of("causal", {"picked_model": "session:mk"}) == {}


def test_a_page_drawn_by_the_tasks_own_version_puts_no_widget_settings_in_the_link():
    session = {"picked_model": "shipped:markov/markov-2block.pt", "att_head": "2.1", "att_period": 24}
    assert share.link_of("attention", session, widgets=False) == {"model": "markov/markov-2block"}
    assert share.link_of("attention", session)["head"] == "2.1"  # drawn by the page itself, they are the view
