"""Six attention-head archetypes as synthetic patterns, and the detectors that recognise them.

The archetypes are the routing patterns seen again and again in trained transformers such as
GPT-2 small (Elhage et al. 2021, Olsson et al. 2022, Wang et al. 2022, Xiao et al. 2023):
previous-token, first-token (BOS) sink, induction, duplicate-token, name-mover and self. Here each
is *generated* for a word-tokenised prompt, not measured in a real model: every row i of a pattern
[T, T] is a causal softmax over keys j <= i that puts a score of `sharpness` on the keys the
archetype looks for and 0 elsewhere. Induction, duplicate-token and name-mover heads have, on many
rows, nothing to look for; real heads then park their attention on the first token, so on those
rows a share `rest_share` goes to BOS and the remainder is spread evenly over the visible keys.

Tokenisation (`tokenize`): a BOS marker, then words (runs of letters, digits and underscores,
with inner apostrophes kept: "don't") and each punctuation mark on its own. Word identity is
case-sensitive, as in a real tokeniser ("The" and "the" are different tokens).

core.archetypes.head_matches scores TinyCharLM's heads with the same detectors on a character prompt.

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from core.model.symbols import InputProblem
from core.reading.detectors import DETECTORS, detector_mask, detector_score

if TYPE_CHECKING:
    import torch

BOS = "<bos>"
MAX_PROMPT_CHARS = 300
MAX_PROMPT_WORDS = 40
_TOKEN_RE = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")

ARCHETYPES = ("previous_token", "first_token", "induction", "duplicate_token", "name_mover", "self")
ARCHETYPE_LABELS = {
    "previous_token": "previous-token",
    "first_token": "first-token (BOS) sink",
    "induction": "induction",
    "duplicate_token": "duplicate-token",
    "name_mover": "name-mover",
    "self": "self",
}
ARCHETYPE_RULES = {
    "previous_token": "every query reads the token just before it",
    "first_token": "every query reads the first token (BOS)",
    "induction": "a repeated token reads the token that followed its earlier occurrence(s)",
    "duplicate_token": "a repeated token reads its own earlier occurrence(s)",
    "name_mover": "the last position reads the names that appeared once (the candidate indirect objects)",
    "self": "every query reads itself",
}
# archetypes that have rows with nothing to do, where the rest-on-BOS share applies
RESTING = ("induction", "duplicate_token", "name_mover")
# detector for each archetype: the five of core.reading.detectors plus the name-mover detector defined here
ALL_DETECTORS = tuple(DETECTORS) + ("name_mover",)
DETECTOR_LABELS = {**ARCHETYPE_LABELS, "first_token": "first-token"}
# the detectors that apply to a character prompt (no words, so no names), in archetype order
MODEL_DETECTORS = [a for a in ARCHETYPES if a in DETECTORS]

PRESET_PROMPTS = {
    "IOI sentence": "When John and Mary went to the store, John gave a drink to",
    "Repeated phrase": "Anna gave Tom the old blue map. Anna gave Tom the old blue",
    "Letters exchanged": "Alice wrote a letter to Ben, and Ben wrote a letter to",
}

# Capitalised words that are not names: sentence openers and function words. A "name" is any other
# word that starts with a capital letter (a crude rule, stated on the page).
NOT_NAMES = frozenset("""a an the when then while after before if but and or so as at in on of to for from by
with it its he she they we you i me my his her their our this that these those there here what who
why how where which yes no not all some one two three mr mrs ms dr""".split())


@dataclass(frozen=True)
class ArchetypeSettings:
    sharpness: float = 6.0  # softmax inverse temperature: score on target keys (others score 0)
    rest_share: float = 0.8  # on rows with nothing to find, share of attention parked on BOS

    def validate(self) -> ArchetypeSettings:
        if not 0.0 <= self.sharpness <= 50.0:
            raise ValueError(f"sharpness must be between 0 and 50, got {self.sharpness}.")
        if not 0.0 <= self.rest_share <= 1.0:
            raise ValueError(f"rest_share must be between 0 and 1, got {self.rest_share}.")
        return self


# ---------------------------------------------------------------------------------------------
# Word prompts


def tokenize(text: str) -> list[str]:
    """[BOS, word or punctuation, ...]; InputProblem if the prompt is empty or too long."""
    if not isinstance(text, str) or not text.strip():
        raise InputProblem("The prompt is empty: type a sentence of a few words.")
    if len(text) > MAX_PROMPT_CHARS:
        raise InputProblem(f"The prompt has {len(text)} characters; keep it under {MAX_PROMPT_CHARS} "
                          "so the matrix stays readable.")
    words = _TOKEN_RE.findall(text)
    if not words:
        raise InputProblem("The prompt has no words or punctuation in it.")
    if len(words) > MAX_PROMPT_WORDS:
        raise InputProblem(f"The prompt splits into {len(words)} tokens; keep it to {MAX_PROMPT_WORDS} or fewer "
                          "so the matrix stays readable.")
    return [BOS] + words


def token_ids(tokens: list[str]) -> torch.Tensor:
    """Integer ids [T] for a token list: equal strings get equal ids (what the detectors compare)."""
    import torch

    vocab: dict[str, int] = {}
    return torch.tensor([vocab.setdefault(t, len(vocab)) for t in tokens], dtype=torch.long)


def token_labels(tokens: list[str]) -> list[str]:
    """Unique axis labels "i token" (tokens repeat, chart axes need distinct values)."""
    return [f"{i} {t}" for i, t in enumerate(tokens)]


def name_positions(tokens: list[str]) -> list[int]:
    """Positions of words that look like names: capitalised and not a common opener or function word."""
    return [i for i, t in enumerate(tokens)
            if i > 0 and t[:1].isupper() and t.isalpha() and t.lower() not in NOT_NAMES]


def name_mover_targets(tokens: list[str]) -> list[int]:
    """Keys the last position reads: names seen exactly once before it, else every earlier name."""
    last = len(tokens) - 1
    names = [i for i in name_positions(tokens) if i < last]
    counts = {t: sum(tokens[i] == t for i in names) for t in {tokens[i] for i in names}}
    once = [i for i in names if counts[tokens[i]] == 1]
    return once or names


def archetype_targets(name: str, tokens: list[str]) -> torch.Tensor:
    """Bool [T, T]: target[i, j] when archetype `name` at query i looks for key j (always j <= i)."""
    import torch

    T = len(tokens)
    ids = token_ids(tokens)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    same = ids[:, None] == ids[None, :]
    if name == "previous_token":
        return (j == i - 1) | ((i == 0) & (j == 0))  # BOS can only read itself
    if name == "first_token":
        return (j == 0).expand(T, T).clone()
    if name == "self":
        return (j == i).expand(T, T).clone()
    if name == "duplicate_token":
        return same & (j < i)
    if name == "induction":
        after_same = torch.zeros(T, T, dtype=torch.bool)
        after_same[:, 1:] = same[:, :-1] & (j[:, 1:] - 1 < i)  # token_{j-1} == token_i, earlier
        return after_same & (j <= i)
    if name == "name_mover":
        target = torch.zeros(T, T, dtype=torch.bool)
        target[T - 1, name_mover_targets(tokens)] = True
        return target
    raise ValueError(f"unknown archetype {name!r}; choose one of {', '.join(ARCHETYPES)}.")


def archetype_pattern(name: str, tokens: list[str], settings: ArchetypeSettings = ArchetypeSettings()) -> torch.Tensor:
    """The archetype's attention pattern [T, T] (query i, key j): causal, every row sums to 1."""
    import torch

    settings.validate()
    target = archetype_targets(name, tokens)
    T = target.shape[0]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = settings.sharpness * target.double()
    pattern = scores.masked_fill(~causal, float("-inf")).softmax(-1)
    idle = ~target.any(-1)  # rows with nothing to find
    if idle.any():
        uniform = causal.double() / causal.sum(-1, keepdim=True)
        bos = torch.zeros(T, T, dtype=torch.float64)
        bos[:, 0] = 1.0
        rest = settings.rest_share * bos + (1 - settings.rest_share) * uniform
        pattern = torch.where(idle[:, None], rest, pattern)
    return pattern.float()


def uniform_pattern(T: int) -> torch.Tensor:
    """A head that spreads evenly over what it can see: the baseline any detector should beat, [T, T]."""
    import torch

    causal = torch.ones(T, T).tril()
    return causal / causal.sum(-1, keepdim=True)


# ---------------------------------------------------------------------------------------------
# Detectors


def name_mover_mask(tokens: list[str]) -> torch.Tensor:
    """The name-mover detector's 0/1 pattern [T, T]: last row on the names seen once (else all names)."""
    return archetype_targets("name_mover", tokens)


def mask_share(pattern: torch.Tensor, mask: torch.Tensor, rows: str = "target") -> torch.Tensor:
    """core.reading.detectors.detector_score of pattern [..., T, T] on mask [T, T] -> [...], but NaN when the
    mask is empty: the detector found nothing to look for on this prompt (e.g. no name, no repeat).

    rows="target": each row's share, averaged over the rows with at least one 1 (what the head does
    when it has something to do). rows="all": TransformerLens's detect_head score.
    """
    import torch

    if not mask.any():
        return torch.full(pattern.shape[:-2], float("nan"))
    return detector_score(pattern, mask, rows)


def all_detector_scores(pattern: torch.Tensor, tokens: list[str], rows: str = "target") -> dict[str, torch.Tensor]:
    """Every detector (core.reading.detectors' five masks plus name-mover) on a word prompt:
    [..., T, T] -> {name: [...]}."""
    ids = token_ids(tokens)
    scores = {name: mask_share(pattern, detector_mask(name, ids), rows) for name in DETECTORS}
    scores["name_mover"] = mask_share(pattern, name_mover_mask(tokens), rows)
    return scores


def detector_table(tokens: list[str], settings: ArchetypeSettings = ArchetypeSettings(),
                   rows: str = "target") -> pd.DataFrame:
    """Long table (archetype, detector, score) for every archetype on every detector, plus a uniform head."""
    out = []
    patterns = {a: archetype_pattern(a, tokens, settings) for a in ARCHETYPES}
    patterns["uniform"] = uniform_pattern(len(tokens))
    for arch, pattern in patterns.items():
        for det, score in all_detector_scores(pattern, tokens, rows).items():
            out.append({"archetype": arch, "detector": det, "score": float(score)})
    return pd.DataFrame(out)


def own_detector_wins(table: pd.DataFrame) -> dict[str, bool | None]:
    """For each detector: does its own archetype score highest of the six (None if it found nothing)?"""
    out: dict[str, bool | None] = {}
    arche = table[table["archetype"].isin(ARCHETYPES)]
    for det in ALL_DETECTORS:
        col = arche[arche["detector"] == det].set_index("archetype")["score"]
        if col.isna().all():
            out[det] = None
            continue
        own = col[det]
        others = col.drop(det)
        out[det] = bool(own > others.max())
    return out


def detector_rivals(table: pd.DataFrame) -> dict[str, tuple[str, float, float]]:
    """For each detector whose own archetype does not win: (the archetype that scores highest among the
    others, own score, that archetype's score)."""
    out = {}
    arche = table[table["archetype"].isin(ARCHETYPES)]
    for det, won in own_detector_wins(table).items():
        if won is False:
            col = arche[arche["detector"] == det].set_index("archetype")["score"]
            rival = col.drop(det).idxmax()
            out[det] = (rival, float(col[det]), float(col[rival]))
    return out
