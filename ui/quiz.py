"""Predict, then reveal: one bordered box per question (core/quiz/questions.py computes the answer).

The student picks an answer (nothing is picked at first); the box then says right or wrong and
shows the measured reason. A question without a clear answer for the picked model says why instead.
"""
from __future__ import annotations

import hashlib

import streamlit as st

from core.quiz.questions import Question, is_right


def widget_key(q: Question, panel: str = "") -> str:
    """quiz_<id>_<digest of prompt and options>: a new question (other heads, another model) starts unanswered.
    `panel` tells apart one question asked in two panels of a page (the same history can be both a student's
    run and a shipped one)."""
    digest = hashlib.sha1(repr((q.prompt, q.options)).encode()).hexdigest()[:8]
    return f"quiz_{q.key}_{panel + '_' if panel else ''}{digest}"


def ask(q: Question, panel: str = "") -> None:
    """Draw question `q` (`panel`: see widget_key)."""
    box = st.container(border=True)
    box.markdown(f"**🤔 Predict first.** {q.prompt}")
    if q.answer is None:
        box.info(q.why)
        return
    short = all(len(o) <= 12 for o in q.options)  # head labels, "more"/"less": one wrapping row
    given = box.radio("Your answer", q.options, index=None, key=widget_key(q, panel), horizontal=short,
                      label_visibility="collapsed")
    if given is None:
        box.caption("Pick an answer: the check and the reason appear here, and the panel below shows it.")
    elif is_right(q, given):
        box.success(f"Right. {q.why}")
    else:
        box.error(f"Not quite: the answer is **{q.answer}**. {q.why}")
