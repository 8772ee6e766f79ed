"""Predict, then see: one bordered box per question (core/quiz/questions.py computes the answer).

The student picks an answer (nothing is picked at first) or skips. The answer is graded once, against
the numbers of the moment it was given, and the box keeps that grade (a later change of a setting does
not turn a right answer wrong); the radio is then locked. `ask` returns whether what answers the
question may be shown, so a page draws it only after the student has committed:

    if ask(quiz.top_copier(table)):
        draw(st, chart)          # the chart that answers it
    # else: ask has already said what appears once they answer or skip

A question without a clear answer for the picked model says why instead, and shows at once.

Tests that read a page's charts rather than its questions set ATTENTION_LAB_PREDICT=off (tests/conftest.py):
then `ask` still draws and grades every question but returns True at once, as after a skip.
"""
from __future__ import annotations

import hashlib
import os

import streamlit as st

from core.quiz.questions import Question, is_right


def predict_first() -> bool:
    """Whether a question hides what answers it (off only where ATTENTION_LAB_PREDICT=off: the page tests)."""
    return os.environ.get("ATTENTION_LAB_PREDICT", "on").lower() != "off"


def widget_key(q: Question, panel: str = "") -> str:
    """quiz_<id>_<digest of prompt, options and picked model>: a new question (other heads, another model) starts
    unanswered. `panel` tells apart one question asked in two panels of a page (the same history can be both a
    student's run and a shipped one)."""
    scope = st.session_state.get("picked_model", "")
    digest = hashlib.sha1(repr((q.prompt, q.options, scope)).encode()).hexdigest()[:8]
    return f"quiz_{q.key}_{panel + '_' if panel else ''}{digest}"


def _grade(q: Question, given: str | None) -> dict:
    return {"given": given, "right": is_right(q, given), "answer": q.answer, "also": q.also, "why": q.why}


def _skip(key: str, q: Question) -> None:
    st.session_state[f"{key}_grade"] = _grade(q, None)


def _answered(key: str, q: Question) -> None:
    given = st.session_state.get(key)
    if given is not None and f"{key}_grade" not in st.session_state:
        st.session_state[f"{key}_grade"] = _grade(q, given)


def ask(q: Question, panel: str = "", hides: str = "the chart below") -> bool:
    """Draw question `q` (`panel`: see widget_key). True once what answers it may be shown: the student answered
    or skipped, or the question has no clear answer for this model. `hides` names what waits for the answer."""
    box = st.container(border=True)
    box.markdown(f"**🤔 Predict first.** {q.prompt}")
    if q.answer is None:
        box.info(q.why)
        return True
    key = widget_key(q, panel)
    grade = st.session_state.get(f"{key}_grade")
    short = all(len(o) <= 12 for o in q.options)  # head labels, "more"/"less": one wrapping row
    box.radio("Your answer", q.options, index=None, key=key, horizontal=short, label_visibility="collapsed",
              disabled=grade is not None, on_change=_answered, args=(key, q))
    if grade is None:
        left, right = box.columns([4, 1], vertical_alignment="center")
        left.caption(f"Pick an answer to see {hides}, with the check and the reason here.")
        right.button("Skip", key=f"{key}_skipbtn", on_click=_skip, args=(key, q),
                     help="Show the answer without guessing.")
        return not predict_first()
    _show(box, grade)
    return True


def _show(box, grade: dict) -> None:
    if grade["given"] is None:
        box.info(f"Skipped: the answer is **{grade['answer']}**. {grade['why']}")
    elif grade["right"]:
        box.success(f"Right. {grade['why']}")
    else:
        box.error(f"Not quite: the answer is **{grade['answer']}**. {grade['why']}")


# Predict before the result exists (the Train page's next run): the answer is recorded when it is picked (the radio
# locks at once, as a graded one does), tied to the run when Train is pressed (record_before), and graded once
# against that run when it has ended (ask_recorded), never against a shipped run or a moment of the live curves.
BEFORE = "quiz_before"  # st.session_state: {"round": n, "given": {question key: answer, None if skipped}}
BY_RUN = "quiz_before_runs"  # st.session_state: {run id: {"given": {...}, "grades": {question key: grade}}}


def _before() -> dict:
    return st.session_state.setdefault(BEFORE, {"round": 0, "given": {}})


def _picked_before(qkey: str, wkey: str) -> None:
    _before()["given"].setdefault(qkey, st.session_state.get(wkey))


def _skipped_before(qkey: str) -> None:
    _before()["given"].setdefault(qkey, None)


def ask_before(qkey: str, prompt: str, options: list[str], heading: str = "Predict before you train.",
               hides: str | None = "the shipped runs' curves below") -> bool:
    """Ask question `qkey` before what answers it exists: True once the student answered or skipped (or with
    ATTENTION_LAB_PREDICT=off), so the page may show what would give the answer away (`hides`; None: the page
    hides nothing for it)."""
    box = st.container(border=True)
    box.markdown(f"**🤔 {heading}** {prompt}")
    given = _before()["given"]
    done = qkey in given
    wkey = f"quiz_before_{qkey}_{_before()['round']}"
    box.radio("Your prediction", options, index=None, key=wkey, label_visibility="collapsed",
              disabled=done, on_change=_picked_before, args=(qkey, wkey))
    if not done:
        left, right = box.columns([4, 1], vertical_alignment="center")
        left.caption("Your pick is kept for your next run and graded when that run ends"
                     + (f"; it also shows {hides}." if hides else "."))
        right.button("Skip", key=f"{wkey}_skipbtn", on_click=_skipped_before, args=(qkey,),
                     help="No prediction: show the answer after the run.")
        return not predict_first()
    if given[qkey] is None:
        box.caption("Skipped: the answer comes with your next run's results.")
    else:
        box.caption(f"Kept: **{given[qkey]}**. Press **Train**: it is graded against that run when it ends.")
    return True


def record_before(run_id: str) -> None:
    """Tie the predictions made so far to the run just started (the Train button), and start a fresh round."""
    b = _before()
    if b["given"]:
        st.session_state.setdefault(BY_RUN, {})[run_id] = {"given": dict(b["given"]), "grades": {}}
    b["given"], b["round"] = {}, b["round"] + 1


def restore_before(run_id: str) -> None:
    """Give the predictions of a run discarded before it ended back to the next run (the Reset button)."""
    given = st.session_state.get(BY_RUN, {}).pop(run_id, {}).get("given", {})
    if given and not _before()["given"]:
        _before()["given"] = dict(given)


def recorded(run_id: str) -> dict[str, str | None]:
    """The predictions tied to run `run_id` ({} if none were made before it started)."""
    return st.session_state.get(BY_RUN, {}).get(run_id, {}).get("given", {})


def show_recorded(run_id: str) -> None:
    """The predictions of a run in progress, locked: graded when it ends."""
    given = recorded(run_id)
    if given:
        said = "; ".join(f"*{v}*" if v else "skipped" for v in given.values())
        st.caption(f"🤔 Your predictions for this run: {said}. They are graded when it ends.")


def ask_recorded(q: Question, run_id: str) -> bool:
    """Question `q`, built from run `run_id` after it ended, graded (once, kept with the run) against the answer
    recorded before it started; False if no prediction was recorded for it (then ask it as usual)."""
    rec = st.session_state.get(BY_RUN, {}).get(run_id)
    if rec is None or q.key not in rec["given"]:
        return False
    box = st.container(border=True)
    given = rec["given"][q.key]
    box.markdown(f"**🤔 Your prediction before training{f': *{given}*' if given else ''}.** {q.prompt}")
    if q.answer is None:
        box.info(q.why)
        return True
    _show(box, rec["grades"].setdefault(q.key, _grade(q, given)))
    return True
