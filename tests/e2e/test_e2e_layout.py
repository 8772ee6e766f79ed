"""A question answered in a real browser (screenshots before and after) and an In Python panel opened. (Every page's
layout at both widths: tests/e2e/test_e2e_pixels.py.)"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_question_and_python_panel(app):
    """Answer a question (screenshots before and after) and open an In Python panel."""
    app.page.set_viewport_size({"width": 1400, "height": 1000})
    app.goto("attention")
    app.wait_charts(1)
    box = app.page.get_by_text("Predict first").first.locator("xpath=ancestor::div[@data-testid='stVerticalBlock'][1]")
    box.scroll_into_view_if_needed()
    path = app.screenshot("question-before")
    box.screenshot(path=str(path.with_name("question-box-before.png")))
    app.after(lambda: box.locator('[data-testid="stRadio"] label').nth(1).click())
    box = app.page.get_by_text("Predict first").first.locator("xpath=ancestor::div[@data-testid='stVerticalBlock'][1]")
    verdict = box.locator('[data-testid="stAlertContentSuccess"], [data-testid="stAlertContentError"]')
    assert verdict.count() == 1 and verdict.inner_text().startswith(("Right.", "Not quite"))
    box.screenshot(path=str(path.with_name("question-box-after.png")))
    panel = app.page.locator('[data-testid="stExpander"]').filter(has_text="In Python").first
    panel.locator("summary").click()
    code = panel.locator('[data-testid="stCode"]')
    code.wait_for()
    assert "read_checkpoint('checkpoints/" in code.inner_text()
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(path.with_name("python-panel.png")))
    app.assert_no_exception()
