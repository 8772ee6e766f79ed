"""The lab's terms, one sentence or two each, in one place: the Glossary page lists them and every page
links a term to its entry with `link(term)` (an unknown term is a KeyError, so a typo fails the tests).

    st.markdown(f"Heads in block 2 read block 1's output through {link('K-composition')}.")
"""
from __future__ import annotations

import re

GLOSSARY: dict[str, str] = {
    "attention pattern": "For one head, the weights each query position puts on every earlier key position "
                         "(each row sums to 1). Written `pattern[query, key]`.",
    "head": "One attention head, written block.head with both counted from 1: head 1.2 is the second head of "
            "the first block.",
    "residual stream": "The running sum every block reads from and adds its output to: the token's embedding "
                       "plus every head's output so far. The unembedding reads the final sum.",
    "previous-token head": "A head whose query at position t attends to position t − 1, so it writes 'the token "
                           "before me was x' into the residual stream.",
    "induction head": "A head that attends to the token that followed an earlier occurrence of the current "
                      "token and copies it: after '… A B … A' it predicts B. It needs a previous-token head in "
                      "an earlier block (Olsson et al., 2022).",
    "QK circuit": "The part of a head that decides where it looks: W_Q and W_K together, W_QK = W_Q W_Kᵀ, score "
                  "one query against one key.",
    "OV circuit": "The part of a head that decides what it writes once it looks: W_OV = W_V W_O maps the "
                  "attended position's residual vector to what the head adds.",
    "copying score": "How much a head's OV circuit raises the logit of the very token it attends to: the "
                     "diagonal of W_E W_OV W_Eᵀ, read as a share of tokens or as the eigenvalues' sign.",
    "K-composition": "A later head's keys read what an earlier head wrote. An induction head K-composes with a "
                     "previous-token head: its keys carry 'the token before me', which its query matches.",
    "Q-composition": "A later head's queries read what an earlier head wrote.",
    "V-composition": "A later head's values read what an earlier head wrote, so what it moves was itself "
                     "moved before.",
    "rotary embedding": "Positions enter by rotating each query and key by an angle that grows with the "
                        "position (RoPE, Su et al., 2021), so a score depends on positions only through "
                        "their offset.",
    "first-copy loss": "The loss on targets in a sequence's first copy of its pattern: nothing earlier predicts "
                       "them, so no model beats chance there.",
    "later-copy loss": "The loss on targets after the first copy, which an earlier copy predicts: an induction "
                       "head brings it down.",
    "the drop": "The short stretch of training in which the later-copy loss falls sharply as the induction "
                "circuit forms (the 'phase change' of Olsson et al., 2022).",
    "ablation": "Switching a component off to see what it did: set its output to zero (zero ablation), to its "
                "mean over many sequences (mean ablation), or to its value on another sequence (resample "
                "ablation).",
    "activation patching": "Run the model on a corrupted input, copy one component's activation over from the "
                           "clean run, and measure how much of the clean answer comes back.",
    "path patching": "Activation patching restricted to one path, e.g. head 1.4's output only as it enters head "
                     "2.1's keys, to tell which route between two heads carries the effect (Wang et al., 2022).",
    "AtP*": "Attribution patching: a first-order (gradient) estimate of every activation patch at once, with "
            "Kramár et al.'s (2024) corrections for attention saturation; cheap, then checked against real patches.",
    "logit lens": "Read the residual stream after each block with the unembedding, as if the model ended there, "
                  "to see when the right answer appears (nostalgebraist, 2020).",
    "direct path": "The part of the logits that goes from the embedding straight to the unembedding without "
                   "passing through any head: W_E W_U, a bigram table.",
    "path expansion": "Writing the model's logits as a sum of terms, one per route through the heads (direct, "
                      "through one head, through two heads in turn), so each route's share can be measured "
                      "(Elhage et al., 2021).",
    "in-context learning score": "How much lower the loss is late in a context than early: the benefit of "
                                 "having read more of the sequence (Olsson et al., 2022).",
    "Markov-chain task": "Sequences drawn from a random Markov chain, a fresh transition table per sequence: "
                         "to predict well the model must estimate the table from the context itself "
                         "(Edelman et al., 2024).",
    "unigram strategy": "Predict each state with the frequency it has had so far in the context, ignoring the "
                        "current state.",
    "bigram strategy": "Predict from the counts of what followed the current state earlier in the context: the "
                       "in-context estimate of the transition table, which needs an induction-like circuit.",
    "KL divergence": "How far one predicted distribution is from another, in nats: 0 when they agree.",
    "nats": "The unit of a loss measured with the natural logarithm; chance on V tokens costs ln V nats.",
    "smeared keys": "Each key mixes its own position with the one before, by a learned weight, so a single "
                    "block can build an induction head (Olsson et al., 2022).",
    "bootstrap interval": "The range a number would take over resampled copies of the runs (drawn with "
                          "replacement): how much it owes to which runs happened to be drawn.",
    "censored": "A run that never dropped within its steps: its drop step is only known to be later than the "
                "cap, not measured.",
    "Spearman correlation": "How well two quantities rank in the same order, from −1 to +1, whatever the shape "
                            "of the relation.",
    "archetype": "A kind of head found in GPT-2 small, defined by a test anyone can run on a head: previous-token, "
                 "duplicate-token, induction, name mover and so on (Wang et al., 2022).",
}


def slug(term: str) -> str:
    """The entry's anchor on the Glossary page: "K-composition" -> "k-composition", "AtP*" -> "atp"."""
    return re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


def link(term: str, text: str | None = None) -> str:
    """Markdown for `text` (default: the term) linked to the term's entry; KeyError for an unknown term."""
    GLOSSARY[term]
    return f"[{text or term}](/glossary#{slug(term)})"
