"""Snippets of the Head archetypes & IOI page (how a piece is written: ui/snippets/fill.py). The
generated patterns need no model."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _sentence(TEXT, SHARPNESS, REST):
    from core.archetypes import catalogue as arc
    tokens = arc.tokenize(TEXT)
    settings = arc.ArchetypeSettings(SHARPNESS, REST)  # sharpness, rest on BOS
    return tokens, settings


def _pattern(tokens, settings, NAME):
    from core.archetypes import catalogue as arc
    pattern = arc.archetype_pattern(NAME, tokens, settings)  # [query, key]
    print(arc.token_labels(tokens))
    print(pattern.numpy().round(2))
    return {"pattern": pattern}


def archetype_pattern(text, name, sharpness, rest) -> Snippet:
    return snippet(f"The generated {name} pattern on the sentence.", None, _sentence, _pattern, TEXT=text,
                   SHARPNESS=sharpness, REST=rest, NAME=name)


def _detector_table(tokens, settings, ROWS):
    from core.archetypes import catalogue as arc
    table = arc.detector_table(tokens, settings, ROWS)
    print(table.round(3).to_string(index=False))
    return {"table": table.select_dtypes("number")}


def detector_table(text, sharpness, rest, rows) -> Snippet:
    return snippet("Every archetype scored by every detector.", None, _sentence, _detector_table, TEXT=text,
                   SHARPNESS=sharpness, REST=rest, ROWS=rows)


def _model_detectors(model, CHARS, ROWS):
    import torch

    from core.archetypes import head_matches
    from core.model import symbols
    tokens = torch.tensor(symbols.encode_text(CHARS, model.cfg.vocab_size, min_len=2))
    patterns = head_matches.model_patterns(model, tokens)
    table = head_matches.head_detector_table(patterns, tokens, ROWS)
    print(table.round(3).to_string(index=False))
    print(head_matches.best_matches(table))
    return {"table": table.select_dtypes("number")}


def model_detectors(entry, chars: str, rows: str) -> Snippet:
    return snippet("The detectors run on every head of the picked model reading the character prompt.", entry,
                   _model_detectors, CHARS=chars, ROWS=rows)
