"""ui/charts: the Altair converter reuse (ui/charts/__init__.py) builds exactly the charts Altair
builds on its own."""
from __future__ import annotations

import json
import math

import pandas as pd
from altair.utils import schemapi

from core.model.checkpoints import read_checkpoint
from core.training import live
from ui.charts import causal as causal_charts
from ui.charts import train as charts

from helpers import shipped


def _charts():
    _, info = read_checkpoint(shipped("variable-period-2block.pt"))
    hist = info["history"]
    loss = live.loss_frame(hist, "this run")
    heads = live.head_score_frame(hist)
    effects = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "patch_effect": [0.1, -0.3, 0.5, 0.9]})
    return [charts.loss_chart(loss, math.log(64), 225, 800, marks=[0, 100, 200]),
            charts.head_score_chart(heads, 225, 800),
            causal_charts.head_effects.uncached(effects, "title")]  # uncached: built twice


def test_reused_converters_build_the_same_specs_as_altair():
    assert getattr(schemapi.SchemaBase, "_lab_reuses_converters", False), "the reuse is not installed"
    fast = [json.dumps(c.to_dict(), sort_keys=True) for c in _charts()]
    patched = schemapi.SchemaBase.__dict__["from_dict"]
    schemapi.SchemaBase.from_dict = schemapi.SchemaBase.__dict__["_lab_original_from_dict"]  # unbound
    try:
        slow = [json.dumps(c.to_dict(), sort_keys=True) for c in _charts()]
    finally:
        schemapi.SchemaBase.from_dict = patched
    assert fast == slow
