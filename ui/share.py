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
prompt's name or a sentence of your own). The Causal experiments page shares period, seed, seq and
text too.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_VALUE_CHARS = 400  # longer than any valid value; a longer one is refused before it is parsed
SEQ_MODES = {"task": "Sampled task sequence", "text": "Type your own"}  # the Attention page's radio options
PAGE_SEQ_MODES = {"causal": {"task": "Sampled task sequences", "text": "Type your own"}}
ABLATION_MODES = ("zero", "mean")
SEED_MAX = 10_000  # the seed inputs' upper bound on the Attention, Depth and Causal pages

# page url_path -> the parameters it shares, each mapped to its widget key(s) on that page
PAGE_PARAMS: dict[str, dict[str, str]] = {
    "attention": {"head": "att_head", "period": "att_period", "seed": "att_seed", "seq": "att_source",
                  "text": "att_text"},
    "circuits": {"head": "cir_head", "ablate": "cir_ablate", "mode": "cir_mode"},
    "depth": {"seed": "depth_seed"},
    "archetypes": {"archetype": "arch_name", "prompt": "arch_prompt"},
    # the causal page keys its period input by the model ({model}: the picked model's key)
    "causal": {"period": "cz_period_{model}", "seed": "cz_seed", "seq": "cz_source", "text": "cz_text"},
}
CUSTOM_PROMPT = "Your own sentence"  # pages/archetypes.py's radio option for a typed sentence
CUSTOM_PROMPT_KEY = "arch_custom"


def _short(value: str) -> str:
    """A value as it may appear in a note: at most 30 characters."""
    return repr(value if len(value) <= 30 else value[:27] + "...")


def _int(value: str, lo: int, hi: int) -> int | None:
    value = value.strip()
    if not value.isdigit() or len(value) > 9:  # isdigit: no sign, no decimal point, no exponent
        return None
    n = int(value)
    return n if lo <= n <= hi else None


def preset_of(key: str) -> str | None:
    """The link name of a shipped model key ("shipped:x.pt" -> "x"), None for a session model."""
    if not key.startswith("shipped:"):
        return None
    file = key.split(":", 1)[1]
    return file[:-3] if file.endswith(".pt") else file


def read_link(params: Mapping[str, str], page: str, models: Mapping[str, Any], picked: str | None
              ) -> tuple[dict[str, Any], list[str]]:
    """Validate a link's parameters for `page`. params: name -> value (strings); models: key -> an
    entry with .model and .info (ui.state.LabModel); picked: the session's picked model key.

    Returns (widget state to set: widget key -> value, notes for the student)."""
    from core.archetypes import catalogue as arc
    from core.model.symbols import InputProblem, encode_text, head_labels
    from core.reading.probes import probe_periods

    state: dict[str, Any] = {}
    notes: list[str] = []
    wanted = PAGE_PARAMS.get(page, {})
    raw: dict[str, str] = {}
    for name, value in params.items():
        if name != "model" and name not in wanted:
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
    model, task = entry.model, entry.info["task"]
    wanted = {name: key.format(model=picked) for name, key in wanted.items()}
    seq_modes = PAGE_SEQ_MODES.get(page, SEQ_MODES)

    def refuse(name: str, why: str) -> None:
        notes.append(f"`{name}={_short(raw[name])}` {why}: the page's default is used instead.")

    if "head" in raw:
        labels = head_labels(model.cfg.n_layers, model.cfg.n_heads)
        if raw["head"] in labels:
            state[wanted["head"]] = raw["head"]
        else:
            refuse("head", f"is not a head of this model (it has {', '.join(labels) or 'none'})")
    if "period" in raw:
        lo, hi = (1, task.seq_len) if page == "causal" else probe_periods(task)
        period = _int(raw["period"], lo, hi)
        if period is None:
            refuse("period", f"is not a whole number from {lo} to {hi}")
        else:
            state[wanted["period"]] = period
    if "seed" in raw:
        seed = _int(raw["seed"], 0, SEED_MAX)
        if seed is None:
            refuse("seed", f"is not a whole number from 0 to {SEED_MAX:,}")
        else:
            state[wanted["seed"]] = seed
    if "seq" in raw:
        if raw["seq"] in seq_modes:
            state[wanted["seq"]] = seq_modes[raw["seq"]]
        else:
            refuse("seq", f"is not one of {', '.join(seq_modes)}")
    if "text" in raw:
        try:
            encode_text(raw["text"], model.cfg.vocab_size, min_len=2)  # as the pages read it
            state[wanted["text"]] = raw["text"]
        except ValueError as e:
            refuse("text", f"cannot be read ({e})")
    if "ablate" in raw:
        labels = head_labels(model.cfg.n_layers, model.cfg.n_heads)
        heads = [h.strip() for h in raw["ablate"].split(",") if h.strip()]
        if all(h in labels for h in heads) and len(set(heads)) == len(heads):
            state[wanted["ablate"]] = heads
        else:
            refuse("ablate", "names a head this model does not have (or one twice)")
    if "mode" in raw:
        if raw["mode"] in ABLATION_MODES:
            state[wanted["mode"]] = raw["mode"]
        else:
            refuse("mode", f"is not one of {', '.join(ABLATION_MODES)}")
    if "archetype" in raw:
        if raw["archetype"] in arc.ARCHETYPES:
            state[wanted["archetype"]] = raw["archetype"]
        else:
            refuse("archetype", f"is not one of {', '.join(arc.ARCHETYPES)}")
    if "prompt" in raw:
        if raw["prompt"] in arc.PRESET_PROMPTS:
            state[wanted["prompt"]] = raw["prompt"]
        else:
            try:
                arc.tokenize(raw["prompt"])
                state[wanted["prompt"]], state[CUSTOM_PROMPT_KEY] = CUSTOM_PROMPT, raw["prompt"]
            except InputProblem as e:
                refuse("prompt", f"cannot be used ({e})")
    return state, notes


def link_of(page: str, session: Mapping[str, Any]) -> dict[str, str]:
    """The parameters of the view on screen: the picked shipped model and `page`'s widget values."""
    out: dict[str, str] = {}
    name = preset_of(str(session.get("picked_model", "")))
    if name:
        out["model"] = name
    seq_modes = PAGE_SEQ_MODES.get(page, SEQ_MODES)
    seq_names = {v: k for k, v in seq_modes.items()}
    wanted = {p: k.format(model=session.get("picked_model", "")) for p, k in PAGE_PARAMS.get(page, {}).items()}
    for param, key in wanted.items():
        if key not in session:
            continue
        value = session[key]
        if param == "seq":
            value = seq_names.get(value)
        elif param == "ablate":
            value = ",".join(value) if value else None
        elif param == "text" and session.get(wanted["seq"]) != seq_modes["text"]:
            value = None
        elif param == "prompt" and value == CUSTOM_PROMPT:
            value = session.get(CUSTOM_PROMPT_KEY)
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


def publish(page: str) -> None:
    """After the page drew: put the view on screen in the address, and say in the sidebar what a
    link carries (and any problem with the link that opened this view)."""
    import streamlit as st

    link = link_of(page, st.session_state)
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
        elif page in PAGE_PARAMS:
            st.caption("🔗 The address bar holds this view (model and settings): copy it to share the view.")
