"""The Laws of the drop page's chart: drop step against one setting on log-log axes (core.laws)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from . import OKABE_ITO
from .kept import kept

LINE_COLOURS = ["#000000", OKABE_ITO[5], OKABE_ITO[2]]  # the fit, then each prediction (vermillion, green)
RUN_COLOURS = [OKABE_ITO[1], OKABE_ITO[6]]  # dropped (sky blue), never dropped (purple)
NEVER = "never dropped (at the cap)"  # short enough for the legend under a chart in an 800 px window


LEGENDS_HEIGHT = 80  # px: the legend above a chart whose two legends would not fit side by side below it (a
# chart's height is the whole figure's as Streamlit fits it to its column, legends included)


@kept
def law_chart(runs: pd.DataFrame, lines: pd.DataFrame, x_title: str, height: int = 380) -> alt.LayerChart:
    """Every run's drop step (a dot; a hollow triangle at the cap for a run that never dropped), each
    point's quartiles (a bar) and median (a tick), the fit through the medians and the predicted slopes
    (core.laws.drop.chart_frames makes both frames)."""
    xs = sorted(runs["x"].unique().tolist())
    x_scale = alt.Scale(type="log", domain=[xs[0] / 1.3, xs[-1] * 1.3], nice=False)
    x = alt.X("x:Q", title=x_title, scale=x_scale, axis=alt.Axis(values=xs, format="~g"))
    ys = pd.concat([runs["y"], lines["y"]])
    y_scale = alt.Scale(type="log", nice=False, domain=[max(1.0, float(ys.min()) / 1.4), float(ys.max()) * 1.4])
    y = alt.Y("y:Q", title="drop step (log)", scale=y_scale)
    tip = [alt.Tooltip("x:Q", title=x_title.split(" (")[0]), "seed:Q", alt.Tooltip("drop_step:Q", title="drop step"),
           "dropped:N"]
    kind = alt.Color("run:N", title="run", scale=alt.Scale(domain=["dropped", NEVER],
                                                           range=RUN_COLOURS))
    runs = runs.assign(run=runs["dropped"].map({True: "dropped", False: NEVER}))
    dots = alt.Chart(runs).mark_point(filled=True, size=45, opacity=0.75).encode(
        x=x, y=y, color=kind, shape=alt.Shape("run:N", legend=None, scale=alt.Scale(
            domain=["dropped", NEVER], range=["circle", "triangle-up"])),
        tooltip=tip)
    medians = runs.drop_duplicates("x")
    spread = alt.Chart(medians).mark_rule(strokeWidth=3, opacity=0.35, color="#555555").encode(
        x=x, y=alt.Y("q25:Q", scale=y_scale), y2="q75:Q",
        tooltip=[alt.Tooltip("q25:Q", title="25%"), alt.Tooltip("median:Q", title="median"),
                 alt.Tooltip("q75:Q", title="75%")])
    ticks = alt.Chart(medians.dropna(subset=["median"])).mark_tick(color="#000000", thickness=2, size=18).encode(
        x=x, y=alt.Y("median:Q", scale=y_scale), tooltip=[alt.Tooltip("median:Q", title="median drop step")])
    layers = [spread, dots, ticks]
    if len(lines):
        names = list(dict.fromkeys(lines["line"]))
        layers.append(alt.Chart(lines).mark_line(strokeWidth=2).encode(
            x=x, y=alt.Y("y:Q", scale=y_scale),
            color=alt.Color("line:N", title="line", scale=alt.Scale(domain=names, range=LINE_COLOURS[:len(names)]),
                            legend=alt.Legend(orient="top")),  # above: beside the runs' it passes a narrow chart
            strokeDash=alt.StrokeDash("line:N", legend=None, scale=alt.Scale(
                domain=names, range=[[1, 0]] + [[6, 4]] * (len(names) - 1)))))
    return (alt.layer(*layers).resolve_scale(color="independent")
            .properties(height=height + (LEGENDS_HEIGHT if len(lines) else 0))
            .configure_legend(orient="bottom", direction="vertical", columns=1, labelLimit=320))


@kept
def clamps_chart(runs: pd.DataFrame) -> alt.LayerChart:
    """Every run's drop step by clamp (one row per arm, in the frame's order): a dot per seed (a hollow triangle
    at the cap for a run that never dropped), the arm's quartiles (a bar) and median (a tick), on a log axis
    (core.laws.clamps.clamp_frame makes the frame)."""
    arms = list(dict.fromkeys(runs["arm"]))
    y = alt.Y("arm:N", title=None, sort=arms, axis=alt.Axis(labelLimit=420))
    x_scale = alt.Scale(type="log", nice=False, domain=[max(1.0, float(runs["y"].min()) / 1.4),
                                                        float(runs["y"].max()) * 1.4])
    x = alt.X("y:Q", title="drop step (log)", scale=x_scale)
    kinds = ["dropped", NEVER]
    runs = runs.assign(run=runs["dropped"].map({True: kinds[0], False: kinds[1]}))
    dots = alt.Chart(runs).mark_point(filled=True, size=45, opacity=0.75).encode(
        x=x, y=y, color=alt.Color("run:N", title="run", scale=alt.Scale(domain=kinds, range=RUN_COLOURS)),
        shape=alt.Shape("run:N", legend=None, scale=alt.Scale(domain=kinds, range=["circle", "triangle-up"])),
        tooltip=["arm:N", "seed:Q", alt.Tooltip("drop_step:Q", title="drop step")])
    medians = runs.drop_duplicates("arm")
    spread = alt.Chart(medians).mark_rule(strokeWidth=3, opacity=0.35, color="#555555").encode(
        x=alt.X("q25:Q", scale=x_scale), x2="q75:Q", y=y,
        tooltip=[alt.Tooltip("q25:Q", title="25%"), alt.Tooltip("median:Q", title="median"),
                 alt.Tooltip("q75:Q", title="75%")])
    ticks = alt.Chart(medians.dropna(subset=["median"])).mark_tick(color="#000000", thickness=2, size=18).encode(
        x=alt.X("median:Q", scale=x_scale), y=y, tooltip=[alt.Tooltip("median:Q", title="median drop step")])
    return (alt.layer(spread, dots, ticks).properties(height=220)
            .configure_legend(orient="bottom", direction="horizontal", labelLimit=320))


STAGE_COLOURS = [OKABE_ITO[4], OKABE_ITO[2], OKABE_ITO[5]]  # onset (blue), drop (green), completion (vermillion)


@kept
def stages_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """Each point's median step of each stage against its later-copy targets per step, log-log: a dot per point,
    its quartiles as a bar, a line per series and stage (solid: T varied, dashed: B varied); the frame is
    core.laws.stages.stage_chart_frame's."""
    xs = sorted(frame["targets_per_step"].unique().tolist())
    x_scale = alt.Scale(type="log", domain=[xs[0] / 1.3, xs[-1] * 1.3], nice=False)
    x = alt.X("targets_per_step:Q", title="later-copy targets per step (log)", scale=x_scale,
              axis=alt.Axis(values=xs, format="~g", labelAngle=-30))
    ys = pd.concat([frame["q25"], frame["q75"], frame["median"]]).replace([float("inf")], float("nan")).dropna()
    y_scale = alt.Scale(type="log", nice=False, domain=[max(1.0, float(ys.min()) / 1.4), float(ys.max()) * 1.4])
    stages = list(dict.fromkeys(frame["stage_name"]))
    series = list(dict.fromkeys(frame["series"]))
    colour = alt.Color("stage_name:N", title="stage", scale=alt.Scale(domain=stages, range=STAGE_COLOURS[:len(stages)]))
    dash = alt.StrokeDash("series:N", title="series",
                          scale=alt.Scale(domain=series, range=[[1, 0], [6, 4]][:len(series)]))
    tip = ["series:N", "stage_name:N", "seq_len:Q", "batch_size:Q", alt.Tooltip("targets_per_step:Q", format=",.0f"),
           alt.Tooltip("median:Q", title="median step"), alt.Tooltip("q25:Q", title="25%"),
           alt.Tooltip("q75:Q", title="75%"), alt.Tooltip("reached:Q", title="runs that reached it"), "n:Q"]
    y = alt.Y("median:Q", title="steps (log)", scale=y_scale)
    lines = alt.Chart(frame).mark_line(strokeWidth=2).encode(x=x, y=y, color=colour, strokeDash=dash,
                                                             detail="series:N")
    dots = alt.Chart(frame).mark_point(filled=True, size=55).encode(x=x, y=y, color=colour, tooltip=tip)
    spread = alt.Chart(frame).mark_rule(strokeWidth=3, opacity=0.3).encode(
        x=x, y=alt.Y("q25:Q", scale=y_scale), y2="q75:Q", color=colour)
    return (alt.layer(spread, lines, dots).properties(height=360)
            .configure_legend(orient="bottom", direction="vertical", columns=1, labelLimit=420))


MARKOV_COLOURS = [OKABE_ITO[4], OKABE_ITO[5]]  # unigram stage (blue), bigram stage (vermillion)


@kept
def markov_chart(runs: pd.DataFrame, line: pd.DataFrame, x_title: str) -> alt.LayerChart:
    """Every run's unigram and bigram onset against the setting (a dot per seed, moved a little sideways by stage
    and seed; a hollow triangle at the cap for a run that never reached the stage), each point's quartiles (a bar)
    and median (a tick) per stage, and the bigram onset's fit through the medians (core.laws.markov.markov_frame
    and fit_line make the frames)."""
    xs = sorted(runs["x"].unique().tolist())
    pad = (xs[-1] - xs[0]) * 0.12
    x_scale = alt.Scale(domain=[xs[0] - pad, xs[-1] + pad], nice=False)
    x = alt.X("x_shown:Q", title=x_title, scale=x_scale, axis=alt.Axis(values=xs, format="~g"))
    y_scale = alt.Scale(domain=[0, float(runs["y"].max()) * 1.05], nice=False)
    y = alt.Y("y:Q", title="onset step", scale=y_scale)
    stages = list(dict.fromkeys(runs["stage"]))
    colour = alt.Color("stage:N", title="stage", scale=alt.Scale(domain=stages, range=MARKOV_COLOURS[:len(stages)]))
    kinds = ["reached", "not reached (at the cap)"]
    runs = runs.assign(run=runs["reached"].map({True: kinds[0], False: kinds[1]}))
    tip = [alt.Tooltip("x:Q", title=x_title), "seed:Q", "stage:N", alt.Tooltip("step:Q", title="onset step"), "run:N"]
    dots = alt.Chart(runs).mark_point(size=45, opacity=0.8).encode(
        x=x, y=y, color=colour, fill=colour,
        shape=alt.Shape("run:N", title="run", scale=alt.Scale(domain=kinds, range=["circle", "triangle-up"]),
                        legend=alt.Legend(orient="top")),  # above: beside the stages' it passes a narrow chart
        tooltip=tip)
    medians = runs.drop_duplicates(["x", "stage"]).assign(
        x_mid=lambda f: f["x"] * (1 + (f["stage"].map({s: i for i, s in enumerate(stages)}) - 0.5) * 0.06))
    mx = alt.X("x_mid:Q", scale=x_scale)
    spread = alt.Chart(medians).mark_rule(strokeWidth=4, opacity=0.3).encode(
        x=mx, y=alt.Y("q25:Q", scale=y_scale), y2="q75:Q", color=colour,
        tooltip=["stage:N", alt.Tooltip("q25:Q", title="25%"), alt.Tooltip("median:Q", title="median"),
                 alt.Tooltip("q75:Q", title="75%")])
    ticks = alt.Chart(medians.dropna(subset=["median"])).mark_tick(thickness=3, size=22).encode(
        x=mx, y=alt.Y("median:Q", scale=y_scale), color=colour,
        tooltip=["stage:N", alt.Tooltip("median:Q", title="median onset step")])
    layers = [spread, dots, ticks]
    if len(line):
        layers.append(alt.Chart(line).mark_line(strokeWidth=2, color="#000000", strokeDash=[6, 3]).encode(
            x=alt.X("x:Q", scale=x_scale), y=alt.Y("y:Q", scale=y_scale), tooltip=["line:N"]))
    return (alt.layer(*layers).properties(height=380 + LEGENDS_HEIGHT)
            .configure_legend(orient="bottom", direction="vertical", labelLimit=320, symbolOpacity=1))


def prior_chart(runs: pd.DataFrame) -> alt.LayerChart:
    """The bigram onset of every run, one row per training distribution (core.laws.markov.prior_frame): a dot per
    seed at the sequences seen that are not unigram-optimal (a hollow triangle at the cap for a run that never got
    there), its arm's 95% bootstrap interval of the median (a bar) and the median (a tick)."""
    arms = list(dict.fromkeys(runs["arm"]))
    y = alt.Y("arm:N", title=None, sort=arms, axis=alt.Axis(labelLimit=360))
    x_scale = alt.Scale(domain=[0, float(runs["y"].max()) * 1.05], nice=False)
    x = alt.X("y:Q", title="bigram onset: training sequences seen that are not unigram-optimal", scale=x_scale)
    kinds = ["reached", "not reached (at the cap)"]
    runs = runs.assign(run=runs["reached"].map({True: kinds[0], False: kinds[1]}))
    dots = alt.Chart(runs).mark_point(size=45, opacity=0.8, color=MARKOV_COLOURS[1], filled=True).encode(
        x=x, y=y, yOffset=alt.YOffset("seed:N"),
        shape=alt.Shape("run:N", title="run", scale=alt.Scale(domain=kinds, range=["circle", "triangle-up"])),
        tooltip=["arm:N", "seed:Q", alt.Tooltip("seqs:Q", title="sequences seen", format=",")])
    arms_frame = runs.drop_duplicates("arm")
    bars = alt.Chart(arms_frame).mark_rule(strokeWidth=6, opacity=0.3, color="#000000").encode(
        x=alt.X("low:Q", scale=x_scale), x2="high:Q", y=y,
        tooltip=["arm:N", alt.Tooltip("low:Q", title="95% interval from", format=","),
                 alt.Tooltip("high:Q", title="to", format=",")])
    ticks = alt.Chart(arms_frame.dropna(subset=["median"])).mark_tick(thickness=3, size=26, color="#000000").encode(
        x=alt.X("median:Q", scale=x_scale), y=y, tooltip=["arm:N", alt.Tooltip("median:Q", format=",")])
    return (alt.layer(bars, dots, ticks).properties(height=300)
            .configure_legend(orient="bottom", direction="vertical", symbolOpacity=1))
