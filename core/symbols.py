"""What people type and see: typed text <-> tokens, and the labels of tokens and heads.

Token i is the i-th character of ALPHABET (a=0 ... z=25, A=26 ... Z=51, 0=52 ... 9=61, space=62,
'.'=63), the mapping every page uses, so the 64 tokens of the default vocabulary each have one
visible symbol and typing is case-sensitive. A model with a smaller vocabulary uses the first V
symbols; tokens beyond 64 (larger vocabularies) are shown as ⟨id⟩ and cannot be typed.
"""
from __future__ import annotations

import torch


ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."


MAX_TEXT_LEN = 128


SPACE_LABEL = "␣"


class InputProblem(ValueError):
    """Typed input the model cannot take; the message is one plain sentence for the student."""


def token_char(i: int) -> str:
    """The symbol shown for token i (the space as ␣)."""
    if not 0 <= i < len(ALPHABET):
        return f"⟨{i}⟩"
    return SPACE_LABEL if ALPHABET[i] == " " else ALPHABET[i]


def typable(vocab_size: int) -> str:
    """The symbols a student can type for a model with this vocabulary."""
    return ALPHABET[:min(vocab_size, len(ALPHABET))]


def parse_symbols(text: str, vocab_size: int, max_len: int | None = None, what: str = "The input") -> list[int]:
    """Typed text -> token ids, one per character exactly as typed (the space is a symbol too); any
    character that is not one of the model's symbols is refused with an InputProblem saying which."""
    text = text or ""
    allowed = typable(vocab_size)
    if not text:
        raise InputProblem(f"{what} is empty: type at least one of the symbols {allowed[:10]}…{allowed[-2:]}.")
    unknown = sorted({c for c in text if c not in allowed})
    if unknown:
        shown = ", ".join(repr(c) for c in unknown[:8]) + (" …" if len(unknown) > 8 else "")
        raise InputProblem(f"{what} holds symbols this model has no token for ({shown}); "
                           f"use only the {len(allowed)} symbols {allowed[:3]}…{allowed[-3:]!r} (case matters).")
    if max_len is not None and len(text) > max_len:
        raise InputProblem(f"{what} has {len(text)} symbols, more than this model's length of {max_len}: "
                           f"shorten it to {max_len} or fewer.")
    return [allowed.index(c) for c in text]


def alphabet(vocab_size: int) -> str:
    """The characters a model of this vocabulary reads (token t = character t)."""
    return ALPHABET[:vocab_size]


def encode_text(text: str, vocab_size: int, max_len: int = MAX_TEXT_LEN) -> torch.Tensor:
    """Typed text -> tokens [T] (long). Raises ValueError with a message a student can act on."""
    chars = alphabet(vocab_size)
    if not text:
        raise ValueError("Type at least two characters to see attention.")
    if len(text) < 2:
        raise ValueError("Type at least two characters: a single token has nothing to attend to but itself.")
    if len(text) > max_len:
        raise ValueError(f"That is {len(text)} characters; the limit here is {max_len}. Shorten the text.")
    unknown = sorted({c for c in text if c not in chars}, key=text.index)
    if unknown:
        shown = ", ".join(repr(c) for c in unknown[:8])
        raise ValueError(f"This model has no token for {shown}. Use only: {describe_alphabet(vocab_size)}.")
    return torch.tensor([chars.index(c) for c in text], dtype=torch.long)


def describe_alphabet(vocab_size: int) -> str:
    """A short human description of the typeable characters."""
    chars = alphabet(vocab_size)
    if chars == ALPHABET:
        return "a–z, A–Z, 0–9, space and '.'"
    return "".join(chars).replace(" ", SPACE_LABEL)


def token_labels(tokens: torch.Tensor, vocab_size: int) -> list[str]:
    """Display label of each token [T]: its character (space shown as ␣), or #id beyond the alphabet."""
    chars = alphabet(vocab_size)
    out = []
    for t in tokens.tolist():
        c = chars[t] if t < len(chars) else f"#{t}"
        out.append(SPACE_LABEL if c == " " else c)
    return out


def vocab_labels(vocab_size: int) -> list[str]:
    """Display label of every token id 0..V-1."""
    return token_labels(torch.arange(vocab_size), vocab_size)


def decode(tokens: torch.Tensor, vocab_size: int) -> str:
    """Tokens [T] -> text (space shown as a space)."""
    return "".join(l if l != SPACE_LABEL else " " for l in token_labels(tokens, vocab_size))


def head_label(layer: int, head: int) -> str:
    """'2.3' is block 2, head 3 (both counted from 1, as the UI does)."""
    return f"{layer + 1}.{head + 1}"


def parse_head_label(label: str) -> tuple[int, int]:
    """'2.3' -> (layer 1, head 2)."""
    block, head = label.split(".")
    return int(block) - 1, int(head) - 1


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """Every head's label, block by block."""
    return [head_label(l, h) for l in range(n_layers) for h in range(n_heads)]
