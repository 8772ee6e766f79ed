"""Train page: pick a model and task, train live in a worker process, watch the loss split and the heads form."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.pool.status import RunStatus
from core.quiz import training as quiz_training
from core.training import live
from core.training.presets import REFERENCE_PRESET
from ui import layout, snippets, task_pages, text
from ui.charts import timeline as timeline_charts
from ui.charts import train as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.python_panel import python_panel
from ui.quiz import ask, ask_before, ask_recorded, show_recorded
from ui.seeds import seeds_section
from ui.state import TrainedModel, session_models
from ui.timeline import NO_SNAPSHOTS, live_pin_picker, timeline_panel
from ui.train_form import settings_widgets
from ui.train_shipped import frames, shipped_panel, shipped_runs, transition_panel
from ui.training import capacity, pool_problem, register, reset, run_pool, shared_note, start, start_own_copy, stop

if TYPE_CHECKING:
    from core.pool.runs import LiveRun

RUN_EVERY = 1.5  # seconds between redraws of a live run's progress and charts. Each costs the server CPU the
# training could use: about 0.04 CPU-s with a new row, so 0.043 server cores at 1 s (bench/class.py). At the
# defaults' 25-30 steps/s a redraw comes every 40-45 steps, under two logged rows (every 25 steps). A new row's
# charts would be 0.1-0.15 s of Altair each, so they are kept specs given new datasets (ui.charts.kept.swapped,
# about 10 ms for the three), and a redraw in between only sends what _live_figures keeps. Drawn with the
# progress bar, they show # the rows the worker has logged up to the step on the counter


def _live_figures(run: LiveRun, n_rows: int, n_frames: int, span: int, reference: dict | None) -> dict:
    """The live panel's charts and film strip for a run's first n_rows logged rows and n_frames frames,
    the charts in the form Streamlit sends them (Vega-Lite specs; the strip's PNG tiles: live_strip_panel).
    Built once per new row (every 25 steps) and reused by the redraws in between, which then cost only the
    sending; each chart's spec is converted by Altair once per run and shape, a new row only replacing its data
    (ui.charts.kept.swapped).
    Only the latest are kept, in the session, so they go with it (a server-wide cache would keep up to
    32 of them, about 6 MB, after their sessions had ended)."""
    signature = (run.id, n_rows, n_frames, span, reference is not None)
    kept = st.session_state.get("_live_figures")
    if kept is not None and kept[0] == signature:
        return kept[1]
    figures = _build_live_figures(run, n_rows, n_frames, span, reference)
    st.session_state["_live_figures"] = (signature, figures)
    return figures


def _build_live_figures(run: LiveRun, n_rows: int, n_frames: int, span: int, reference: dict | None) -> dict:
    from core.training import frames as timeline  # torch-free: watching a run imports no torch in the server

    hist, vocab = run.history()[:n_rows], run.model_cfg.vocab_size
    drop = live.drop_step(hist, vocab)
    loss, acc = live.loss_frame(hist, "this run"), live.accuracy_frame(hist, "this run")
    if reference is not None:
        ref_loss, ref_acc = frames("shipped 1 block", reference, span)
        loss, acc = pd.concat([loss, ref_loss]), pd.concat([acc, ref_acc])
    strip = timeline.live_strip(run.frames[:n_frames], hist, vocab, run.strip_period) if n_frames else None
    heads = live.head_score_frame(hist)
    return {"hist": hist, "drop": drop, "strip": strip,
            "loss": charts.loss_spec(loss, math.log(vocab), drop, span, marks=strip and strip["frames"]),
            "accuracy": charts.accuracy_spec(acc, 1 / vocab, drop, span),
            "heads": None if heads.empty else charts.head_score_spec(heads, drop, span)}


def live_charts(run: LiveRun, reference: dict | None) -> None:
    vocab = run.model_cfg.vocab_size
    span = run.total_steps if run.active else max(run.step, 1)  # a stopped run's axis ends where it stopped
    n_frames = len(run.frames) if run.active else 0
    fig = _live_figures(run, len(run.history()), n_frames, span, reference)
    hist, drop, strip = fig["hist"], fig["drop"], fig["strip"]
    chart, note = st.columns([3, 1])
    draw(chart, fig["loss"], width="stretch")
    note.markdown(
        "**What am I looking at?** The loss on a fixed evaluation batch, split by where the target sits. "
        f"Orange: targets in the {link('first copy')}, which nothing in the context can predict, so they stay "
        f"near ln V ({link('nats')}). Blue: targets in the *later copies*, which can be read off the earlier copy. "
        + ("Dashed: the shipped 1-block run for comparison; one block cannot chain the two steps an induction "
           "head needs, so it never gets near a working 2-block model. " if reference else "")
        + (f"The red line marks step {drop}, where the later-copy loss first fell below ln V / 2."
           if drop is not None else "The later-copy loss has not yet fallen below ln V / 2.")
        + (" The untrained model starts above the top of the chart (its enlarged embedding bets on the current "
           "token repeating); hover the first point for its value."
           if hist and hist[0]["loss_later_copies"] > charts.LOSS_TOP * math.log(vocab) else "")
        + (" The numbered dashed lines are the steps of the film strip below." if strip else ""))
    if strip:
        live_strip_panel(strip)
    chart, note = st.columns([3, 1])
    draw(chart, fig["accuracy"], width="stretch")
    note.markdown("**What am I looking at?** How often the most likely next token is the right one on the "
                  "second copy (the first repeat) and on all later copies. Guessing gives 1/V.")
    if fig["heads"] is None:
        st.info("A 0-block model has no attention heads: its logits come from the embedding alone "
                "(bigram statistics), so there are no head scores to follow.")
        return
    chart, note = st.columns([3, 1])
    draw(chart, fig["heads"])
    note.markdown(
        "**What am I looking at?** Each line is one head (colour) in one block (column). Top row: the share "
        "of its attention on the previous position. Bottom row: the share on the token *after* the earlier "
        "occurrence of the current token, one period back (the induction target; induction heads also read "
        "older copies, so this share stays below their whole induction score, shown on Home). In a 2-block "
        "run, watch a block-1 head turn into a previous-token head and block-2 heads turn into induction "
        "heads around the later-copy loss drop (Olsson et al., 2022, see them form during it), and read off "
        "which moves first: the scores need not rise at the same step as the loss falls, and a head held on "
        "the previous position scores 1 from step 0.")


def live_panel(drawn_active: bool) -> None:
    """The run's progress (its charts: live_charts_panel). drawn_active: the page around it was drawn while the run was
    active; once the run has ended, the whole page is drawn again (buttons, picker, download)."""
    run = st.session_state.get("train_run")
    if run is None:
        return
    if drawn_active and not run.active:
        st.rerun(scope="app")
    if run.active and run.stopping:
        st.info("Stopping: the step in progress finishes first, and the model of that step is kept.")
    if run.status == RunStatus.WAITING and run.blocked:
        st.info("Waiting: your several-seeds run holds this session's training slot (one per session). This run "
                "starts on its own when that seed ends.")
    elif run.status == RunStatus.WAITING:
        ahead = f"; {run.position - 1} ahead of you" if run.position > 1 else "; you are next"
        st.info(f"Waiting for a free training slot: {run_pool().running()} running{ahead}. Training starts on "
                "its own when a slot frees up.")
    train = run.settings.train
    st.caption(f"This run: {run.settings.label()}, learning rate {train.lr:g}, batch {train.batch_size}.")
    progress = text.progress_text(run.step, run.total_steps, run.active, run.steps_per_second(), run.status,
                                  run.seconds)
    st.progress(min(run.step / max(run.total_steps, 1), 1.0), text=progress)


def live_charts_panel() -> None:
    """The run's charts and film strip, drawn in the same fragment as its progress (live_run_panel)."""
    run = st.session_state.get("train_run")
    own = task_pages.own(run.settings.kind, "train_live") if run is not None else None
    if own is not None:
        own(run)
    elif run is not None:
        live_charts(run, shipped_runs().get(REFERENCE_PRESET))


def live_run_panel(drawn_active: bool) -> None:
    """The run's progress and its charts, redrawn together every RUN_EVERY seconds while it trains, so the
    charts never trail the step counter by more than the rows logged since the last redraw."""
    live_panel(drawn_active)
    live_charts_panel()


def live_strip_panel(strip: dict) -> None:
    """The live film strip of `strip`, its queries pinned (ui.timeline.live_pin_picker, the finished strip's pin
    too) drawn at full strength and the other rows dimmed. Its tiles are kept per content and pin
    (ui.charts.timeline.strip_pngs), so a redraw between logged rows encodes none."""
    pick, _ = st.columns([2, 3])
    pin = live_pin_picker(strip["positions"], pick, strip["period"])
    for label, (tiles, captions) in timeline_charts.strip_pngs(strip, pin).items():
        st.markdown(f"**{label}**")
        st.image(tiles, caption=captions)
    st.caption(
        f"**What am I looking at?** The film strip of this run so far: every head's attention on the first "
        f"{strip['positions']} positions of one evaluation sequence (period {strip['period']}) was recorded at "
        "each logged step, and up to six of those steps are shown, spread across the drop once it has happened (over "
        "the run so far until then). Top: the block-1 head with the highest previous-token score now; bottom "
        "(two or more blocks): the last-block head with the highest induction score now. Rows are queries, "
        "columns keys, colour the attention weight from 0 (dark purple) to 1 (yellow); white is the future, "
        "which no query sees. Pin query positions above to follow them through every frame (the other rows fade; "
        "the pinned row is marked in red across its future). When the run ends, the film strip is measured again "
        "from the checkpoint's snapshots, with every weight in its tooltip, and keeps the pin.")


def _measured(value, unit: str = "") -> str:
    """A logged metric for a sentence: three decimals, or "not measured" (never "nan")."""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return f"{value:.3f}{unit}"
    return "not measured"


def result_panel(run: LiveRun) -> bool:
    """The ended run's outcome, checkpoint and questions; True if it asked the training questions (the shipped
    runs' panel then leaves them out: each question once on the page)."""
    own = task_pages.own(run.settings.kind, "train_result")
    if own is not None:
        own(run)
        return False
    if run.status == RunStatus.FAILED:
        st.error(run.error)
        if run.checkpoint is None:
            return False
    if run.status == RunStatus.DIVERGED:
        st.error(f"Training diverged at step {run.step}: the loss became infinite or NaN. Lower the learning "
                 "rate and train again; this model was not added to the picker.")
        return False
    if run.status == RunStatus.CANCELLED:
        st.warning("Stopped before the first step finished: there is no model to keep.")
        return False
    if run.checkpoint is None:
        return False
    info, data = run.info, run.checkpoint  # the model itself is read when a page first needs it
    m = live.final_metrics(info["history"])
    ended = "Kept" if run.status == RunStatus.FAILED else run.status.capitalize()
    st.success(f"{ended} at step {run.step}: "
               f"later-copy loss {_measured(m.get('loss_later_copies'), ' nats')}, "
               f"later-copy accuracy {_measured(m.get('acc_later_copies'))}. The model is now picked in "
               "the sidebar, so every other page analyses it.")
    st.download_button("Download this checkpoint (.pt)", data, file_name=f"tinycharlm-trained-step{run.step}.pt",
                       mime="application/octet-stream", key="tr_download")
    python_panel(snippets.training_run(run.settings, run.step),
                 shows={"final": [m.get("loss_later_copies"), m.get("acc_later_copies")]})
    vocab = info["config"].vocab_size
    for q in (quiz_training.first_copy_during_drop(info["history"], vocab),
              quiz_training.prev_head_timing(info["history"], vocab)):
        if not ask_recorded(q, run.id):  # graded against the prediction made before Train, else asked now
            ask(q, panel="run")
    entry = session_models().get(run.registered_key) or TrainedModel("live", "this run", data, info)
    snapshots = len(info.get("snapshots") or [])
    if snapshots and st.session_state.get("tr_timeline_of") != run.id:
        # measured on request: every snapshot's forward pass on the evaluation batch held the page for
        # seconds right after Stop (bench/train_page_time.py)
        st.subheader("Watch the circuit form: this run")
        st.markdown("**Replay this run from the weights it kept: when each head took its job, against the loss.**")
        st.button(f"Measure the model at each of its {snapshots} snapshots", key="tr_timeline",
                  on_click=st.session_state.__setitem__, args=("tr_timeline_of", run.id),
                  help="The loss curve, the film strip and the in-context-learning score of this run, read from "
                       "the weights it kept along the way.")
    else:
        timeline_panel(entry, "this run", no_snapshots="its training process ended before the run did, and a "
                       "worker sends the snapshots only with the finished model" if run.status == RunStatus.FAILED
                       else NO_SNAPSHOTS)
    return True


def before_training(run: LiveRun | None) -> dict[str, bool] | None:
    """Predict before you train: the training questions, asked before the run that answers them exists
    (ui.quiz.ask_before), or the predictions of the run in progress. {question key: answered or skipped}; None
    while a run trains."""
    if run is not None and run.active:
        show_recorded(run.id)
        return None
    if run is None:  # the shipped runs' curves below wait for the answers
        return {key: ask_before(key, prompt, options) for key, prompt, options in quiz_training.BEFORE_TRAINING}
    # an ended run's results are on the page: the shipped runs' curves show already
    return {key: ask_before(key, prompt, options, "Predict before your next run.", hides=None)
            for key, prompt, options in quiz_training.BEFORE_TRAINING}



chosen = st.session_state.get("tr_task", st.session_state.get("tr_saved", {}).get("tr_task", "repeat"))
st.markdown(task_pages.own(chosen, "train_intro") or
    f"**Train a model here and watch for the moment it learns to look tokens up: {link('the drop')}.**\n\n"
    "Each training sequence repeats a freshly drawn random pattern, so the first copy is pure noise and every "
    "later token can be found earlier in the context. A model can only beat chance on the repeats by "
    "*looking things up*. Choose a depth and a range of pattern lengths, press **Train**, and watch for the "
    "moment the later-copy loss falls and the heads take on their jobs.")
if problem := pool_problem():
    st.warning(problem)
off = capacity() == 0
if off:
    st.info("Training is switched off on this server (ATTENTION_LAB_MAX_TRAININGS=0). The shipped runs below "
            "still show how training goes.")
settings = settings_widgets()
bad = settings.problem()
if bad:
    st.error(f"These settings cannot be trained: {bad}")
for warning in settings.warnings():
    st.warning(warning)
run = st.session_state.get("train_run")
if run is not None and not run.active and register(run):
    st.rerun()  # it ended while another page was open: the sidebar picker was drawn before its model existed
if run is not None and not run.active and run.settings.kind != settings.kind:
    reset()  # the other task's ended run leaves the page (its model stays in the sidebar picker)
    run = None
active = run is not None and run.active
predicting = task_pages.own(settings.kind, "train_result") is None and not off  # the repeat task's questions
predicted = before_training(run) if predicting else None
buttons = layout.button_row()  # each button as wide as its label (equal columns cut them to "T…" at 800 px)
buttons.button("Train", type="primary", on_click=start, disabled=bool(bad) or active or off, key="tr_train",
          help="Start a new run with the settings above.")
buttons.button("Stop", on_click=stop, disabled=not active or run.stopping, key="tr_stop",
          help="End the run at its last finished step and keep that model.")
buttons.button("Reset", on_click=reset, disabled=run is None, key="tr_reset",
          help="Clear this page (a kept model stays in the sidebar picker; a running one is discarded).")
if active:
    st.caption("Training runs in its own process on the server and goes on while you visit other pages; "
               "press Stop to keep the model as it is now.")
if run is not None and run.shared:
    note, own = st.columns([5, 1])
    note.info(shared_note(run))
    own.button("Train my own copy", on_click=start_own_copy, key="tr_own_copy",
               help="Train these settings in a training process of your own anyway (the same model, computed again).")
asked = result_panel(run) if run is not None and not run.active else False
st.fragment(run_every=RUN_EVERY if active else None)(live_run_panel)(active)
own_panels = task_pages.own(settings.kind, "train_panels")
if own_panels is not None:
    own_panels(settings, bad, active)
else:
    if not active:
        shipped_panel(questions=not asked, predicted=predicted if predicting and not asked else None)
    transition_panel()
    seeds_section(settings, bad, off)
