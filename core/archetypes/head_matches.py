"""TinyCharLM's heads scored by the archetype detectors on a character prompt, and which archetype
each head fits best.

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from core.archetypes.catalogue import mask_share, uniform_pattern
from core.model import symbols
from core.model.lazy import no_grad
from core.model.task import DEFAULT_PERIOD
from core.reading.detectors import DETECTORS, detector_mask

if TYPE_CHECKING:
    import torch

    from core.model.tinycharlm import TinyCharLM


def random_char_prompt(period: int = DEFAULT_PERIOD, copies: int = 3, seed: int = 0, vocab_size: int = 64) -> str:
    """A random string of `period` letters/digits (no spaces or stops), repeated `copies` times."""
    import torch

    alphabet = symbols.alphabet(vocab_size).rstrip(" .") or symbols.alphabet(vocab_size)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(alphabet), (period,), generator=g)
    return "".join(alphabet[k] for k in idx.tolist()) * copies


def char_labels(text: str) -> list[str]:
    """Unique axis labels "i c" (the space shown as ␣): characters repeat, chart axes need distinct values."""
    return [f"{i} {symbols.SPACE_LABEL if c == ' ' else c}" for i, c in enumerate(text)]


@no_grad
def model_patterns(model: TinyCharLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Each block's attention patterns on one sequence: tokens [T] -> list over blocks of [H, T, T]."""
    _, cache = model.run_with_cache(tokens[None])
    return [p[0] for p in cache["pattern"]]


def text_detector_table(model: TinyCharLM, text: str, rows: str = "target") -> tuple[pd.DataFrame, list[torch.Tensor]]:
    """Typed text -> (head_detector_table, model_patterns) on its tokens; InputProblem on bad text."""
    import torch

    tokens = torch.tensor(symbols.encode_text(text, model.cfg.vocab_size, min_len=2))
    patterns = model_patterns(model, tokens)
    return head_detector_table(patterns, tokens, rows), patterns


def head_detector_table(patterns: list[torch.Tensor], tokens: torch.Tensor, rows: str = "target") -> pd.DataFrame:
    """Long table (layer, head, detector, score) of core.reading.detectors' five masks on every head,
    plus a 'uniform' row (layer -1) giving the score of a head that spreads evenly."""
    masks = {name: detector_mask(name, tokens) for name in DETECTORS}
    out = []
    for layer, pattern in enumerate(patterns):
        for det, mask in masks.items():
            for h, s in enumerate(mask_share(pattern, mask, rows).tolist()):
                out.append({"layer": layer, "head": h, "detector": det, "score": s})
    uniform = uniform_pattern(tokens.shape[0])
    for det, mask in masks.items():
        out.append({"layer": -1, "head": -1, "detector": det, "score": float(mask_share(uniform, mask, rows))})
    return pd.DataFrame(out)


def label_heads(table: pd.DataFrame) -> pd.DataFrame:
    """The head table with a display label per row: "block 1 · head 2" (core.model.symbols.long_head_label) or
    the uniform baseline."""
    out = table.copy()
    out["head_label"] = [symbols.long_head_label(l, h) if l >= 0 else "uniform head (baseline)"
                         for l, h in zip(out["layer"], out["head"])]
    return out


MATCH_SCORE = 0.3  # a head "fits" its best archetype with a score at least this


MATCH_RATIO = 3.0  # ... and at least this many times what a uniform head scores on that detector


def best_matches(table: pd.DataFrame) -> pd.DataFrame:
    """Per head: the detector with the highest score, that score, what a uniform head scores there,
    and whether it is a clear match (score >= MATCH_SCORE and >= MATCH_RATIO x uniform)."""
    uniform = table[table["layer"] < 0].set_index("detector")["score"]
    heads = table[table["layer"] >= 0].dropna(subset=["score"])
    rows = []
    for (layer, head), group in heads.groupby(["layer", "head"]):
        best = group.loc[group["score"].idxmax()]
        base = float(uniform.get(best["detector"], float("nan")))
        score = float(best["score"])
        rows.append({"layer": int(layer), "head": int(head), "best": best["detector"], "score": score,
                     "uniform": base, "matches": bool(score >= MATCH_SCORE and score >= MATCH_RATIO * base)})
    return pd.DataFrame(rows)


def strongest_head(best: pd.DataFrame) -> tuple[int, int]:
    """(layer, head) of the clearest match in a best_matches table: matches first, then the highest score."""
    row = best.sort_values(["matches", "score"], ascending=False).iloc[0]
    return int(row["layer"]), int(row["head"])
