"""What people type and see: typed text <-> tokens, and the labels of tokens and heads.

Token i is the i-th character of ALPHABET (a=0 ... z=25, A=26 ... Z=51, 0=52 ... 9=61, space=62,
'.'=63), the mapping every page uses, so the 64 tokens of the default vocabulary each have one
visible symbol and typing is case-sensitive. A model with a smaller vocabulary uses the first V
symbols; tokens beyond 64 (larger vocabularies) are shown as ⟨id⟩ and cannot be typed.

Heads: every table core returns has 0-based `layer` and `head` (TransformerLens's numbering) and a
`label` column made here; the student sees blocks and heads counted from 1 ("2.3" is layer 1, head 2).
Every head and block label on screen is made (head_label, block_label, long_head_label) or read back
(parse_head_label) in this module and nowhere else. It imports no torch (core.training.live uses it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    import torch

ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ."
SPACE_LABEL = "␣"
MAX_TEXT_LEN = 128  # the longest text a student may type on any page (a readable 128 x 128 pattern)


class InputProblem(ValueError):
    """Typed input the model cannot take; the message is one plain sentence for the student."""


def token_char(i: int) -> str:
    """The symbol shown for token i (the space as ␣; a token beyond the alphabet as ⟨i⟩)."""
    if not 0 <= i < len(ALPHABET):
        return f"⟨{i}⟩"
    return SPACE_LABEL if ALPHABET[i] == " " else ALPHABET[i]


def alphabet(vocab_size: int) -> str:
    """The characters a model of this vocabulary reads (token t = character t)."""
    return ALPHABET[:min(vocab_size, len(ALPHABET))]


def encode_text(text: str, vocab_size: int, max_len: int = MAX_TEXT_LEN, min_len: int = 1) -> list[int]:
    """Typed text -> token ids, one per character exactly as typed (the space is a symbol too).

    Every page encodes typed text here, so the same input gets the same message everywhere: an
    InputProblem when the text is shorter than min_len, longer than max_len (at most MAX_TEXT_LEN),
    or holds characters this model has no token for (named, in the order typed).
    """
    text = text if isinstance(text, str) else ""
    chars = alphabet(vocab_size)
    if len(text) < max(min_len, 1):
        need = "one symbol" if min_len <= 1 else f"{min_len} symbols"
        raise InputProblem(f"Type at least {need} from {describe_alphabet(vocab_size)}"
                           + (": a single token has nothing to attend to or predict." if min_len > 1 else "."))
    max_len = min(max_len, MAX_TEXT_LEN)
    if len(text) > max_len:
        raise InputProblem(f"That is {len(text)} symbols; the limit here is {max_len}. Shorten the text.")
    unknown = sorted({c for c in text if c not in chars}, key=text.index)
    if unknown:
        shown = ", ".join(repr(c) for c in unknown[:8]) + (" …" if len(unknown) > 8 else "")
        raise InputProblem(f"This model has no token for {shown}. Use only {describe_alphabet(vocab_size)} "
                           "(case matters).")
    return [chars.index(c) for c in text]


def describe_alphabet(vocab_size: int) -> str:
    """A short human description of the typeable characters."""
    chars = alphabet(vocab_size)
    if chars == ALPHABET:
        return "a–z, A–Z, 0–9, space and '.'"
    return "".join(chars).replace(" ", SPACE_LABEL)


def token_labels(tokens: torch.Tensor) -> list[str]:
    """Display label of each token [T] (token_char: the space as ␣, beyond the alphabet ⟨id⟩)."""
    return [token_char(t) for t in tokens.tolist()]


def vocab_labels(vocab_size: int) -> list[str]:
    """Display label of every token id 0..V-1."""
    return [token_char(t) for t in range(vocab_size)]


def decode(tokens: torch.Tensor) -> str:
    """Tokens [T] -> text (space shown as a space)."""
    return "".join(label if label != SPACE_LABEL else " " for label in token_labels(tokens))


ALL_HEADS = "all"  # the head of a row about a block's heads together (core.reading.copying's block sums)


def head_label(layer: int, head, all_mark: str = "all") -> str:
    """'2.3' is layer 1 (block 2), head 2: both counted from 1, as the UI shows them. A block's heads
    together (head ALL_HEADS, None or negative) are '2.all', or '2.' + all_mark."""
    if head is None or head == ALL_HEADS or int(head) < 0:
        return f"{int(layer) + 1}.{all_mark}"
    return f"{int(layer) + 1}.{int(head) + 1}"


def parse_head_label(label: str) -> tuple[int, int]:
    """'2.3' -> (layer 1, head 2)."""
    block, head = label.split(".")
    return int(block) - 1, int(head) - 1


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """Every head's label, block by block."""
    return [head_label(l, h) for l in range(n_layers) for h in range(n_heads)]


def block_label(layer: int) -> str:
    """'block 2' is layer 1."""
    return f"block {int(layer) + 1}"


def long_head_label(layer: int, head: int) -> str:
    """'block 2 · head 3' is layer 1, head 2 (where a sentence names the block in words)."""
    return f"{block_label(layer)} · head {int(head) + 1}"


def block_number(layer):
    """Block number counted from 1 of a layer (an int, or a pandas Series of them): a chart's axis value."""
    return layer + 1


def head_number(head):
    """Head number counted from 1 within its block (an int or a Series), for a chart's axis."""
    return head + 1


def with_labels(df: pd.DataFrame) -> pd.DataFrame:
    """df (0-based layer, head columns) with the `label` column first, as every core table has it."""
    out = df.drop(columns=[c for c in ("label",) if c in df.columns])
    out.insert(0, "label", [head_label(l, h) for l, h in zip(out["layer"], out["head"])])
    return out
