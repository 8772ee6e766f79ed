"""ui/share.py: a share link cannot carry a model trained in this session, whatever its task (issue 58: a link copied
with a Markov model of the session picked silently opened the shipped repeat model). The note says so, and the link
carries none of the settings a visit with a repeat model left in the session: the Markov model's own version of the
page does not draw them, so they would open another model's view. A shipped Markov model's own Attention page shares
its own head, seed and pinned queries (issue 57: the pin goes into links on every page that draws attention)."""

import pytest
from streamlit.testing.v1 import AppTest

from ui import share
from ui.charts import pins

from helpers import ROOT, address, open_link, spec_params

MARKOV = ROOT / "checkpoints" / "markov" / "markov-2block.pt"


@pytest.mark.app
@pytest.mark.parametrize("page", ["app_pages/attention.py", "app_pages/causal.py", "app_pages/train.py"])
def test_a_session_markov_model_gets_the_note_and_no_model_in_its_link(page):
    from core.model.checkpoints import read_checkpoint
    from ui.state import LabModel

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.run()
    at.switch_page(page).run()  # the shipped repeat model first: its widgets' settings stay in the session
    assert not at.exception and address(at).get("model") == "variable-period-2block"
    model, info = read_checkpoint(MARKOV)
    at.session_state["lab_models"] = {"session:mk": LabModel("session:mk", "trained #1 (markov)", model, info,
                                                             "trained")}
    at.session_state["pending_pick"] = "session:mk"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["picked_model"] == "session:mk"
    assert address(at) == {}  # no model, and not the repeat model's head, period or corruption either
    assert any("cannot carry it" in c.value for c in at.sidebar.caption), [c.value for c in at.sidebar.caption]
    assert not any("copy it to share the view" in c.value for c in at.sidebar.caption)
    assert share.link_of("causal", {"picked_model": "session:mk"}) == {}


def test_a_page_drawn_by_the_tasks_own_version_puts_no_widget_settings_in_the_link():
    session = {"picked_model": "shipped:markov/markov-2block.pt", "att_head": "2.1", "att_period": 24}
    assert share.link_of("attention", session, widgets=False) == {"model": "markov/markov-2block"}
    assert share.link_of("attention", session)["head"] == "2.1"  # drawn by the page itself, they are the view


MARKOV_KEY = "shipped:markov/markov-2block.pt"


def test_a_shipped_markov_models_attention_page_shares_its_own_head_seed_and_pin():
    """The Markov model's own Attention page (ui/markov_reading.py) draws its own head, seed and pinned queries
    (share.TASK_PAGE_PARAMS): a link names them and opening it sets them; bad values get notes."""
    from ui.state import all_models  # outside Streamlit: the shipped models only

    session = {"picked_model": MARKOV_KEY, "att_mk_head": "2.1", "att_mk_seed": 3, "att_mk_pin": [5, 9],
               "att_head": "1.1", "att_pin": [40]}  # a repeat model's visit left these: not this page's
    link = share.link_of("attention", session, True, "markov")
    assert link == {"model": "markov/markov-2block", "head": "2.1", "seed": "3", "pin": "5,9"}
    state, notes = share.read_link(link, "attention", all_models(), "shipped:variable-period-2block.pt")
    assert notes == [] and state == {"picked_model": MARKOV_KEY, "att_mk_head": "2.1", "att_mk_seed": 3,
                                     "att_mk_pin": [5, 9]}
    bad = {"model": "markov/markov-2block", "head": "9.9", "seed": "-1", "pin": "5,100000"}
    state, notes = share.read_link(bad, "attention", all_models(), None)
    assert state == {"picked_model": MARKOV_KEY}
    assert {n.split("=")[0].strip("`") for n in notes} == {"head", "seed", "pin"}, notes


@pytest.mark.app
def test_a_link_opens_the_markov_reading_with_its_pin_and_keeps_it_in_the_address():
    at = open_link("app_pages/attention.py", {"model": "markov/markov-2block", "pin": "5,9", "seed": "3"}, 180)
    assert at.session_state["att_mk_pin"] == [5, 9] and at.number_input(key="att_mk_seed").value == 3
    assert address(at) == {"model": "markov/markov-2block", "head": at.session_state["att_mk_head"], "seed": "3",
                            "pin": "5,9"}
    started = [p.get("value") for c in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart")
               for p in spec_params(c.proto.spec) if p.get("name") == pins.PIN]
    assert len(started) >= 2 and all(v in ([{"query": 5}, {"query": 9}], [{"qi": 5}, {"qi": 9}]) for v in started), \
        started  # the grid and the one head start from the pin



@pytest.mark.app
def test_a_shipped_markov_models_causal_page_says_its_link_carries_only_the_model():
    """The Markov model's own Causal page has settings no link carries: the sidebar says the address holds the model
    only (before, it said it held the view, model and settings)."""
    at = open_link("app_pages/causal.py", {"model": "markov/markov-2block"}, 180)
    assert address(at) == {"model": "markov/markov-2block"}
    said = [c.value for c in at.sidebar.caption]
    assert any("not this page's settings" in c for c in said) and not any("copy it to share" in c for c in said), said
