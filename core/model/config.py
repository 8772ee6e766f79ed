"""TinyCharLM's shape: one config dataclass. Apart from core/model/tinycharlm.py so that what reads a
config (a checkpoint's info, a stored view, the sidebar) needs no torch, which a reading server never
imports (docs/DESIGN.md, "A reading server without torch")."""
from __future__ import annotations

from dataclasses import asdict, dataclass

MAX_LAYERS = 6


@dataclass
class ModelConfig:
    vocab_size: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    bias: bool = False
    rope_base: float = 10000.0
    # Olsson et al.'s (2022) smeared keys: each head's key at j mixes in the key at j - 1 by a trained
    # weight (AttentionBlock.smear), so one block can match on a position's previous token.
    smeared_keys: bool = False

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {self.vocab_size}.")
        if not 0 <= self.n_layers <= MAX_LAYERS:
            raise ValueError(f"n_layers must be between 0 and {MAX_LAYERS}, got {self.n_layers}.")
        if self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads}).")
        if self.d_head % 2:
            raise ValueError(f"d_head = d_model / n_heads must be even for rotary embeddings, got {self.d_head}.")
        if self.rope_base <= 1:
            raise ValueError(f"rope_base must be above 1, got {self.rope_base}.")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        """The config as a file holds it; a model without smeared keys has the entries files always had."""
        out = asdict(self)
        if not self.smeared_keys:
            del out["smeared_keys"]
        return out
