"""TinyCharLM's heads scored by the archetype detectors on a character prompt, and which archetype
each head fits best.
"""
from __future__ import annotations

import pandas as pd
import torch

from .archetypes import PromptError, mask_share, uniform_pattern
from .detectors import DETECTORS, detector_mask
from .model import TinyCharLM
from .symbols import ALPHABET


# Characters -> token ids: position in this 64-character alphabet (a-z, A-Z, 0-9, space, full stop).
# A model with vocabulary V uses the first min(V, 64) characters; TinyCharLM's tokens have no meaning
# of their own (its task draws them uniformly), so any fixed one-to-one mapping is as good as another.
CHAR_ALPHABET = ALPHABET  # core.attention's: one mapping for every page


MAX_CHAR_PROMPT = 192


MIN_CHAR_PROMPT = 2


def char_alphabet(vocab_size: int) -> str:
    return CHAR_ALPHABET[:min(vocab_size, len(CHAR_ALPHABET))]


def random_char_prompt(period: int = 24, copies: int = 3, seed: int = 0, vocab_size: int = 64) -> str:
    """A random string of `period` letters/digits (no spaces or stops), repeated `copies` times."""
    alphabet = char_alphabet(vocab_size).rstrip(" .") or char_alphabet(vocab_size)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(alphabet), (period,), generator=g)
    return "".join(alphabet[k] for k in idx.tolist()) * copies


def encode_chars(text: str, vocab_size: int) -> torch.Tensor:
    """Token ids [T] of a character prompt; PromptError if empty, too long or holding unknown characters."""
    alphabet = char_alphabet(vocab_size)
    if not isinstance(text, str) or len(text) < MIN_CHAR_PROMPT:
        raise PromptError(f"The character prompt needs at least {MIN_CHAR_PROMPT} characters.")
    if len(text) > MAX_CHAR_PROMPT:
        raise PromptError(f"The character prompt has {len(text)} characters; keep it to {MAX_CHAR_PROMPT} or fewer.")
    unknown = sorted({c for c in text if c not in alphabet})
    if unknown:
        shown = " ".join(repr(c) for c in unknown[:8])
        raise PromptError(f"This model reads only the {len(alphabet)} characters a-z, A-Z, 0-9, space and '.' "
                          f"(as many as its vocabulary has); the prompt also has {shown}.")
    return torch.tensor([alphabet.index(c) for c in text], dtype=torch.long)


def char_labels(text: str) -> list[str]:
    """Axis labels "i c" with the space shown as an open box."""
    return [f"{i} {'␣' if c == ' ' else c}" for i, c in enumerate(text)]


@torch.no_grad()
def model_patterns(model: TinyCharLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Each block's attention patterns on one sequence: tokens [T] -> list over blocks of [H, T, T]."""
    _, cache = model.run_with_cache(tokens[None])
    return [p[0] for p in cache["pattern"]]


def head_detector_table(patterns: list[torch.Tensor], tokens: torch.Tensor, rows: str = "target") -> pd.DataFrame:
    """Long table (layer, head, detector, score) of core.detectors' five masks on every head,
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
    """The head table with a display label per row: "block l+1 · head h+1" (1-based) or the uniform baseline."""
    out = table.copy()
    out["head_label"] = [f"block {l + 1} · head {h + 1}" if l >= 0 else "uniform head (baseline)"
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
