"""What the Causal experiments page may say in words, decided from the numbers it just measured
(core.causal.views.Experiments). An interpretive sentence is shown only when the runs differ enough
for ratios to mean something and the effect it reads is clearly beyond its noise, by the rules of
core.causal.clarity, which the page's questions (core.quiz.causal) use too. Otherwise each function
returns None and the page says that this model gives no clear answer. Heads are written as
core.model.symbols labels them ("1.4").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from core.causal import clarity
from core.causal.clarity import MIN_GAP, NEEDED  # noqa: F401  (the page reads them here)

if TYPE_CHECKING:
    from core.causal.views import Experiments

LOOKS_BACK = 0.5  # a block-1 head "looks d positions back" with at least this much attention at offset d

OFFSET_WORDS = {0: "on its own position", 1: "one position back", 2: "two positions back", 3: "three positions back"}


def key_paths(res: Experiments) -> pd.DataFrame:
    """Noising of each block-1 sender's key path into all of block 2 (rows of res.paths)."""
    p = res.paths
    if p is None or not len(p):
        return p
    return p[(p["path"] == "k") & (p["direction"] == "noising") & (p["receiver_head"] < 0)]


def most_needed_key_path(res: Experiments) -> pd.Series | None:
    """The sender whose key path into block 2 is most needed, when that is clear (clarity.most_needed:
    the gap is large enough, its noising interval ends below NEEDED and below every other sender's)."""
    return clarity.most_needed(key_paths(res), res.gap)


def key_composition_sentence(res: Experiments) -> str | None:
    worst = most_needed_key_path(res)
    if worst is None:
        return None
    return (f"On this model the most needed key path into all of block 2 comes from head {worst['sender']}: noising "
            f"it leaves an effect of {worst['patch_effect']:.2f} (95% interval {worst['effect_low']:.2f} to "
            f"{worst['effect_high']:.2f} over the sequences). This is K-composition shown by an intervention, next to "
            "the weight-based composition scores of *Circuits & ablations*.")


def longer_match_sentence(res: Experiments) -> str | None:
    """A block-1 head that looks two or more positions back and whose key path is clearly needed: the
    induction heads' match then uses more than the one previous token."""
    offsets, k = res.offsets, key_paths(res)
    if offsets is None or k is None or not len(k) or not clarity.clear_gap(res.gap):
        return None
    top = offsets[offsets["top"]].set_index("sender")
    parts = []
    for r in k.itertuples():
        if r.sender not in top.index:
            continue
        d, mass = int(top.loc[r.sender, "offset"]), float(top.loc[r.sender, "mass"])
        if d >= 2 and mass >= LOOKS_BACK and r.effect_high < NEEDED:
            parts.append((r.sender, d, mass, r))
    if not parts:
        return None
    said = "; ".join(f"head {s} puts {m:.2f} of its attention {OFFSET_WORDS.get(d, f'{d} positions back')}, and "
                     f"noising its key path into block 2 leaves {r.patch_effect:.2f} ({r.effect_low:.2f} to "
                     f"{r.effect_high:.2f})" for s, d, m, r in parts)
    return (f"The match uses more than the one previous token: {said}. So a key also carries the token two back, "
            "and the induction heads need it.")


def untestable_paths(res: Experiments) -> dict[str, list[str]]:
    """{path: [senders]} of the block-1 senders whose output does not differ between the two runs where
    that path reads it (core.causal.path_patching.sender_changes): those rows cannot test anything."""
    p = res.paths
    if p is None or not len(p):
        return {}
    out = {}
    for path in ("q", "k", "v"):
        sub = p[(p["path"] == path) & ~p["testable"].astype(bool)]
        if len(sub):
            out[path] = list(dict.fromkeys(sub["sender"]))
    return out


def largest_denoising(res: Experiments) -> pd.Series | None:
    """The denoised path (into all of block 2) with the largest effect, and the most negative one."""
    p = res.paths
    if p is None or not len(p):
        return None
    d = p[(p["direction"] == "denoising") & (p["receiver_head"] < 0) & p["testable"].astype(bool)]
    return d if len(d) else None
