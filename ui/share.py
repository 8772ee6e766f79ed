"""Shareable views: the settings that define a view live in the page address (st.query_params).

Opening a link applies its parameters to the session's widget state once (`apply_link`), before the
sidebar and the page draw; after every run `publish` writes the view on screen back to the address
bar, so copying it shares exactly that view. `read_link` is the one place that parses and validates
every parameter: anything malformed, out of range or hostile (a path for the model, a 10,000-character
string, a negative or non-numeric number, an unknown name) is dropped with a short note, and the
widget keeps its default. Nothing from the address is ever used as a file name: the model parameter
must equal the preset name of a shipped checkpoint, compared as a string.

Parameters (all optional): model, head ("2.3", counted from 1), period, seed, seq ("task" or "text"),
text (a typed sequence), ablate ("1.2,2.3"), mode ("zero" or "mean"), archetype, prompt (a preset
prompt's name or a sentence of your own), pin ("12,30": the query positions pinned on the Attention page
(a Markov model's too), the Archetypes page's patterns or the Train page's film strips, counted from 0), keys
("5,9": the key positions the Attention page's single head pins apart, checked as pin is). The Causal
experiments page shares period, seed, seq and text too. Each parameter but `model` is one row of PARAMS (its
parser, how it is stored in the widget state, how the widget value is written back into the link);
PAGE_PARAMS maps a page's parameters to its widget keys, TASK_PAGE_PARAMS those of a page a task draws itself
(a Markov model's Attention page: head, seed, pin).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ui.model_keys import shipped_file

MAX_VALUE_CHARS = 400  # longer than any valid value; a longer one is refused before it is parsed
MAX_PINS = 16  # the most query positions a link pins
SEED_MAX = 10_000  # the upper bound of every sample-seed input (Attention, Depth, Causal, Archetypes pages)
ABLATION_MODES = ("zero", "mean")
# The sequence radio's options on the pages that share `seq`: link value -> the radio's label
SEQ_MODES: dict[str, dict[str, str]] = {
    "attention": {"task": "Sampled task sequence", "text": "Type your own"},
    "causal": {"task": "Sampled task sequences", "text": "Type your own"},
}
CUSTOM_PROMPT = "Your own sentence"  # the Archetypes page's prompt radio option for a typed sentence
CUSTOM_PROMPT_KEY = "arch_custom"  # ... and the widget that holds that sentence

# page url_path -> the parameters it shares, each mapped to its widget key on that page
PAGE_PARAMS: dict[str, dict[str, str]] = {
    "attention": {"head": "att_head", "period": "att_period", "seed": "att_seed", "seq": "att_source",
                  "text": "att_text", "pin": "att_pin", "keys": "att_keys"},
    "circuits": {"head": "cir_head", "ablate": "cir_ablate", "mode": "cir_mode"},
    "depth": {"seed": "depth_seed"},
    "archetypes": {"archetype": "arch_name", "prompt": "arch_prompt", "pin": "arch_pin"},
    # the causal page keys its period input by the model ({model}: the picked model's key)
    "causal": {"period": "cz_period_{model}", "seed": "cz_seed", "seq": "cz_source", "text": "cz_text",
               "corruption": "cz_corruption"},
    "train": {"pin": "tr_strip_pin"},  # the film strips' pinned queries; a training itself is no link's
}
# what the address holds, said in the sidebar (every other page that shares: "this view (model and settings)")
HOLDS = {"train": "the picked model and the film strip's pinned queries (a training is not carried: its "
                  "settings train it again)"}

# The page a task draws itself (ui/task_pages.py) shares its own settings: (task, page url_path) -> parameters
TASK_PAGE_PARAMS: dict[tuple[str, str], dict[str, str]] = {
    ("markov", "attention"): {"head": "att_mk_head", "seed": "att_mk_seed", "pin": "att_mk_pin"},
}

class Refused(Exception):
    """A link value that cannot be used; the message completes "`name=value` ..." in the note."""


@dataclass(frozen=True)
class Target:
    """What a link's values are checked against: the page and the picked model."""

    page: str
    model: Any  # core.model.tinycharlm.TinyCharLM
    task: Any  # core.model.task.TaskConfig


@dataclass(frozen=True)
class Screen:
    """The view on screen a link is made of: the page, the session's widget state, and the page's
    parameters mapped to their widget keys."""

    page: str
    session: Mapping[str, Any]
    keys: Mapping[str, str]


def _one(key: str, value: Any) -> dict[str, Any]:
    return {key: value}


def _as_is(value: Any, screen: Screen) -> Any:
    return value


@dataclass(frozen=True)
class Param:
    """One link parameter. parse(value, target) -> the widget value, or raises Refused(why);
    store(widget key, parsed value) -> the widget state to set (most set their one widget);
    show(widget value, screen) -> the value in the link (None or "": left out)."""

    parse: Callable[[str, Target], Any]
    store: Callable[[str, Any], dict[str, Any]] = _one
    show: Callable[[Any, Screen], Any] = _as_is


def _short(value: str) -> str:
    """A value as it may appear in a note: at most 30 characters."""
    return repr(value if len(value) <= 30 else value[:27] + "...")


def _int(value: str, lo: int, hi: int) -> int:
    value = value.strip()
    n = int(value) if value.isdigit() and len(value) <= 9 else None  # isdigit: no sign, point or exponent
    if n is None or not lo <= n <= hi:
        raise Refused(f"is not a whole number from {lo:,} to {hi:,}")
    return n


def _one_of(value: str, allowed) -> str:
    if value not in allowed:
        raise Refused(f"is not one of {', '.join(allowed)}")
    return value


def _labels(t: Target) -> list[str]:
    from core.model.symbols import head_labels

    return head_labels(t.model.cfg.n_layers, t.model.cfg.n_heads)


def _head(value: str, t: Target) -> str:
    if value not in _labels(t):
        raise Refused(f"is not a head of this model (it has {', '.join(_labels(t)) or 'none'})")
    return value


def _period(value: str, t: Target) -> int:
    from core.reading.probes import probe_periods

    return _int(value, *((1, t.task.seq_len) if t.page == "causal" else probe_periods(t.task)))


def _text(value: str, t: Target) -> str:
    from core.model.symbols import encode_text

    try:
        encode_text(value, t.model.cfg.vocab_size, min_len=2)  # as the pages read it
    except ValueError as e:
        raise Refused(f"cannot be read ({e})") from e
    return value


def _ablate(value: str, t: Target) -> list[str]:
    heads = [h.strip() for h in value.split(",") if h.strip()]
    if not all(h in _labels(t) for h in heads) or len(set(heads)) != len(heads):
        raise Refused("names a head this model does not have (or one twice)")
    return heads


def _pin(value: str, t: Target) -> list[int]:
    from core.model.symbols import MAX_TEXT_LEN

    longest = max(getattr(t.task, "seq_len", 0), MAX_TEXT_LEN)  # a position past the sequence shown is not drawn
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if len(parts) > MAX_PINS:
        raise Refused(f"pins more than {MAX_PINS} positions")
    try:
        positions = [_int(p, 0, longest - 1) for p in parts]
    except Refused:
        raise Refused(f"is not a list of positions from 0 to {longest - 1}, such as 12,30") from None
    if len(set(positions)) != len(positions):
        raise Refused("names a position twice")
    return sorted(positions)


def pin_text(positions) -> str | None:
    """The link value of pinned positions ("12,30"); None for none."""
    return ",".join(str(int(p)) for p in positions) if positions else None


def _archetype(value: str, t: Target) -> str:
    from core.archetypes.catalogue import ARCHETYPES

    return _one_of(value, ARCHETYPES)


def _prompt(value: str, t: Target) -> str:
    from core.archetypes import catalogue as arc
    from core.model.symbols import InputProblem

    if value not in arc.PRESET_PROMPTS:
        try:
            arc.tokenize(value)
        except InputProblem as e:
            raise Refused(f"cannot be used ({e})") from e
    return value


def _corruption(value: str, t: Target) -> str:
    from core.causal.corruptions import CORRUPTIONS

    return _one_of(value, CORRUPTIONS)


def _store_prompt(key: str, value: str) -> dict[str, Any]:
    from core.archetypes.catalogue import PRESET_PROMPTS

    return {key: value} if value in PRESET_PROMPTS else {key: CUSTOM_PROMPT, CUSTOM_PROMPT_KEY: value}


# Every link parameter but `model` (which picks the model the others are checked against, on every page),
# in the order their notes are given. A new parameter is one row here and its widget keys in PAGE_PARAMS.
PARAMS: dict[str, Param] = {
    "head": Param(_head),
    "period": Param(_period),
    "seed": Param(lambda v, t: _int(v, 0, SEED_MAX)),
    "seq": Param(lambda v, t: SEQ_MODES[t.page][_one_of(v, SEQ_MODES[t.page])],
                 show=lambda v, s: {label: name for name, label in SEQ_MODES[s.page].items()}.get(v)),
    "text": Param(_text, show=lambda v, s: v if s.session.get(s.keys["seq"]) == SEQ_MODES[s.page]["text"] else None),
    "ablate": Param(_ablate, show=lambda v, s: ",".join(v) if v else None),
    "mode": Param(lambda v, t: _one_of(v, ABLATION_MODES)),
    "archetype": Param(_archetype),
    "pin": Param(_pin, show=lambda v, s: pin_text(v)),
    "keys": Param(_pin, show=lambda v, s: pin_text(v)),  # key positions pinned apart (the single head's alt-click)
    "corruption": Param(_corruption),
    "prompt": Param(_prompt, store=_store_prompt,
                    show=lambda v, s: s.session.get(CUSTOM_PROMPT_KEY) if v == CUSTOM_PROMPT else v),
}


def preset_of(key: str) -> str | None:
    """The link name of a shipped model key ("shipped:x.pt" -> "x"), None for a session model."""
    file = shipped_file(key)
    if file is None:
        return None
    return file[:-3] if file.endswith(".pt") else file


def _page_keys(page: str, picked: Any, task: str | None = None) -> dict[str, str]:
    """`page`'s parameters -> their widget keys, for the picked model's key and task (the page a task draws
    itself has its own: TASK_PAGE_PARAMS)."""
    params = TASK_PAGE_PARAMS.get((task, page), PAGE_PARAMS.get(page, {}))
    return {name: key.format(model=picked or "") for name, key in params.items()}


def _shared_by(page: str) -> set[str]:
    """Every parameter `page` shares, for any model's task."""
    return {*PAGE_PARAMS.get(page, {}), *(n for (_, p), params in TASK_PAGE_PARAMS.items() if p == page
                                         for n in params)}


def read_link(params: Mapping[str, str], page: str, models: Mapping[str, Any], picked: str | None
              ) -> tuple[dict[str, Any], list[str]]:
    """Validate a link's parameters for `page`. params: name -> value (strings); models: key -> an
    entry with .model and .info (ui.state.LabModel); picked: the session's picked model key.

    Returns (widget state to set: widget key -> value, notes for the student)."""
    state: dict[str, Any] = {}
    notes: list[str] = []
    raw: dict[str, str] = {}
    for name, value in params.items():
        if name != "model" and name not in _shared_by(page):
            continue  # parameters of other pages are ignored quietly
        value = str(value)
        if len(value) > MAX_VALUE_CHARS:
            notes.append(f"`{name}` is {len(value):,} characters long, more than any valid value: ignored.")
            continue
        raw[name] = value

    if "model" in raw:
        by_name = {preset_of(k): k for k in models if preset_of(k)}
        if raw["model"] in by_name:
            picked = state["picked_model"] = by_name[raw["model"]]
        else:
            notes.append(f"`model={_short(raw['model'])}` is not a shipped model ({', '.join(sorted(by_name))}): "
                         "the picked model stays.")
    entry = models.get(picked) if picked else None
    if entry is None:
        return state, notes
    target = Target(page, entry.model, entry.info["task"])
    keys = _page_keys(page, picked, entry.info["task"].name)
    for name, param in PARAMS.items():
        if name not in raw or name not in keys:
            continue
        try:
            state.update(param.store(keys[name], param.parse(raw[name], target)))
        except Refused as why:
            notes.append(f"`{name}={_short(raw[name])}` {why}: the page's default is used instead.")
    return state, notes


def link_of(page: str, session: Mapping[str, Any], widgets: bool = True, task: str | None = None) -> dict[str, str]:
    """The parameters of the view on screen: the picked shipped model and `page`'s widget values for the model's
    `task` (none when not `widgets`: the picked model's task draws its own version of the page without
    parameters, or none, so they are not on screen)."""
    out: dict[str, str] = {}
    name = preset_of(str(session.get("picked_model", "")))
    if name:
        out["model"] = name
    keys = _page_keys(page, session.get("picked_model", ""), task) if widgets else {}
    screen = Screen(page, session, keys)
    for param, key in keys.items():
        if key in session:
            value = PARAMS[param].show(session[key], screen)
            if value is not None and value != "":
                out[param] = str(value)
    return out


# ---------------------------------------------------------------------------------------------
# Streamlit side


def apply_link(page: str) -> None:
    """Before the sidebar and page draw: if the address holds parameters this session has not
    applied or written itself, set the widget state they ask for and keep the notes for `publish`."""
    import streamlit as st

    from ui.state import all_models, selected_model

    params = {k: st.query_params[k] for k in st.query_params}
    if not params or params == st.session_state.get("share_last"):
        return
    current = selected_model()
    state, notes = read_link(params, page, all_models(), current.key if current else None)
    for key, value in state.items():
        st.session_state[key] = value
    st.session_state["share_notes"] = notes
    st.session_state["share_last"] = params


def _on_screen(page: str) -> tuple[bool, str | None]:
    """Whether the widgets a link of `page` carries are drawn for the picked model, and its task. Not when the
    task draws its own version of the page (a Markov model's Causal page) or does not get it (ui/task_pages.py):
    the settings left in the session by a visit with another model are then not the view on screen, and a link
    carrying them would open another model's page with them. A task's own version with parameters of its own
    (TASK_PAGE_PARAMS: a Markov model's Attention page) carries them when the link can name the model."""
    from ui import task_pages
    from ui.state import selected_model

    entry = selected_model()
    if entry is None:
        return True, None
    task = entry.task.name
    if (task, page) in TASK_PAGE_PARAMS:
        return preset_of(entry.key) is not None, task
    return task_pages.own(task, page) is None and task_pages.not_offered_note(entry, page) is None, task


def republish(page: str) -> None:
    """Put the view on screen in the address without the page's full run (a fragment changed a setting
    a link carries, such as the pinned tokens)."""
    import streamlit as st

    link = link_of(page, st.session_state, *_on_screen(page))
    if {k: st.query_params[k] for k in st.query_params} != link:
        st.query_params.from_dict(link)
    st.session_state["share_last"] = link


def publish(page: str) -> None:
    """After the page drew: put the view on screen in the address, and say in the sidebar what a
    link carries (and any problem with the link that opened this view)."""
    import streamlit as st

    on_screen, task = _on_screen(page)
    link = link_of(page, st.session_state, on_screen, task)
    if {k: st.query_params[k] for k in st.query_params} != link:
        st.query_params.from_dict(link)
    st.session_state["share_last"] = link
    notes = st.session_state.pop("share_notes", [])
    with st.sidebar:
        for note in notes:
            st.warning("Link: " + note, icon="🔗")
        if not preset_of(str(st.session_state.get("picked_model", ""))) and st.session_state.get("picked_model"):
            st.caption("🔗 This model was trained or uploaded in your session and lives only there, so a link "
                       "cannot carry it: whoever opens this page's address gets a shipped model instead. "
                       "Download the checkpoint to share it.")
        elif page in PAGE_PARAMS and on_screen:
            st.caption(f"🔗 The address bar holds {HOLDS.get(page, 'this view (model and settings)')}: copy it to "
                       "share the view.")
        elif page in PAGE_PARAMS:  # the model's task draws its own version of the page, whose settings no link carries
            st.caption("🔗 The address bar holds the picked model, not this page's settings for it: a link opens the "
                       "page at its defaults.")
