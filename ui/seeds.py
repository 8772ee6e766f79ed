"""The Train page's "several seeds" section: the page's settings trained with 3-5 seeds, one after
another in the background (core.series.seeds through the server's pool of worker processes), and the
spread of their drop steps next to the shipped transition study."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.pool.status import RunStatus
from core.series.seeds import MAX_SEEDS, MIN_SEEDS, SeedSeries
from core.training import transition
from core.training.run_config import RunConfig
from ui.charts.kept import draw
from ui.charts.seeds import drop_steps_chart
from ui.training import follow_series, run_pool, session_owner

KEY = "tr_series"
COLUMNS = {"seed": "seed", "status": "status", "steps": "steps", "drop_step": "drop step",
           "drop_start": "last step ≥ 3 nats", "drop_end": "first step < 1 nat",
           "final_loss_later": "final later-copy loss"}


def _start(settings: RunConfig) -> None:
    old = st.session_state.get(KEY)
    if old is not None:
        old.cancel()
    try:
        st.session_state[KEY] = SeedSeries(run_pool(), settings, int(st.session_state["tr_n_seeds"]),
                                           f"{session_owner()}|seeds").start()
    except ValueError as e:
        st.session_state["tr_series_error"] = str(e)


def _cancel() -> None:
    if (series := st.session_state.get(KEY)) is not None:
        series.cancel()


def _same_as_study(settings: RunConfig) -> bool:
    """The settings are the study's (the default preset) apart from the seed."""
    return settings.with_settings(seed=RunConfig.of().train.seed) == RunConfig.of()


def _progress(series: SeedSeries) -> None:
    run = series.current
    if series.active and run is not None:
        st.progress(min(series.done / len(series.seeds) + run.step / max(run.total_steps, 1) / len(series.seeds), 1.0),
                    text=f"Seed {series.seeds[series.done]} ({series.done + 1} of {len(series.seeds)}): "
                         + ("waiting for your own run above to end (one training slot per session)"
                            if run.status == RunStatus.WAITING and run.blocked
                            else f"waiting for a free training slot (place {run.position})"
                            if run.status == RunStatus.WAITING else f"step {run.step} of {run.total_steps}"))
    elif series.cancelled.is_set():
        st.warning(f"Cancelled after {series.done} of {len(series.seeds)} seeds.")


def _results(series: SeedSeries) -> None:
    results = list(series.results)  # once: the series' thread appends to it while this draws
    if not results:
        return
    frame = pd.DataFrame(results)[list(COLUMNS)].rename(columns=COLUMNS)
    st.dataframe(frame, hide_index=True, width="stretch")
    for r in results:
        if r["error"]:
            st.error(f"Seed {r['seed']}: {r['error']}")
    mine = [{"source": "your seeds", "seed": r["seed"], "drop_step": r["drop_step"]}
            for r in results if r["drop_step"] is not None]
    study = transition.shipped_study()
    theirs = []
    if study and "runs" in study:
        runs = study["runs"]
        runs = runs[(runs["blocks"] == 2) & runs["drop_step"].notna()]
        theirs = [{"source": "shipped study", "seed": int(r.seed), "drop_step": int(r.drop_step)}
                  for r in runs.itertuples()]
    steps = [r["drop_step"] for r in mine]
    if steps:
        spread = f"Your {len(steps)} seeds that dropped did so between step {min(steps)} and step {max(steps)}"
        st.markdown(spread + (f" (a spread of {max(steps) - min(steps)} steps)." if len(steps) > 1 else "."))
    if len(steps) < series.done:
        st.markdown(f"{series.done - len(steps)} of {series.done} seeds never fell below ln V / 2 in their steps.")
    if mine or theirs:
        x_max = max([series.settings.train.steps] + [d["drop_step"] for d in theirs])
        chart, note = st.columns([3, 2])
        draw(chart, drop_steps_chart(pd.DataFrame(mine + theirs), x_max), width="stretch")
        same = _same_as_study(series.settings)
        note.markdown(
            "**What am I looking at?** One dot per seed at its drop step: the first logged step where the "
            "later-copy loss on the fixed evaluation batch is below ln V / 2. Top row: your seeds (their "
            "history is logged every 25 steps, so a drop step is a multiple of 25 or the last step). Bottom "
            f"row: the {len(theirs)} two-block runs of the shipped transition study (measured every 10 steps). "
            + ("Your settings are the study's, so the two rows measure the same thing." if same else
               "Your settings differ from the study's (the default 2-block preset), so the rows are not "
               "the same experiment: compare the spreads, not the positions."))


def seeds_section(settings: RunConfig, bad: str | None, off: bool) -> None:
    """The whole section; redraws itself every second while the series runs."""
    st.subheader("Several seeds: how much does the drop step move?")
    st.markdown("**One run's drop step is one draw: train several seeds to see how far it moves.**")
    st.markdown(
        "One run shows one drop. Train the settings above with several seeds, one after another in the "
        "background, and see how far apart their drops land. The runs use the server's training slots like "
        "any other run (you may wait for a free one; a session trains one run at a time) and go on while you "
        "visit other pages; their models are not kept, only their curves.")
    series = st.session_state.get(KEY)
    running = series is not None and series.active
    own = st.session_state.get("train_run")
    training = own is not None and own.active  # a session holds one training slot: the seeds wait for it
    a, b, c = st.columns([2, 1, 1])
    a.slider("Seeds", MIN_SEEDS, MAX_SEEDS, 3, key="tr_n_seeds",
             help=f"Seeds {settings.train.seed}, {settings.train.seed + 1}, … (the Seed setting above is the first).")
    b.button("Train the seeds", on_click=_start, args=(settings,), disabled=bool(bad) or off or running or training,
             key="tr_seeds_start",
             help="Your run above is training: a session trains one run at a time." if training else None)
    c.button("Cancel", on_click=_cancel, disabled=not running, key="tr_seeds_cancel")
    if error := st.session_state.pop("tr_series_error", None):
        st.error(error)
    st.fragment(run_every=1.0 if running else None)(_live)()


def _draw(series: SeedSeries) -> None:
    _progress(series)
    _results(series)


def _live() -> None:
    follow_series(KEY, "tr_series_drawn_active", _draw)
