"""ui.numbers: tables print floats with significant digits, in scientific notation only where plain would
need a row of zeros; the frame's values stay as they are. And the sidebar picker's entries are short,
with a trained model's number, seed and step (ui.state.picker_label)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ui.numbers import human, table
from ui.state import PICKER_CHARS, LabModel, picker_label


def test_human_gives_significant_digits_and_scientific_only_at_the_extremes():
    assert human(2e-8) == "2.00e-8"
    assert human(-0.00000002345) == "-2.35e-8"
    assert human(0.0123456) == "0.0123"
    assert human(0.5) == "0.500"
    assert human(12.345) == "12.3"
    assert human(4567.8) == "4568"
    assert human(3.2e7) == "3.20e7"
    assert human(0.0) == "0"
    assert human(np.float32(0.25)) == "0.250"
    assert human(float("nan")) == "–" and human(None) == "–"
    assert human(math.inf) == "∞"
    assert human(7) == "7" and human(True) == "True" and human("abc") == "abc"
    assert human(0.0123456, digits=2) == "0.012"


def test_table_formats_float_columns_only_and_keeps_the_values():
    df = pd.DataFrame({"head": ["1.1", "1.2"], "n": [3, 40], "effect": [2e-8, 0.51234]})
    styler = table(df)
    html = styler.to_html()
    assert "2.00e-8" in html and "0.512" in html and ">40<" in html
    assert "0.00000002" not in html and "0.51234" not in html
    assert styler.data["effect"].tolist() == [2e-8, 0.51234]


def _entry(key, label, source, train=None, step=None):
    return LabModel(key, label, None, {"train": train} if train is not None else {}, source, step=step)


def test_picker_entries_are_short_and_name_a_trained_models_seed_and_step():
    shipped = _entry("s", "variable-period-2block (shipped)", "shipped")
    first = _entry("a", "trained #1: 2 blocks, periods 4–16, length 96, seed 3", "trained",
                   {"seed": 3, "steps_done": 640})
    second = _entry("b", "trained #2: 1 block, periods 4–16, length 96, seed 0", "trained",
                    {"seed": 0, "steps_done": 800})
    upload = _entry("u", "a-checkpoint-with-a-very-long-file-name-indeed.pt (uploaded)", "uploaded")
    short = _entry("v", "good.pt (uploaded)", "uploaded")
    models = {m.key: m for m in (shipped, first, second, upload, short)}
    labels = {k: picker_label(m, models) for k, m in models.items()}
    assert labels == {"s": "variable-period-2block", "a": "trained #1, seed 3, step 640",
                      "b": "trained #2, seed 0, step 800", "u": labels["u"], "v": "good.pt (uploaded)"}
    assert labels["u"].startswith("a-checkpo") and "…" in labels["u"] and labels["u"].endswith("ed.pt (uploaded)")
    assert all(len(label) <= PICKER_CHARS for label in labels.values())
