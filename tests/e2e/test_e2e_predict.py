"""Predict, then see, in Chromium: on every page before an answer nothing is cut off at 800 or 1400 px and no
graded box shows; on Home the score table that answers "how many heads..." is not on screen
before an answer; answering shows it with the grade and the reason, and the radio is locked. A glossary link
opens the Glossary page in a new tab at its term, and the student's own tab keeps its session."""
from __future__ import annotations

import contextlib
import urllib.parse

import pytest
from test_e2e_pixels import CUT_JS

from streamlit_server import PAGES, StreamlitServer

pytestmark = pytest.mark.e2e

TABLE = '[data-testid="stMain"] [data-testid="stDataFrame"]'


@pytest.fixture(scope="module")
def predict_server():
    srv = StreamlitServer(env={"ATTENTION_LAB_PREDICT": "on"}, name="server-predict")  # tests/conftest.py: off
    yield srv
    srv.stop()


def count_box(app):
    """The bordered box of Home's second question."""
    return app.page.get_by_text("How many of this model's heads").first.locator(
        "xpath=ancestor::div[@data-testid='stVerticalBlock'][1]")


def test_the_answer_is_hidden_until_an_answer_then_shown_with_its_grade(new_app, predict_server):
    app = new_app(predict_server).goto()
    app.assert_no_exception()
    box = count_box(app)
    box.wait_for()
    assert app.page.locator(TABLE).count() == 0, "the score table shows before any answer"
    assert box.get_by_text("Pick an answer to see the score of every head").count() == 1
    app.screenshot("predict-home-before")
    app.after(lambda: box.locator('[data-testid="stRadio"] label').filter(has_text="2").first.click())
    app.assert_no_exception()
    app.page.locator(TABLE).first.wait_for(state="visible")
    graded = box.locator('[data-testid="stAlert"]').inner_text()
    assert graded.startswith(("Right.", "Not quite")) and "Induction scores" in graded and "0." in graded
    assert box.locator('input[type="radio"]:not([disabled])').count() == 0, "the radio is not locked"
    app.screenshot("predict-home-after")
    for width, name in ((800, "predict-home-800"), (1400, "predict-home-1400")):
        app.page.set_viewport_size({"width": width, "height": 900})
        app.screenshot(name)


def test_a_glossary_link_opens_a_new_tab_and_keeps_the_session(new_app, predict_server):
    app = new_app(predict_server).goto()
    box = count_box(app)
    box.wait_for()
    app.after(lambda: box.get_by_role("button", name="Skip").click())
    link = app.page.locator('[data-testid="stMain"] a[href="glossary?term=residual-stream"]').first
    assert link.get_attribute("target") == "_blank"
    with app.page.context.expect_page() as opened:
        link.click()
    glossary = opened.value
    glossary.wait_for_load_state()
    glossary.locator('h3#residual-stream').wait_for(timeout=90_000)
    assert urllib.parse.urlsplit(glossary.url).path == "/glossary"  # the shell then writes the view in the address
    on_top = glossary.locator('[data-testid="stAlertContentSuccess"]')  # the asked-for entry, first on the page
    assert on_top.inner_text().startswith("residual stream:") and on_top.bounding_box()["y"] < 900
    # the student's tab: still this session, the skipped question still answered and its table shown
    assert app.page.locator(TABLE).count() >= 1 and "Skipped: the answer is" in count_box(app).inner_text()
    glossary.close()


# What a question box shows once graded (ui/quiz.py): none of it may be on a page before the student answers.
GRADED_JS = r"""
() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stAlert"]')].filter(a => a.checkVisibility())
  .map(a => a.innerText.trim()).filter(t => /^(Right\.|Not quite|Skipped: the answer)/.test(t)).map(t => t.slice(0, 80))
"""
QUESTIONS_JS = r"""
() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdownContainer"] strong')]
  .filter(s => s.checkVisibility() && s.innerText.startsWith('🤔')).length
"""


def test_before_an_answer_nothing_is_cut_off_and_no_answer_shows(new_app, predict_server):
    """Every page as a student first meets it (predict on, nothing answered; one session, through the sidebar), at
    1400 and 800 px: no text cut off in the question boxes (radio options, Skip, captions) or anywhere else
    (test_e2e_pixels' CUT_JS), no graded box, and an open question on every page that asks one (all but the
    Glossary)."""
    app = new_app(predict_server).goto()
    problems = []
    for path, title in PAGES.items():
        if path:
            app.page.set_viewport_size({"width": 1400, "height": 1000})
            app.nav(title)
        app.assert_no_exception()
        for width in (1400, 800):
            app.page.set_viewport_size({"width": width, "height": 1000})
            app.page.wait_for_timeout(500)  # the layout re-fits
            problems += [f"/{path} {width} px, cut off: {c}" for c in app.page.evaluate(CUT_JS)]
            problems += [f"/{path} {width} px, graded before an answer: {g}" for g in app.page.evaluate(GRADED_JS)]
        skip = app.page.locator('[data-testid="stMain"] button').filter(has_text="Skip")
        if path != "glossary":
            with contextlib.suppress(Exception):  # a long page may still be drawing its lower elements
                skip.first.wait_for(timeout=10_000)
        skips = skip.count()
        if path != "glossary" and not (app.page.evaluate(QUESTIONS_JS) and skips):
            problems.append(f"/{path}: no open question before an answer ({skips} Skip buttons)")
    assert not problems, "\n".join(problems)
