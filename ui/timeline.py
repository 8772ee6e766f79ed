"""The Train page's timeline of one run (core.training.timeline): a film strip of two heads' patterns across
the drop lined up with markers on the loss curve, Olsson et al.'s in-context-learning score over
training, and the loss at each position before and after the drop."""
from __future__ import annotations

import streamlit as st

from ui import share, snippets
from ui.cache import per_model
from ui.charts import pins
from ui.charts import timeline as charts
from ui.charts.kept import draw
from ui.pins import pinned, take_pin
from ui.python_panel import python_panel
from ui.state import LabModel


@per_model(name="training.timeline", show_spinner="Measuring every snapshot of the run…", max_entries=8)
def _timeline(entry: LabModel) -> dict | None:
    from core.training import timeline as tl  # a view's computation is imported in the view: it imports torch

    return tl.timeline(entry.model, entry.full_info)


STRIP_PIN = "tr_strip_pin"  # the film strip's pinned queries: this run's (live and finished) and the shipped runs'


def pinned_tokens(pin, tokens: list[int] | None) -> str:
    """The pinned queries in a sentence: "12 (c), 30 (a)" (positions only without the tokens)."""
    from core.model.symbols import token_char

    return ", ".join(f"{p} ({token_char(int(tokens[p]))})" if tokens is not None and p < len(tokens) else str(p)
                     for p in pin)


@st.fragment
def _pinnable_strip(chart, tokens: list[int], key: str) -> None:
    """The finished film strip and the line naming its pin: a click reruns only this (the chart's spec, with the
    pin it was built with, is the kept one: the browser holds the pin it shows)."""
    draw(st, chart, width="content", key=key, on_select=take_pin(key, "query", STRIP_PIN, "train"),
         selection_mode=[pins.PIN])
    pin = pinned(STRIP_PIN, len(tokens))
    st.caption(f"Pinned: query {pinned_tokens(pin, tokens)} in every frame of both heads; a click above a diagonal "
               "releases it." if pin else
               "Click a row to pin that query in every frame of both heads (shift-click adds one; hover to preview; "
               "a click above a diagonal releases). The pin stays for this run, the live strip and the shipped runs.")


def strip_panel(t: dict, name: str) -> None:
    """The film strip of the run called `name`, with its pin (st.session_state[STRIP_PIN], shared by every film
    strip on the page)."""
    key = "tr_strip_" + "".join(c if c.isalnum() else "_" for c in name)
    _pinnable_strip(charts.strip(t, pinned(STRIP_PIN, len(t["tokens"]))), list(t["tokens"]), key)


LIVE_PICK = "tr_live_strip_pick"  # the live film strip's picker of pinned queries (its value mirrors STRIP_PIN)
MAX_LIVE_PINS = 16


def _take_live_pick() -> None:
    st.session_state[STRIP_PIN] = sorted(int(p) for p in st.session_state.get(LIVE_PICK) or ())
    share.republish("train")


def live_pin_picker(positions: int, where=st, period: int = 0) -> tuple[int, ...]:
    """The live film strip's pinned queries (its PNG tiles take no click): a multiselect of query positions that
    reads and writes the film strips' shared pin (STRIP_PIN), so a pin made on the live strip is there on the
    finished one and back. Drawn inside the live fragment, a change reruns only that fragment. Each position is
    labelled with its copy of the pattern when the strip's sequence has a period (the server holds the sequence's
    period, not its tokens: the worker process draws it). Returns the pin."""
    pin = pinned(STRIP_PIN, positions)
    if list(st.session_state.get(LIVE_PICK) or ()) != list(pin):
        st.session_state[LIVE_PICK] = list(pin)  # before the widget is drawn: the shared pin may have changed
    where.multiselect("Pin queries (positions)", list(range(positions)), key=LIVE_PICK, on_change=_take_live_pick,
                      format_func=(lambda p: f"{p} (copy {p // period + 1})") if period else str,
                      max_selections=MAX_LIVE_PINS, placeholder="none pinned",  # fits the picker's column at 800 px
                      help="The rows of these query positions stay at full strength in every frame of both heads, "
                           "the others are dimmed (none pinned: every row at full strength); the finished film "
                           "strip starts with the same pin.")
    return pin


NO_SNAPSHOTS = "a format-1 file, or a 0-block model"


def timeline_panel(entry: LabModel, name: str, no_snapshots: str = NO_SNAPSHOTS) -> None:
    """The whole timeline section for one run (nothing but a note, saying `no_snapshots` for why, when it
    has no snapshots)."""
    info = entry.info
    st.subheader(f"Watch the circuit form: {name}")
    st.markdown("**Replay a run from the weights it kept: when each head took its job, against the loss.**")
    if not info.get("snapshots"):
        st.info(f"This run has no snapshots of its weights ({no_snapshots}), so there is no timeline to show.")
        return
    t = _timeline(entry)
    if t is None:
        st.info("A 0-block model has no heads: there is no circuit to watch.")
        return
    d = t["drop"]
    c1, c2 = st.columns([3, 2])
    draw(c1, charts.curve(t), width="stretch")
    c2.markdown(
        f"**What am I looking at?** The later-copy loss at each of the {len(t['steps']) - 1} snapshots the run "
        "kept, and at its final step. "
        + (f"It fell from {d['drop_start']} (last snapshot at or above 3 nats) to {d['drop_end']} (first below "
           f"1 nat). " if d["dropped"] else "It never fell below 1 nat. ")
        + "The red markers 1–6 are the steps of the film strip below.")
    python_panel(snippets.run_timeline(entry.key),
                 shows={"loss": t["loss_later"], "icl": t["icl"], "frames": t["frames"]})
    strip_panel(t, name)
    st.caption(
        f"**What am I looking at?** Two heads' attention on the first {len(t['tokens'])} positions of one "
        f"evaluation sequence (period {t['period']}), at the six marked steps. Rows are queries, columns keys. "
        "Top and bottom: the block-1 head with the highest previous-token score and the last-block head with the "
        "highest induction score at the end of the run. Watch the line just below the diagonal (previous "
        "token) and the stripe one period back plus one (induction) appear, and which comes first (Olsson et al., "
        "2022).")
    c1, c2 = st.columns(2)
    draw(c1, charts.icl(t), width="stretch")
    c1.caption(
        f"**In-context-learning score**: the loss of predicting the token at position {t['late']} minus that at "
        f"position {t['early']} (positions from 0), averaged over the evaluation batch. Olsson et al. (2022) take "
        "token 500 minus token 50; these are the scaled-down choice for this run's sequences of "
        f"{info['task'].seq_len} tokens and periods {info['task'].period_min}–{info['task'].period_max}. "
        + (f"Position {t['early']} is in the first copy of every sequence" if t["icl_holds"]["first"] else
           f"Position {t['early']} is not in the first copy of every sequence (the shortest period is "
           f"{info['task'].period_min})")
        + (f" and {t['late']} in a later copy of every one, so the score falls below zero as far as the model "
           "uses the context." if t["icl_holds"]["later"] else
           f"; {t['late']} is not in a later copy of every sequence (the longest period is "
           f"{info['task'].period_max}), so part of the score is not about the context.")
        + f" Its final value: {t['icl'][-1]:.2f} nats.")
    if t["before_after"] is not None:
        draw(c2, charts.by_position(t), width="stretch")
        b, a = t["before_after"]
        start, pc = t["drop"]["drop_start"], t["position_change"]
        c2.caption(f"**Loss by position** at step {t['steps'][b]}, {start - t['steps'][b]} steps before the drop's "
                   f"start at step {start} (the snapshot nearest 50 steps before it: at the start itself the loss "
                   f"is already falling), and at step {t['steps'][a]}, after the drop. Before, the loss varies by "
                   f"{pc['spread_before']:.2f} nats across positions, against the {pc['drop']:.2f} nats the drop "
                   f"then takes off on average from position {pc['from_position']} on (in-context-learning score "
                   f"{t['icl'][b]:.2f} nats there, {t['icl'][a]:.2f} after); after, the loss falls once the first "
                   f"copy can be over (from position "
                   f"{info['task'].period_min}, the shortest period), because from there the next token can be "
                   "looked up.")
    else:
        c2.info("The loss never dropped in this run, so there is no before and after to compare.")
