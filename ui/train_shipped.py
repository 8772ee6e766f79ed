"""The Train page's panels about runs already made: the shipped runs' curves and head scores (waiting for the
predictions asked before Train, or asking the training questions themselves) and the transition study of many
seeds. Moved out of app_pages/train.py, which keeps the live run."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from core.quiz import training as quiz_training
from core.training import live, transition
from core.training.presets import DEFAULT_PRESET
from ui import snippets, text
from ui.charts import train as charts
from ui.charts.kept import draw, kept
from ui.glossary import link
from ui.model_keys import shipped_key
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import shipped_files, shipped_models
from ui.timeline import timeline_panel

_shipped_head_scores = kept(charts.head_score_chart)  # a shipped run's chart (the live one: head_score_spec)


@st.cache_data(show_spinner=False, max_entries=16)
def frames(key: str, _info: dict, upto: int | None = None):
    hist = [r for r in (_info.get("history") or []) if upto is None or r["step"] <= upto]
    return live.loss_frame(hist, key), live.accuracy_frame(hist, key)


@st.cache_data(show_spinner=False, max_entries=4)
def _heads(key: str, _info: dict):
    hist = _info.get("history") or []
    return live.head_score_frame(hist), live.drop_step(hist, _info["config"].vocab_size)


def shipped_runs() -> dict[str, dict]:
    """{preset: info} of every shipped checkpoint that carries a training history."""
    presets = {shipped_key(r['file']): r.get("preset", r["file"]) for r in shipped_files()}
    return {presets[m.key]: m.info for m in shipped_models() if m.key in presets and m.info.get("history")}


def _file_of(preset: str) -> str:
    """The shipped file of a preset (the manifest's row), or "<preset>.pt"."""
    return next((r["file"] for r in shipped_files() if r.get("preset", r["file"]) == preset), f"{preset}.pt")


def _answered(predicted: dict[str, bool] | None, key: str, waiting: str, ask_here: bool, question, hides: str) -> bool:
    """Whether what answers a training question may be drawn: with the predictions asked before Train (`predicted`),
    once that one is answered or skipped (else `waiting` says why nothing shows); without them, after the question
    (`question()`) is asked here, when `ask_here`."""
    if predicted is not None:
        if not predicted.get(key, True):
            st.caption(waiting)
            return False
        return True
    return not ask_here or ask(question(), hides=hides)


def shipped_panel(questions: bool = True, predicted: dict[str, bool] | None = None) -> None:
    """The shipped runs' curves and head scores; `questions`: with the training questions (False when this
    session's run already asks them). `predicted`: {question key: answered or skipped} of the questions asked
    before Train (before_training): each chart that answers one waits for it, and the panel asks nothing."""
    runs = shipped_runs()
    st.subheader("The shipped runs")
    st.markdown(f"**The shipped checkpoints kept their training curves: compare whether, and when, each run's "
                f"{link('later-copy loss')} shows {link('the drop')}.**")
    if not runs:
        st.info("No shipped checkpoint with a training history is installed.")
        return
    losses = [frames(name, info)[0] for name, info in runs.items()]
    vocab = next(iter(runs.values()))["config"].vocab_size
    shown = _answered(predicted, "q_first", "The curves of the shipped runs answer the first prediction above: they "
                      "show once you answer or skip it.", questions and DEFAULT_PRESET in runs,
                      lambda: quiz_training.first_copy_during_drop(runs[DEFAULT_PRESET]["history"], vocab),
                      "the shipped runs' curves")
    curves, curves_shown = pd.concat(losses), shown
    if shown:
        chart, note = st.columns([3, 1])
        draw(chart, charts.shipped_runs_chart(curves, math.log(vocab)), width="stretch")
        note.markdown(
            "**What am I looking at?** The training curves stored in the shipped checkpoints, measured on a fixed "
            "evaluation batch. Solid: loss on later-copy targets; dashed: first-copy targets, which nothing in the "
            "context can predict, so no model gets below the uniform guess there. A model that has learned to "
            "look things up drives its solid line far below the dashed one. With a single fixed period, one block "
            "can cheat by always attending the same distance back. Runs that start from the enlarged embedding "
            "begin above the top of the chart (hover for the value).")
    st.markdown("\n".join(f"- {text.run_outcome(name, info['history'], vocab)}" for name, info in runs.items()))
    if shown:  # its printed losses answer the question as the chart does
        python_panel(snippets.shipped_curves([_file_of(name) for name in runs]), shows={"loss": curves["loss"]})
    if DEFAULT_PRESET in runs:
        heads, drop = _heads(DEFAULT_PRESET, runs[DEFAULT_PRESET])
        shown = _answered(predicted, "q_timing", "Every head's scores over the shipped run, and its film strip, "
                          "answer the second prediction above: they show once you answer or skip both.", questions,
                          lambda: quiz_training.prev_head_timing(runs[DEFAULT_PRESET]["history"], vocab),
                          "every head's scores over training")
        if shown:
            chart, note = st.columns([3, 1])
            draw(chart, _shipped_head_scores(heads, drop))
            note.markdown(
                f"**What am I looking at?** Inside the shipped {DEFAULT_PRESET} run: every head's share of "
                "attention on the previous position (top) and on the induction target (bottom), block by block. "
                + (f"The red line is step {drop}, where its later-copy loss fell below ln V / 2. Compare when "
                   "the block-1 and block-2 lines rise with that line." if drop is not None else
                   "Its later-copy loss never fell below ln V / 2."))
        shipped = {m.key: m for m in shipped_models()}.get(shipped_key(_file_of(DEFAULT_PRESET)))
        if shipped is not None:
            if shown:
                python_panel(snippets.head_scores_over_training(shipped), shows={"value": heads["value"]})
            if shown and curves_shown:  # its film strip and loss by position answer both questions too
                timeline_panel(shipped, f"the shipped {DEFAULT_PRESET} run")


@st.cache_data(show_spinner=False, max_entries=4)
def _study(path: str, mtime: float) -> dict | None:
    return transition.shipped_study(path)


def transition_panel() -> None:
    st.subheader("How often, and when, does the drop happen?")
    st.markdown("**One run is one draw: many seeds of the same settings show how reliably, and how abruptly, the "
                "drop comes.**")
    path = transition.STUDY_FILE
    study = _study(str(path), path.stat().st_mtime) if path.is_file() else None
    if study is None:
        st.info("Not yet measured: the transition study (many seeds of the 1- and 2-block runs) is not installed "
                "with this copy of the lab. One run cannot tell you how reliable or how early the drop is; "
                "train a few seeds yourself above to get a feel for it.")
        return
    if "error" in study:
        st.warning(study["error"])
        return
    summary, runs = study["summary"], study["runs"]
    st.markdown("\n".join(f"- {t}" for b in sorted(summary["blocks"]) if (t := text.study_sentence(summary, int(b)))))
    chart, note = st.columns([3, 1])
    if runs["dropped"].any():
        draw(chart, charts.transition_runs_chart(runs, study["high"], study["low"]), width="stretch")
    note.markdown(
        f"**What am I looking at?** One bar per training run (seed) whose later-copy loss dropped. The bar "
        f"starts at the last logged step where the loss was still at or above {study['high']:g} nats and ends "
        f"at the first step below {study['low']:g} nat{'' if study['low'] == 1 else 's'}; the black tick is where "
        "it crossed ln V / 2, the "
        "point the live chart marks. A short bar after a long plateau is what *abrupt* means here. Runs that "
        "never dropped have no bar; the sentence above counts them.")
    with st.expander("How the study counts an induction head, and which start its runs had"):
        st.markdown(
            "An induction head here is a last-block head whose induction score (attention on the token after any "
            f"earlier copy) is at least {transition.INDUCTION_HEAD:g}. Every run started from the enlarged initial "
            "embedding (the default, see Advanced above). From the plain embedding the plateau lasted about three "
            "times longer in the three seeds measured, so the drop steps above are not those of a plain start.")
    python_panel(snippets.transition_study(), shows={"drop": runs["drop_step"]})
    with st.expander("Every run of the study, and the command that measures it again"):
        st.dataframe(runs, hide_index=True, width="stretch")
        if study["command"]:
            st.code(study["command"], language="bash")
