"""The Train page's several-seeds chart: the drop step of each of the student's seeds next to the
shipped transition study's 2-block runs.

Input: a frame with columns source ("your seeds" | "shipped study"), seed, drop_step (step, int).
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from . import OKABE_ITO

SOURCES = ["your seeds", "shipped study"]


def drop_steps_chart(df: pd.DataFrame, x_max: int) -> alt.Chart:
    """One row of dots per source along the training-step axis; each dot is one seed's drop step."""
    return alt.Chart(df).mark_circle(size=90, opacity=0.8).encode(
        x=alt.X("drop_step:Q", title="drop step (later-copy loss first below ln V / 2)",
                scale=alt.Scale(domain=[0, x_max], nice=False)),
        y=alt.Y("source:N", title=None, sort=SOURCES),
        color=alt.Color("source:N", legend=None, scale=alt.Scale(domain=SOURCES, range=[OKABE_ITO[5], OKABE_ITO[4]])),
        tooltip=["source:N", "seed:Q", "drop_step:Q"],
    ).properties(height=110)
