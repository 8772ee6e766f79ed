"""The lab's terms, one sentence or two each, in one place: the Glossary page lists them and every page
links a term to its entry with `link(term)` (an unknown term is a KeyError, so a typo fails the tests).

    st.markdown(f"Heads in block 2 read block 1's output through {link('K-composition')}.")

How a link opens: Streamlit gives every markdown link that does not start with '#' target="_blank", so a
glossary link opens the Glossary page in a new tab, a session of its own; the student's tab, with the models
trained in it, stays as it was (a link in the same tab would start a new session and lose them). The address
carries the term as ?term=<slug> (a #anchor is not enough: the shell rewrites the address with the view's
settings and Streamlit does not scroll to it), and the Glossary page opens with that entry on top. For reading a
definition without leaving the page, the shell lists every term the page linked, with its definition, in the
sidebar panel "Terms on this page" (terms_panel); the navigation's Glossary entry switches page in the same
session.
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
                  "one query against one key. Read from the weights it is the score at offset 0: the rotary "
                  "embedding turns it with the distance between query and key.",
    "OV circuit": "The part of a head that decides what it writes once it looks: W_OV = W_V W_O maps the "
                  "attended position's residual vector to what the head adds.",
    "copying score": "How much a head's OV circuit raises the logit of the very token it attends to, read from "
                     "C = W_E W_OV W_Eᵀ: the share of tokens whose own logit C raises most (diagonal on top), or "
                     "the eigenvalue score, +1 for a pure copier and −1 for a head that pushes the token down.",
    "K-composition": "A later head's keys read what an earlier head wrote. An induction head K-composes with a "
                     "previous-token head: its keys carry 'the token before me', which its query matches. The "
                     "weight-based score ‖W_OV W_QKᵀ‖ / (‖W_OV‖ ‖W_QK‖) (Elhage et al., 2021) leaves the rotary "
                     "rotation out; the RoPE-aware score puts it back at the offsets the reader attends to.",
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
    "AtP*": "Attribution patching: a first-order (gradient) estimate of every activation patch at once from one "
            "forward and one backward pass, with Kramár et al.'s (2024) two fixes: attention recomputed exactly "
            "where the softmax saturates, and GradDrop where effects cancel. Cheap, then checked against real "
            "patches.",
    "logit lens": "Read the residual stream after each block with the unembedding, as if the model ended there, "
                  "to see when the right answer appears (nostalgebraist, 2020).",
    "direct path": "The part of the logits that goes from the embedding straight to the unembedding without "
                   "passing through any head: W_E W_Eᵀ here (TinyCharLM's unembedding is its embedding "
                   "transposed), a table of which token follows which.",
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
    "period": "The length L of the random pattern a task sequence repeats: the token at position t is the token "
              "at t − L.",
    "first copy": "The first L tokens of a sequence: the pattern's first appearance, which nothing earlier predicts.",
    "duplicate-token head": "A head that attends to the earlier occurrence of the current token itself, A[i, i − L], "
                            "rather than to the token after it.",
    "attention sink": "A position, usually the first, where heads park attention they have no use for (Xiao et "
                      "al., 2023).",
    "value-weighted attention": "Each attention weight times the size of what that key position writes, ‖v_j W_O‖, "
                                "renormalised per row: attention to a position that writes little fades.",
    "centered logit": "A logit minus the mean of all V logits: adding the same amount to every logit changes no "
                      "probability, so only the centered part matters.",
    "effective embedding": "What a later block's heads receive for a token: W_E plus what the earlier heads write "
                           "when they look at the token's own position.",
    "detector": "A 0/1 template of where one archetype would look; a head's score is the share of its attention "
                "on the template's 1s.",
    "archetype": "A kind of head found in GPT-2 small, defined by a test anyone can run on a head: previous-token, "
                 "duplicate-token, induction, name mover and so on (Wang et al., 2022).",
}


def slug(term: str) -> str:
    """The entry's anchor on the Glossary page and its ?term= value: "K-composition" -> "k-composition", "AtP*" ->
    "atp"."""
    return re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


RUN_KEY = "glossary_terms"  # st.session_state: the terms this run's page linked, in order


def link(term: str, text: str | None = None) -> str:
    """Markdown for `text` (default: the term) linked to the term's entry (opened in a new tab: see the module's
    note), and the term noted for this run's "Terms on this page" panel; KeyError for an unknown term."""
    GLOSSARY[term]
    _note(term)
    return f"[{text or term}](glossary?term={slug(term)})"


def _note(term: str) -> None:
    """Add `term` to this run's list (nothing outside a script run: a test may call link() from plain Python)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if get_script_run_ctx() is None:
        return
    import streamlit as st

    terms = st.session_state.setdefault(RUN_KEY, [])
    if term not in terms:
        terms.append(term)


def begin_run() -> None:
    """Forget the terms of the previous run (the shell calls it before the page runs)."""
    import streamlit as st

    st.session_state[RUN_KEY] = []


def terms_panel() -> None:
    """The sidebar panel with every term the page linked and its definition (the shell calls it after the page
    ran)."""
    import streamlit as st

    terms = st.session_state.get(RUN_KEY) or []
    if not terms:
        return
    with st.sidebar.expander(f"📖 Terms on this page ({len(terms)})"):
        st.markdown("\n\n".join(f"**{t}**: {GLOSSARY[t]}" for t in terms))
        st.caption("Every term: 📖 Glossary in the navigation above (it keeps this session).")
