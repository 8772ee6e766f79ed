"""The Train page's timeline of one run (core.training.timeline): a film strip of two heads' patterns across
the drop lined up with markers on the loss curve, Olsson et al.'s in-context-learning score over
training, and the loss at each position before and after the drop."""
from __future__ import annotations

import streamlit as st

from ui import snippets
from ui.cache import per_model
from ui.charts import timeline as charts
from ui.charts.kept import draw
from ui.python_panel import python_panel
from ui.state import LabModel


@per_model(name="training.timeline", show_spinner="Measuring every snapshot of the run…", max_entries=8)
def _timeline(entry: LabModel) -> dict | None:
    from core.training import timeline as tl  # a view's computation is imported in the view: it imports torch

    return tl.timeline(entry.model, entry.full_info)


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
    draw(st, charts.strip(t), width="content")
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
