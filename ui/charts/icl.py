"""Charts for "In-context learning in miniature": per-position predictions, the restart curve and
the in-context check. Every builder returns an Altair chart."""
from __future__ import annotations

import altair as alt
import pandas as pd

from core.model.symbols import token_char

from . import OKABE_ITO
from .kept import kept

RIGHT, WRONG = OKABE_ITO[2], OKABE_ITO[5]  # bluish green, vermillion
OUTCOME = alt.Scale(domain=["right", "wrong"], range=[RIGHT, WRONG])


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["true"] = df["target"].map(token_char)
    df["pred"] = df["predicted"].map(token_char)
    df["outcome"] = df["correct"].map({True: "right", False: "wrong"})
    return df


PLOT_WIDTH = 840


@kept
def prediction_strip(rows: list[dict], boundaries: list[int] = (), boundary_title: str = "copy starts") -> alt.Chart:
    """Two charts stacked: a token strip (the true next token over the model's top prediction,
    green where right, vermillion where wrong) and the probability of the top prediction per position.
    `boundaries` are positions where a copy (or a fresh pattern) begins, drawn as dashed rules."""
    df = _frame(rows)
    # fixed sizes on a discrete axis get squeezed by Streamlit; steps do not. At most 840 px of cells, so the
    # chart (with its axis and the legend below) fits the main column at 1400 px (940 px) instead of scrolling
    step = max(4, min(10, PLOT_WIDTH // max(len(df), 1)))
    width = alt.Step(step)
    x = alt.X("position:O", title="position of the predicted token", axis=alt.Axis(labelAngle=0, labelOverlap=True))
    strip_rows = pd.concat([df.assign(row="next token", sym=df["true"]), df.assign(row="predicted", sym=df["pred"])])
    tip = ["position:O", alt.Tooltip("true:N", title="next token"), alt.Tooltip("pred:N", title="predicted"),
           alt.Tooltip("p_predicted:Q", format=".3f", title="p(predicted)"),
           alt.Tooltip("p_target:Q", format=".3f", title="p(next token)")]
    base = alt.Chart(strip_rows).encode(x=x, y=alt.Y("row:N", title=None, sort=["next token", "predicted"]))
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("outcome:N", title="prediction", scale=OUTCOME, legend=alt.Legend(orient="top")),
        opacity=alt.value(0.85), tooltip=tip)
    if step >= 8:  # a symbol fits its cell; narrower cells tell it in the tooltip
        cells += base.mark_text(fontSize=9, color="white", fontWeight="bold").encode(text="sym:N")
    strip = cells.properties(width=width, height=alt.Step(22), title="")
    bars = alt.Chart(df).mark_bar().encode(
        x=x, y=alt.Y("p_predicted:Q", title="p(top prediction)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("outcome:N", scale=OUTCOME, legend=None), tooltip=tip,
    ).properties(width=width, height=120)
    layers = [bars]
    if boundaries:
        b = pd.DataFrame({"position": list(boundaries), "what": boundary_title})
        layers.append(alt.Chart(b).mark_rule(strokeDash=[4, 3], color="#333").encode(
            x="position:O", tooltip=alt.Tooltip("what:N", title="")))
    return alt.vconcat(strip, alt.layer(*layers)).resolve_scale(x="shared")


@kept
def restart_curve_chart(curve: dict, relative: bool, chance: float) -> alt.Chart:
    """Accuracy against tokens since the pattern began (relative=False) or since its second copy
    began (relative=True), for segments that began at a restart and at the sequence start."""
    key = "k_rel" if relative else "k"
    pre = "acc_rel_" if relative else "acc_"
    npre = "n_rel_" if relative else "n_"
    rows = []
    for tag, name in (("restart", "pattern began at a restart"), ("start", "pattern began at position 0")):
        for k, a, n in zip(curve[key], curve[pre + tag], curve[npre + tag]):
            if n >= 20:  # too few targets give a noisy point
                rows.append({"k": k, "accuracy": a, "targets": n, "series": name})
    df = pd.DataFrame(rows)
    x_title = (["tokens since the new pattern's second copy began", "(0 = its first token, 1 = the first one a "
                "context-reader can know)"]  # two lines: one is wider than the chart in an 800 px window
               if relative else ["tokens since the pattern began", "(0 = the restart itself)"])
    lines = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X("k:Q", title=x_title),
        y=alt.Y("accuracy:Q", title="next-token accuracy", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None, scale=alt.Scale(range=[OKABE_ITO[5], OKABE_ITO[4]]),
                        legend=alt.Legend(orient="bottom", direction="vertical")),
        strokeDash=alt.StrokeDash("series:N", legend=None),
        tooltip=[alt.Tooltip("k:Q", title="tokens"), alt.Tooltip("accuracy:Q", format=".3f"), "targets:Q", "series:N"])
    chance_rule = alt.Chart(pd.DataFrame({"y": [chance], "what": ["chance (1/V)"]})).mark_rule(
        strokeDash=[2, 2], color="#666").encode(y="y:Q", tooltip="what:N")
    layers = [lines, chance_rule]
    if relative:
        layers.append(alt.Chart(pd.DataFrame({"k": [0]})).mark_rule(color="#333").encode(x="k:Q"))
    return alt.layer(*layers).properties(height=260)


@kept
def check_chart(check: dict, names: dict[str, str]) -> alt.Chart:
    """Second-copy accuracy (± 2 standard errors) of each set in `names` ({key in check: label})."""
    rows = [{"set": label, "accuracy": v["acc_second"], "lo": v["acc_second"] - 2 * v["acc_second_se"],
             "hi": v["acc_second"] + 2 * v["acc_second_se"], "targets": v["n_second"]}
            for k, label in names.items() if (v := check.get(k)) is not None]
    df = pd.DataFrame(rows)
    y = alt.Y("set:N", sort=[r["set"] for r in rows], title=None, axis=alt.Axis(labelLimit=260))
    bars = alt.Chart(df).mark_bar(color=OKABE_ITO[4]).encode(
        y=y, x=alt.X("accuracy:Q", title="second-copy accuracy", scale=alt.Scale(domain=[0, 1])),
        tooltip=["set:N", alt.Tooltip("accuracy:Q", format=".3f"), "targets:Q"])
    err = alt.Chart(df).mark_errorbar(color="#222").encode(
        y=y, x=alt.X("lo:Q", title="second-copy accuracy"), x2="hi:Q")
    chance = alt.Chart(pd.DataFrame({"x": [check["chance"]], "what": ["chance (1/V)"]})).mark_rule(
        strokeDash=[2, 2], color="#666").encode(x="x:Q", tooltip="what:N")
    return (bars + err + chance).properties(width=460, height=alt.Step(30))
