"""The readings table (checkpoints/laws/readings.csv): the Causal page's headline readings replicated across
training seeds. bench/seed_readings.py writes the table; its docstring defines the columns and the criteria
of each *_clear/_needed/_is_ column.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from core.laws.stats import LAWS_DIR
from core.reading.bootstrap import LEVEL

READINGS_FILE = LAWS_DIR / "readings.csv"


def _spread(values: pd.Series) -> str:
    v = values.astype(float)
    return f"median {v.median():.2f}, from {v.min():.2f} to {v.max():.2f}"


def _true(values: pd.Series) -> pd.Series:
    return values.astype(str).str.lower().eq("true")


def readings_sentences(path: str | Path = READINGS_FILE) -> list[str]:
    """Per headline reading of the Causal page: on how many training seeds it holds and the spread of its
    number over the seeds, set beside one model's interval over its sequences."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no table at {path}.")
    t = pd.read_csv(path, comment="#", dtype={"key_sender": str, "best_block": str}, keep_default_na=False)
    need = {"seed", "prev_head", "prev_token", "prev_clear", "prev_noise", "prev_needed", "key_is_prev", "best_block"}
    missing = sorted(need - set(t.columns))
    if missing or t.empty:
        raise ValueError(f"{path.name} lacks {', '.join(missing) or 'rows'}: run bench/seed_readings.py.")
    n = len(t)
    seeds = ", ".join(str(s) for s in t["seed"])
    heads = t.groupby("prev_head")["seed"].apply(lambda s: ", ".join(map(str, s)))
    which = "; ".join(f"{h} on seed{'s' if ',' in s else ''} {s}" for h, s in heads.items())
    same = "the same head on every seed" if len(heads) == 1 else "a different head on different seeds"
    width = (t["prev_noise_high"] - t["prev_noise_low"]).astype(float)
    others = t[~_true(t["key_is_prev"]) & (t["key_sender"] != "")]
    unclear = int((t["key_sender"] == "").sum())
    counts = t["induction_heads"].astype(int).tolist()
    return [
        f"Training seeds {seeds}, one model each ({n} in all), the Causal page's experiments on each as the page "
        "opens them. Every share below is of the gap M(clean) − M(corrupted) the Causal page measures effects "
        "against.",
        f"**Which head is the previous-token head.** A block-1 head has a clear previous-token score (at least 0.5) "
        f"on {int(_true(t['prev_clear']).sum())} of {n} seeds; the sharpest one scores {_spread(t['prev_token'])}. "
        f"It is {same} ({which}): the label is the seed's, the role is not.",
        f"**Its noising effect.** Noising that head's output leaves {_spread(t['prev_noise'])} of M(clean) − "
        f"M(corrupted), clearly needed "
        f"(its interval ending below 0.9) on {int(_true(t['prev_needed']).sum())} of {n} seeds. One model's "
        f"{LEVEL:.0%} interval over its sequences is {width.median():.2f} wide (median); the seeds spread over "
        f"{float(t['prev_noise'].max() - t['prev_noise'].min()):.2f}.",
        f"**The key path into block 2.** The previous-token head's key path is clearly the most needed one into all "
        f"of block 2 on {int(_true(t['key_is_prev']).sum())} of {n} seeds"
        + (f", another head's on {len(others)}" if len(others) else "")
        + (f", no clear answer on {unclear}" if unclear else "")
        + f"; noising it leaves {_spread(t['prev_key'])} of the gap, within "
        f"{float((t['prev_key'] - t['prev_noise']).abs().max()):.2f} of noising the head's whole output on every seed.",
        f"**The induction heads' effects.** Block 2's best head, patched alone, clearly restores the most of M on "
        f"{int((t['best_block'] == 'block 2').sum())} of {n} seeds; it restores {_spread(t['block2_effect'])}, and "
        f"block 2's single-head patches summed (each head patched on its own, then added: not one patch of "
        f"them all together) {_spread(t['block2_sum'])}. Induction heads (induction_any at least 0.6) per seed: "
        f"{', '.join(map(str, counts))}.",
    ]
