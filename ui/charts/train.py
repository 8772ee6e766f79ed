"""Training charts: loss and accuracy curves, head scores over training, shipped runs, transition study.

Inputs are the tidy frames of core.training.live (loss_frame, accuracy_frame, head_score_frame).
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from . import OKABE_ITO, numbered
from .kept import kept, swapped

PART_COLOUR = {"first copy": OKABE_ITO[0], "second copy": OKABE_ITO[2], "later copies": OKABE_ITO[4]}


def _part_colours(parts: list[str]) -> alt.Scale:
    return alt.Scale(domain=parts, range=[PART_COLOUR[p] for p in parts])


SERIES = [c for c in OKABE_ITO if c != "#F0E442"]  # Okabe-Ito without its yellow, too faint on white
# heads: the four most distinct Okabe-Ito hues first; vermillion (OKABE_ITO[5]) stays for the drop line
HEAD_COLOURS = alt.Scale(range=[OKABE_ITO[i] for i in (0, 4, 2, 6, 1, 7)])


def _step(x_max: int | None = None) -> alt.X:
    """Training step axis; fixed at [0, x_max] when given so a live chart does not rescale as it grows."""
    return alt.X("step:Q", title="training step",
                 scale=alt.Scale(domain=[0, x_max], nice=False) if x_max else alt.Undefined)


def _dash(runs: list[str]) -> alt.StrokeDash:
    """The first run solid, the references dashed."""
    dashes = [[1, 0], [6, 4], [2, 3], [8, 3, 2, 3]]
    return alt.StrokeDash("run:N", title="run", sort=runs,
                          scale=alt.Scale(domain=runs, range=[dashes[i % len(dashes)] for i in range(len(runs))]))


def _chance_frame(value: float, label: str) -> pd.DataFrame:
    return pd.DataFrame({"y": [value], "label": [label]})


def _chance_rule(df: pd.DataFrame) -> alt.LayerChart:
    """A dashed grey rule at y with its label (a _chance_frame)."""
    rule = alt.Chart(df).mark_rule(color="gray", strokeDash=[2, 2]).encode(y="y:Q")
    text = alt.Chart(df).mark_text(align="left", dx=4, dy=-6, color="gray").encode(
        y="y:Q", x=alt.value(0), text="label:N")
    return rule + text


def _drop_frame(step: int | None) -> pd.DataFrame | None:
    return None if step is None else pd.DataFrame({"step": [step]})


def _drop_rule(df: pd.DataFrame | None) -> list[alt.Chart]:
    if df is None:
        return []
    return [alt.Chart(df).mark_rule(color=OKABE_ITO[5], strokeWidth=1.5).encode(
        x="step:Q", tooltip=[alt.Tooltip("step:Q", title="loss drops at step")])]


def _marks_frame(steps: list[int] | None) -> pd.DataFrame | None:
    if not steps:
        return None
    return pd.DataFrame({"step": steps, "frame": [str(i + 1) for i in range(len(steps))]})


def _frame_marks(df: pd.DataFrame | None) -> list[alt.Chart]:
    if df is None:
        return []
    rule = alt.Chart(df).mark_rule(color="#444444", strokeDash=[3, 3]).encode(
        x="step:Q", tooltip=[alt.Tooltip("frame:N", title="film strip frame"), "step:Q"])
    text = alt.Chart(df).mark_text(color="#444444", dy=-6, fontWeight="bold").encode(
        x="step:Q", y=alt.value(0), text="frame:N")
    return [rule, text]


LOSS_TOP = 1.25  # the loss axis ends at LOSS_TOP * ln V


def _loss_y(chance: float) -> alt.Y:
    """Loss axis from 0 to LOSS_TOP ln V. Higher values (the untrained model's first log: its enlarged
    embedding makes it bet on the current token repeating) are drawn at the top edge."""
    return alt.Y("loss:Q", title="cross-entropy (nats)",
                 scale=alt.Scale(domain=[0, round(LOSS_TOP * chance, 2)], clamp=True))


def _runs(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["run"])) if len(df) else ["run"]


# A live run's charts come in two steps: their frames (what changes with each logged row) and the chart
# drawn from them, so that ui.charts.kept.swapped can send a new row's chart as a kept spec with its
# datasets replaced (loss_spec, accuracy_spec, head_score_spec), the very spec the chart would convert to.

def _loss_frames(df: pd.DataFrame, chance: float, drop: int | None, marks: list[int] | None) -> dict:
    return {"lines": df, "chance": _chance_frame(chance, "uniform guess (ln V)"), "drop": _drop_frame(drop),
            "marks": _marks_frame(marks)}


def _loss_of(frames: dict, chance: float, x_max: int | None, runs: list[str]) -> alt.LayerChart:
    lines = alt.Chart(frames["lines"]).mark_line(strokeWidth=2).encode(
        x=_step(x_max),
        y=_loss_y(chance),
        color=alt.Color("part:N", title="targets", scale=_part_colours(["first copy", "later copies"])),
        strokeDash=_dash(runs),
        detail="run:N",
        tooltip=["run:N", "part:N", "step:Q", alt.Tooltip("loss:Q", format=".3f")],
    )
    return alt.layer(lines, _chance_rule(frames["chance"]), *_drop_rule(frames.get("drop")),
                     *_frame_marks(frames.get("marks"))).properties(height=260)


def loss_chart(df: pd.DataFrame, chance: float, drop: int | None = None, x_max: int | None = None,
               marks: list[int] | None = None) -> alt.LayerChart:
    """First- vs later-copy loss (nats) against step; one dash style per run; ln V marked; the film
    strip's steps `marks` numbered."""
    return _loss_of(_loss_frames(df, chance, drop, marks), chance, x_max, _runs(df))


def loss_spec(df: pd.DataFrame, chance: float, drop: int | None = None, x_max: int | None = None,
              marks: list[int] | None = None) -> dict:
    """sent_form(loss_chart(...)) of the same arguments, from a kept template (ui.charts.kept.swapped)."""
    return swapped(_loss_of, _loss_frames(df, chance, drop, marks), chance, x_max, _runs(df))


def _accuracy_frames(df: pd.DataFrame, chance: float, drop: int | None) -> dict:
    return {"lines": df, "chance": _chance_frame(chance, "chance (1/V)"), "drop": _drop_frame(drop)}


def _accuracy_of(frames: dict, x_max: int | None, runs: list[str]) -> alt.LayerChart:
    lines = alt.Chart(frames["lines"]).mark_line(strokeWidth=2).encode(
        x=_step(x_max),
        y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("part:N", title="targets", scale=_part_colours(["second copy", "later copies"])),
        strokeDash=_dash(runs),
        detail="run:N",
        tooltip=["run:N", "part:N", "step:Q", alt.Tooltip("accuracy:Q", format=".3f")],
    )
    return alt.layer(lines, _chance_rule(frames["chance"]),
                     *_drop_rule(frames.get("drop"))).properties(height=200)


def accuracy_chart(df: pd.DataFrame, chance: float, drop: int | None = None,
                   x_max: int | None = None) -> alt.LayerChart:
    """Argmax accuracy on the second and later copies against step; 1/V marked."""
    return _accuracy_of(_accuracy_frames(df, chance, drop), x_max, _runs(df))


def accuracy_spec(df: pd.DataFrame, chance: float, drop: int | None = None, x_max: int | None = None) -> dict:
    """sent_form(accuracy_chart(...)) of the same arguments, from a kept template."""
    return swapped(_accuracy_of, _accuracy_frames(df, chance, drop), x_max, _runs(df))


def _head_frames(df: pd.DataFrame, drop: int | None) -> dict:
    return {"heads": numbered(df).assign(drop=drop if drop is not None else float("nan"))}


def _head_score_of(frames: dict, dropped: bool, x_max: int | None) -> alt.FacetChart:
    df = frames["heads"]
    base = alt.Chart(df)
    lines = base.mark_line(strokeWidth=2).encode(
        x=_step(x_max),
        y=alt.Y("value:Q", title="attention share", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("head:N", title="head", scale=HEAD_COLOURS),
        tooltip=["block:O", "head:N", "score:N", "step:Q", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=220, height=140)
    layers = [lines]
    if dropped:
        layers.append(base.mark_rule(color=OKABE_ITO[5], strokeWidth=1.5).encode(x="mean(drop):Q"))
    return alt.layer(*layers, data=df).facet(
        row=alt.Row("score:N", title=None, sort=["previous-token", "induction"]),
        column=alt.Column("block:O", title="block"),
    )


def head_score_chart(df: pd.DataFrame, drop: int | None = None, x_max: int | None = None) -> alt.FacetChart:
    """Every head's previous-token and induction score against step: rows = score, columns = block."""
    return _head_score_of(_head_frames(df, drop), drop is not None, x_max)


def head_score_spec(df: pd.DataFrame, drop: int | None = None, x_max: int | None = None) -> dict:
    """sent_form(head_score_chart(...)) of the same arguments, from a kept template."""
    return swapped(_head_score_of, _head_frames(df, drop), drop is not None, x_max)


@kept
def shipped_runs_chart(df: pd.DataFrame, chance: float) -> alt.LayerChart:
    """Later-copy (solid) and first-copy (dashed) loss of every shipped run; colour = run."""
    runs = list(dict.fromkeys(df["run"])) if len(df) else []
    lines = alt.Chart(df).mark_line(strokeWidth=2).encode(
        x=_step(),
        y=_loss_y(chance),
        color=alt.Color("run:N", title="shipped run", scale=alt.Scale(domain=runs, range=SERIES[:len(runs)] or SERIES)),
        strokeDash=alt.StrokeDash("part:N", title="targets", sort=["later copies", "first copy"],
                                  scale=alt.Scale(domain=["later copies", "first copy"], range=[[1, 0], [5, 4]])),
        detail="part:N",
        tooltip=["run:N", "part:N", "step:Q", alt.Tooltip("loss:Q", format=".3f")],
    )
    return alt.layer(lines, _chance_rule(_chance_frame(chance, "uniform guess (ln V)"))).properties(height=300)


@kept
def transition_runs_chart(runs: pd.DataFrame, high: float, low: float) -> alt.Chart:
    """One bar per seed that dropped, from drop_start to drop_end (the steps the later-copy loss took
    to fall from `high` to below `low` nats), a tick at drop_step; rows sorted by drop_start."""
    df = runs[runs["dropped"]].copy()
    df["run"] = df.apply(lambda r: f"{int(r['blocks'])} blk · seed {int(r['seed'])}", axis=1)
    order = list(df.sort_values(["blocks", "drop_start"])["run"])
    blocks = sorted(df["blocks"].unique().tolist())
    y = alt.Y("run:N", sort=order, title="run (blocks · seed)", axis=alt.Axis(labelOverlap=False))
    colour = alt.Color("blocks:O", title="blocks", scale=alt.Scale(domain=blocks, range=SERIES[:len(blocks)] or SERIES))
    tip = ["blocks:O", "seed:Q", "drop_start:Q", "drop_end:Q", "drop_step:Q", "width:Q"]
    unit = "nat" if low == 1 else "nats"
    bars = alt.Chart(df).mark_bar(height=8).encode(
        x=alt.X("drop_start:Q", title=f"training step (bar: loss falls from {high:g} to below {low:g} {unit})"),
        x2="drop_end:Q", y=y, color=colour, tooltip=tip)
    ticks = alt.Chart(df).mark_tick(color="black", thickness=2, size=14).encode(x="drop_step:Q", y=y, tooltip=tip)
    return (bars + ticks).properties(height=max(120, 24 * len(df)))


STRATEGY_COLOURS = [OKABE_ITO[i] for i in (7, 0, 4, 2)]  # uniform grey-ish, unigram, bigram, the chain's n-gram


def strategy_kl_chart(kl: pd.DataFrame, stages: pd.DataFrame, strategies: tuple[str, ...],
                      x_max: int | None = None) -> alt.LayerChart:
    """KL of the model to each strategy (core.training.markov.kl_frame) against step, log scale, with a rule at
    each stage's measured onset (core.training.markov.stage_frame) in the strategy's colour."""
    colours = alt.Scale(domain=list(strategies), range=STRATEGY_COLOURS[: len(strategies)])
    lines = alt.Chart(kl).mark_line(strokeWidth=2).encode(
        x=_step(x_max),
        y=alt.Y("kl:Q", title="KL(strategy ‖ model), nats", scale=alt.Scale(type="log")),
        color=alt.Color("strategy:N", title="strategy", scale=colours, sort=list(strategies)),
        tooltip=["strategy:N", "step:Q", alt.Tooltip("kl:Q", format=".4f")])
    layers = [lines]
    if len(stages):
        stages = stages.assign(offset=[10 + 13 * list(strategies).index(n) for n in stages["strategy"]])
        layers.append(alt.Chart(stages).mark_rule(strokeDash=[4, 3], strokeWidth=1.5).encode(
            x="step:Q", color=alt.Color("strategy:N", scale=colours, sort=list(strategies)),
            tooltip=[alt.Tooltip("label:N", title="nearest strategy")]))
        layers.append(alt.Chart(stages).mark_text(align="left", dx=3, fontWeight="bold").encode(
            x="step:Q", y=alt.Y("offset:Q", scale=None, axis=None), text="strategy:N",
            color=alt.Color("strategy:N", scale=colours, sort=list(strategies))))
    return alt.layer(*layers).properties(height=280)
