"""Head archetypes known from GPT-2 small: their catalogue and detectors on text (catalogue), the
IOI circuit's head groups (ioi), and which archetype each head of a TinyCharLM fits (head_matches).

May import core.model and core.reading.
"""
