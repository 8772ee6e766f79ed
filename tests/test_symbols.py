"""Typed text <-> tokens (core/model/symbols.py): one mapping, one encoder and one message for the same
input on every page that takes typed text."""
import re

import pandas as pd
import pytest
import torch

from core.model.symbols import (
    ALL_HEADS,
    ALPHABET,
    MAX_TEXT_LEN,
    InputProblem,
    alphabet,
    block_label,
    decode,
    encode_text,
    head_label,
    head_labels,
    long_head_label,
    parse_head_label,
    token_char,
    token_labels,
    with_labels,
)

from helpers import ROOT, open_app


def test_alphabet_maps_every_token_to_one_symbol():
    assert len(ALPHABET) == len(set(ALPHABET)) == 64 == len(alphabet(64)) == len(alphabet(100))
    assert encode_text(ALPHABET, 64) == list(range(64))
    assert [token_char(i) for i in range(64)] == list(ALPHABET.replace(" ", "␣"))  # the space shown as ␣
    assert encode_text("aZ9 .", 64) == [0, 51, 61, 62, 63]
    assert encode_text("  ", 64) == [62, 62]  # the space is a symbol, kept as typed
    assert token_char(70) == "⟨70⟩" == token_labels(torch.tensor([70]))[0]  # one way to show a token beyond it
    toks = torch.tensor(encode_text("abc abc.", 64))
    assert decode(toks) == "abc abc." and token_labels(toks)[3] == "␣"


@pytest.mark.parametrize("text, min_len, words", [
    ("", 1, "at least one symbol"), ("a", 2, "at least 2 symbols"), ("ab+cd", 1, "no token for '+'"),
    ("abcé", 1, "'é'"), ("a*b?*", 1, "'*', '?'"), ("A" * (MAX_TEXT_LEN + 1), 1, f"limit here is {MAX_TEXT_LEN}"),
])
def test_bad_typed_input_is_refused_with_a_message(text, min_len, words):
    with pytest.raises(InputProblem) as e:
        encode_text(text, 64, min_len=min_len)
    assert words in str(e.value) and str(e.value).endswith(".")


def test_limits_and_small_vocabularies():
    with pytest.raises(InputProblem, match="limit here is 10"):
        encode_text("a" * 11, 64, max_len=10)
    with pytest.raises(InputProblem, match=f"limit here is {MAX_TEXT_LEN}"):
        encode_text("a" * (MAX_TEXT_LEN + 1), 64, max_len=10 * MAX_TEXT_LEN)  # never above the one limit
    assert encode_text("abcp", 16) == [0, 1, 2, 15]
    with pytest.raises(InputProblem, match="'q'.*abcdefghijklmnop"):
        encode_text("abq", 16)  # a 16-token model reads only a-p


def test_head_labels_are_one_based():
    assert head_label(1, 2) == "2.3" and parse_head_label("2.3") == (1, 2)
    assert head_labels(2, 2) == ["1.1", "1.2", "2.1", "2.2"]
    assert all(parse_head_label(s) == (i // 3, i % 3) for i, s in enumerate(head_labels(3, 3)))
    assert head_label(1, -1) == head_label(1, "all") == "2.all" and head_label(0, "all", all_mark="Σ") == "1.Σ"
    assert block_label(1) == "block 2" and long_head_label(1, 0) == "block 2 · head 1"


def test_tables_carry_zero_based_layer_and_head_and_the_label_first():
    """A core table has 0-based layer and head and the label made by core.model.symbols, first."""
    df = with_labels(pd.DataFrame({"layer": [0, 1, 1], "head": [3, 0, ALL_HEADS], "x": [0.1, 0.2, 0.3]}))
    assert list(df.columns) == ["label", "layer", "head", "x"] and list(df["label"]) == ["1.4", "2.1", "2.all"]
    assert [parse_head_label(s) for s in df["label"][:2]] == [(0, 3), (1, 0)]


# Hand-made head or block labels: "{x}.{y}" from two values, '{x + 1}.', "block {l + 1}", "head {h + 1}".
# Tests (their oracles count by hand on purpose) and exercises/ (another owner's) are left out.
HAND_MADE = re.compile(r"\{[^{}]+\}\.\{[^{}]+\}|\+ ?1\}\.|[Bb]lock \{[^}]*\+ ?1\}|head \{[^}]*\+ ?1\}")
NOT_OURS = {
    ("core/model/checkpoints.py", "blocks.{l}.{name}"), ("core/model/checkpoints.py", "{os.getpid()}"),  # not labels
    ("core/model/hooks.py", 'f"blocks.{layer}.{point}"'),  # hook names, not labels
    ("ui/safe_form.py", "{type(value).__module__}.{type(value).__qualname__}"),  # a type's name
    ("ui/charts/kept.py", "{t.__module__}.{t.__qualname__}"),  # a type's name
    ("ui/charts/kept.py", "{builder.__module__}.{builder.__qualname__}"),  # a function's name
    ("ui/charts/kept.py", "{chart_of.__module__}.{chart_of.__qualname__}"),  # a function's name
    ("core/archetypes/ioi.py", 'f"{layer}.{head}"'),  # GPT-2 small's heads, 0-based as Wang et al. (2022) write them
    ("app_pages/archetypes.py", "g.heads"),  # the same IOI heads
}


def test_no_head_label_is_made_outside_symbols():
    found = []
    files = [f for d in ("core", "ui", "app_pages", "exercises") for f in sorted((ROOT / d).rglob("*.py"))]
    for f in [ROOT / "dashboard.py", *files]:
        if f.name == "symbols.py" and f.parent.name == "model":
            continue
        lines = enumerate(f.read_text().splitlines(), 1)
        name = str(f.relative_to(ROOT))
        found += [f"{name}:{i}: {line.strip()}" for i, line in lines if HAND_MADE.search(line)
                  and not any(name == n and mark in line for n, mark in NOT_OURS)]
    assert not found, "\n".join(found)


@pytest.mark.app
def test_every_page_gives_the_same_message_for_the_same_text():
    """The attention, in-context and archetype pages encode typed text with the one encoder: an
    unknown character gets the very same sentence on each."""
    bad = "abc+def"
    with pytest.raises(InputProblem) as e:
        encode_text(bad, 64, min_len=2)
    want = str(e.value)
    fields = {"app_pages/attention.py": [("radio", "att_source", "Type your own"), ("text_input", "att_text", bad)],
              "app_pages/icl.py": [("text_input", "icl_text", bad)],
              "app_pages/archetypes.py": [("radio", "arch_char_mode", "Your own characters"),
                                      ("text_input", "arch_chars", bad)]}
    for page, steps in fields.items():
        at = open_app(page, "variable-period-2block.pt")
        for kind, key, value in steps:
            getattr(at, kind)(key=key).set_value(value).run()
        assert not at.exception
        shown = [w.value for w in at.warning]
        assert any(want in w for w in shown), (page, shown)
