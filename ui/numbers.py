"""Numbers for people: the one way the lab's tables print a measured float.

`human(x)` gives `digits` significant digits in plain notation (0.0123, 0.500, 12.3, 4567) and switches to
scientific notation only where plain would need a row of zeros (below 0.001 or from a million:
2.00e-8). `table(df)` is a table's Styler with every float column printed so; a page passes it to
st.dataframe, and the frame's values (what a download or a test reads) stay as they are.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

SMALL, LARGE = 1e-3, 1e6  # plain notation in between


def human(x, digits: int = 3) -> str:
    """x with `digits` significant digits; "–" for a missing value, integers as they are."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (bool, int, np.integer, str)) or not hasattr(x, "__float__"):
        return str(x)
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if abs(x) < SMALL or abs(x) >= LARGE:
        mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def table(df: pd.DataFrame, digits: int = 3):
    """df as a Styler whose float columns read as `human` prints them (other columns untouched)."""
    floats = [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]
    return df.style.format(lambda v: human(v, digits), subset=floats)
