"""Shareable views (ui/share.py): a link's parameters round-trip through the address, and bad
values of every kind give the default and a note, never an exception, on every page."""

import pytest
from streamlit.testing.v1 import AppTest

from ui import share
from ui.charts import pins
from ui.model_keys import shipped_key
from ui.pages import ALL_PAGES

from helpers import ROOT, SHIPPED, address, open_link

TWO, ONE = "variable-period-2block.pt", "variable-period-1block.pt"
PAGES = [p.file or "home" for p in ALL_PAGES]




@pytest.fixture(autouse=True)
def _need_checkpoints():
    if not {TWO, ONE} <= set(SHIPPED):
        pytest.fail("the shipped checkpoints are missing")


@pytest.mark.app
def test_attention_view_round_trips():
    link = {"model": "variable-period-1block", "head": "1.3", "period": "17", "seed": "42", "seq": "task"}
    at = open_link("app_pages/attention.py", link)
    assert at.session_state["picked_model"] == shipped_key(ONE)
    assert at.selectbox(key="att_head").value == "1.3"
    assert at.slider(key="att_period").value == 17 and at.number_input(key="att_seed").value == 42
    assert not at.warning
    assert address(at) == link  # the page writes back the same view
    again = open_link("app_pages/attention.py", address(at))  # ... and opening that address shows it again
    assert address(again) == link and again.selectbox(key="att_head").value == "1.3"
    # the student changes the view: the address follows
    at.selectbox(key="att_head").set_value("1.1").run()
    at.radio(key="att_source").set_value("Type your own").run()
    at.text_input(key="att_text").set_value("abcabcabc").run()
    got = address(at)
    assert got["head"] == "1.1" and got["seq"] == "text" and got["text"] == "abcabcabc" and "period" not in got
    typed = open_link("app_pages/attention.py", got)
    assert typed.text_input(key="att_text").value == "abcabcabc"
    assert typed.radio(key="att_source").value == "Type your own"


@pytest.mark.app
def test_circuits_and_archetypes_round_trip():
    link = {"model": "variable-period-2block", "head": "2.4", "ablate": "1.2,2.3", "mode": "mean"}
    at = open_link("app_pages/circuits.py", link)
    assert at.selectbox(key="cir_head").value == "2.4"
    assert at.multiselect(key="cir_ablate").value == ["1.2", "2.3"] and at.radio(key="cir_mode").value == "mean"
    assert address(at) == link
    link = {"model": "variable-period-2block", "archetype": "induction", "prompt": "Bob and Ann met. Bob smiled"}
    at = open_link("app_pages/archetypes.py", link)
    assert at.selectbox(key="arch_name").value == "induction"
    assert at.radio(key="arch_prompt").value == share.CUSTOM_PROMPT
    assert at.text_input(key="arch_custom").value == link["prompt"]
    assert address(at) == link
    preset = next(iter(__import__("core.archetypes.catalogue", fromlist=["x"]).PRESET_PROMPTS))
    at = open_link("app_pages/archetypes.py", {"prompt": preset, "archetype": "self"})
    assert at.radio(key="arch_prompt").value == preset and address(at)["prompt"] == preset
    at = open_link("app_pages/depth.py", {"model": "variable-period-2block", "seed": "7"})
    assert at.number_input(key="depth_seed").value == 7 and address(at)["seed"] == "7"


@pytest.mark.app
def test_causal_view_round_trips():
    link = {"model": "variable-period-1block", "period": "7", "seed": "3", "seq": "task", "corruption": "resample"}
    at = open_link("app_pages/causal.py", link)
    assert at.radio(key="cz_corruption").value == "resample"
    assert at.session_state["picked_model"] == shipped_key(ONE)
    assert at.number_input(key="cz_period_" + shipped_key(ONE)).value == 7  # the period input is keyed by model
    assert at.number_input(key="cz_seed").value == 3
    assert not [w for w in at.sidebar.warning if w.value.startswith("Link")]  # (the page may warn: small gap)
    assert address(at) == link
    at.radio(key="cz_source").set_value("Type your own").run()
    at.text_input(key="cz_text").set_value("abcdeabcde").run()
    got = address(at)
    assert got["seq"] == "text" and got["text"] == "abcdeabcde" and "period" not in got
    typed = open_link("app_pages/causal.py", got)
    assert typed.radio(key="cz_source").value == "Type your own"
    assert typed.text_input(key="cz_text").value == "abcdeabcde"


# Each link holds one bad value for every parameter (column-wise: BAD_LINKS[i][name] = BAD[name][i]).
BAD = {
    "model": ["../../etc/passwd", "/etc/passwd", "variable-period-2block.pt", "x" * 10_000],
    "head": ["9.9", "-1.2", "x" * 10_000, "1.2; rm -rf /"],
    "period": ["-5", "abc", "1e3", "99999999999999999999"],
    "seed": ["-1", "NaN", "10001", "2.5"],
    "seq": ["both", "", "x" * 10_000, "TASK"],
    "text": ["é" * 50, "a" * 10_000, "a", "<script>"],
    "ablate": ["1.1,1.1", "7.7,../x", "x" * 10_000, "1.1,,9.1"],
    "mode": ["zero; drop", "", "MEAN", "x" * 500],
    "archetype": ["gremlin", "__class__", "x" * 10_000, "Induction"],
    "prompt": ["", "w " * 200, "x" * 10_000, "a," * 160],
    "corruption": ["both", "RESAMPLE", "x" * 10_000, ""],
    "pin": ["3,3", "-1", ",".join(map(str, range(share.MAX_PINS + 1))), "12,99999"],
    "keys": ["5,5", "../../etc", "1.5", "x" * 10_000],
}
BAD_LINKS = [{name: values[i] for name, values in BAD.items()} for i in range(4)]


@pytest.mark.parametrize("page", PAGES)
def test_read_link_refuses_every_bad_value_on_every_page(page):
    """read_link alone, every bad link on every page: each of the page's parameters is refused with a
    short note naming it (an empty value is no value), and the default model stays picked."""
    from ui.state import all_models  # outside Streamlit: the shipped models only
    models, name = all_models(), page.split("/")[-1].removesuffix(".py")
    ours = ["model", *share.PAGE_PARAMS.get(name, {})]
    for link in BAD_LINKS:
        state, notes = share.read_link(link, name, models, shipped_key(TWO))
        named = {p for p in ours for n in notes if f"`{p}" in n}
        assert named | {p for p in ours if link[p] == ""} == set(ours), (link, notes)
        assert all(len(n) < 400 for n in notes), notes  # a huge value is never echoed
        assert state.get("picked_model", shipped_key(TWO)) == shipped_key(TWO)


@pytest.mark.app
@pytest.mark.parametrize("page", PAGES)
def test_a_bad_link_gives_defaults_and_notes_on_every_page(page):
    """One full render per page (read_link's cases are above): the notes reach the sidebar, the bad
    values leave the address, and the default model stays picked."""
    ours = ["model", *share.PAGE_PARAMS.get(page.split("/")[-1].removesuffix(".py"), {})]
    link = BAD_LINKS[0]
    at = open_link(page, link)
    notes = [w.value for w in at.sidebar.warning]
    named = {name for name in ours for n in notes if f"`{name}" in n}
    assert named | {n for n in ours if link[n] == ""} == set(ours), (link, notes)
    got = address(at)
    assert all(got.get(k) != link[k] for k in ours if link[k]), (got, link)  # the bad values are gone
    assert at.session_state["picked_model"] == shipped_key(TWO)


def test_read_link_never_touches_files_and_checks_each_value():
    from ui.state import all_models  # outside Streamlit: the shipped models only
    models = {k: m for k, m in all_models().items()}
    picked = shipped_key(TWO)
    state, notes = share.read_link({"model": "variable-period-1block", "head": "1.4", "period": "30"}, "attention",
                                   models, picked)
    assert state == {"picked_model": shipped_key(ONE), "att_head": "1.4", "att_period": 30} and not notes
    state, notes = share.read_link({"head": "2.1"}, "attention", models, shipped_key(ONE))
    assert state == {} and len(notes) == 1 and "not a head" in notes[0]
    state, notes = share.read_link({"head": "2.1", "model": "variable-period-2block"}, "attention", models,
                                   shipped_key(ONE))
    assert state == {"picked_model": picked, "att_head": "2.1"}
    state, notes = share.read_link({"seed": "3"}, "circuits", models, picked)  # not a circuits parameter
    assert state == {} and not notes


def test_pin_values_are_positions_checked_one_by_one():
    from core.model.symbols import MAX_TEXT_LEN
    from ui.state import all_models  # outside Streamlit: the shipped models only
    models, picked = all_models(), shipped_key(TWO)
    state, notes = share.read_link({"pin": "30, 12"}, "attention", models, picked)
    assert state == {"att_pin": [12, 30]} and not notes
    longest = max(models[picked].info["task"].seq_len, MAX_TEXT_LEN)
    state, notes = share.read_link({"pin": str(longest - 1)}, "attention", models, picked)
    assert state == {"att_pin": [longest - 1]}
    for bad in (str(longest), "12,x", "1.5", "0x10", "12;30", "3,3"):
        state, notes = share.read_link({"pin": bad}, "attention", models, picked)
        assert state == {} and len(notes) == 1 and notes[0].startswith("`pin="), (bad, notes)
    assert share.link_of("attention", {"att_pin": [12, 30]}) == {"pin": "12,30"}
    assert share.link_of("attention", {"att_pin": []}) == {}


def test_keys_pinned_apart_round_trip_through_a_link_and_hostile_values_are_refused():
    from ui.state import all_models
    models, picked = all_models(), shipped_key(TWO)
    state, notes = share.read_link({"keys": "9, 5"}, "attention", models, picked)
    assert state == {"att_keys": [5, 9]} and not notes
    assert share.link_of("attention", state) == {"keys": "5,9"}
    assert share.link_of("attention", {"att_keys": []}) == {}
    for bad in ["5,5", "-3", "../../etc/passwd", "1e2", "9" * 50, ",".join(map(str, range(share.MAX_PINS + 1)))]:
        state, notes = share.read_link({"keys": bad, "pin": "12"}, "attention", models, picked)
        assert state == {"att_pin": [12]} and len(notes) == 1 and notes[0].startswith("`keys="), (bad, notes)
    assert share.read_link({"keys": "5"}, "archetypes", models, picked) == ({}, [])  # not that page's


def _pinned_in_charts(at: AppTest, name: str | None = None) -> list[list[int]]:
    """The initial value of every chart's pin selection on the page (the charts that have one), or of its
    selection called `name`."""
    import json

    from ui.charts.attention import PIN
    PIN = name or PIN
    out = []
    for chart in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        for param in spec.get("params", []):
            if param.get("name") == PIN:
                out.append(sorted(v for d in param.get("value", []) for v in d.values()))
    return out


@pytest.mark.app
def test_a_pin_link_pins_the_queries_in_both_pattern_views_and_survives_a_change_of_head():
    link = {"model": "variable-period-2block", "head": "2.1", "period": "24", "seed": "0", "seq": "task",
            "pin": "12,30"}
    at = open_link("app_pages/attention.py", link)
    assert at.session_state["att_pin"] == [12, 30] and not at.sidebar.warning
    assert _pinned_in_charts(at) == [[12, 30], [12, 30]]  # the grid and the single head start pinned
    assert address(at) == link
    at.selectbox(key="att_head").set_value("1.4").run()
    assert _pinned_in_charts(at) == [[12, 30], [12, 30]] and address(at)["pin"] == "12,30"
    hostile = open_link("app_pages/attention.py", {**link, "pin": "12,../../etc"})
    assert any("`pin=" in w.value for w in hostile.sidebar.warning)
    assert "pin" not in address(hostile) and _pinned_in_charts(hostile) == [[], []]
    keyed = open_link("app_pages/attention.py", {**link, "keys": "3,7"})  # the single head's keys pinned apart
    assert keyed.session_state["att_keys"] == [3, 7] and _pinned_in_charts(keyed, pins.KEYS) == [[3, 7]]
    assert address(keyed)["keys"] == "3,7"


@pytest.mark.app
def test_session_model_cannot_be_shared():
    from core.model.checkpoints import read_checkpoint
    from ui.state import LabModel
    at = open_link("app_pages/attention.py", {"model": "variable-period-2block", "head": "2.2"})
    model, info = read_checkpoint(ROOT / "checkpoints" / ONE)
    at.session_state["lab_models"] = {
        "session:abc": LabModel("session:abc", "mine (uploaded)", model, info, "uploaded")}
    at.session_state["pending_pick"] = "session:abc"  # as the Train page and the uploader do
    at.run()
    assert not at.exception, at.exception
    got = address(at)
    assert "model" not in got and got["head"] in ("1.1", "1.2", "1.3", "1.4")  # the view, not the model
    assert any("cannot carry it" in c.value for c in at.sidebar.caption)
    assert share.link_of("attention", {"picked_model": "session:abc", "att_head": "1.1"}) == {"head": "1.1"}

