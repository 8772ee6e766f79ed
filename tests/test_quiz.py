"""Predict-then-reveal questions (core/quiz.py, ui/quiz.py): on every page and on the shipped 2-block
and 1-block models, each question marks its right answer right and wrong answers wrong, the right
answer agrees with an independent computation where one is cheap, and a question without a clear
answer for the model says so instead of asking."""
from pathlib import Path

import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import quiz
from core.attention import task_sequences
from core.checkpoints import read_checkpoint
from ui.state import shipped_files

from helpers import open_app

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = {row["file"] for row in shipped_files()}
TWO, ONE = "variable-period-2block.pt", "variable-period-1block.pt"
PAGES = ["pages/attention.py", "pages/circuits.py", "pages/depth.py", "pages/icl.py", "pages/archetypes.py"]

pytestmark = pytest.mark.usefixtures("navigation_apps_only")  # tests/conftest.py


def open_page(page: str, file: str) -> AppTest:
    return open_app(page, file, timeout=180)


def quiz_radios(at):
    return [r for r in at.radio if str(r.key).startswith("quiz_")]


def verdict(at) -> str:
    right = [s.value for s in at.success if s.value.startswith("Right.")]
    wrong = [e.value for e in at.error if e.value.startswith("Not quite")]
    assert len(right) + len(wrong) == 1, (right, wrong)
    return "right" if right else "wrong"


@pytest.mark.parametrize("file", [TWO, ONE])
@pytest.mark.parametrize("page", PAGES)
def test_each_question_marks_right_and_wrong(page, file):
    at = open_page(page, file)
    keys = [r.key for r in quiz_radios(at)]
    unanswerable = [i.value for i in at.info
                    if any(w in i.value for w in ("no clear answer", "one block", "no composition"))]
    assert len(keys) + len(unanswerable) >= 2, (page, file)  # every page asks (or explains) at least two
    if file == TWO:
        assert keys, f"{page} on {file} asks nothing"
    answers = {}
    for key in keys:
        options = at.radio(key=key).options
        results = {}
        for option in options[:6]:
            at.radio(key=key).set_value(option).run()
            assert not at.exception, at.exception
            results[option] = verdict(at)
        at.radio(key=key).set_value(None).run()
        rights = [o for o, v in results.items() if v == "right"]
        assert len(rights) <= 1 and len(results) - len(rights) >= 1, results
        if len(options) <= 6:
            assert len(rights) == 1, results
        answers[key.split("_")[2]] = rights[0] if rights else None
    if page == "pages/attention.py":
        check_attention_answers(at, file, answers)
    if page == "pages/circuits.py" and answers.get("copy"):
        assert answers["copy"] == naive_top_copier(file)


def check_attention_answers(at, file, answers):
    """The previous-token head, from the patterns with a plain loop (not core.heads)."""
    if file == ONE:
        assert any("one block" in i.value for i in at.info)  # no induction question for one block
    period, seed = at.slider(key="att_period").value, at.number_input(key="att_seed").value
    model, info = read_checkpoint(ROOT / "checkpoints" / file)
    tokens, periods = task_sequences(info["task"], model.cfg.vocab_size, 32, period=period, seed=seed)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    scores = {}
    for layer, pattern in enumerate(cache["pattern"]):
        for h in range(pattern.shape[1]):
            vals = [float(pattern[b, h, i, i - 1]) for b in range(pattern.shape[0]) for i in range(1, pattern.shape[2])]
            scores[f"{layer + 1}.{h + 1}"] = sum(vals) / len(vals)
    best = max(scores, key=scores.get)
    if answers.get("prev"):
        assert answers["prev"] == best, (answers, scores)


def naive_top_copier(file) -> str:
    model, _ = read_checkpoint(ROOT / "checkpoints" / file)
    E = model.W_E.detach()
    out = {}
    for layer, block in enumerate(model.blocks):
        for h in range(model.cfg.n_heads):
            C = E @ block.W_V[h].detach() @ block.W_O[h].detach() @ E.T
            out[f"{layer + 1}.{h + 1}"] = sum(int(C[a].argmax()) == a for a in range(C.shape[0])) / C.shape[0]
    return max(out, key=out.get)


# ---- core/quiz.py on planted numbers -----------------------------------------------------------


def test_planted_previous_token_and_ties():
    frame = pd.DataFrame({"block": [1, 1, 2], "head": [1, 2, 1], "prev_token": [0.1, 0.93, 0.2]})
    q = quiz.previous_token_head(frame)
    assert q.answer == "1.2" and quiz.is_right(q, "1.2") and not quiz.is_right(q, "2.1")
    tie = quiz.previous_token_head(frame.assign(prev_token=[0.9, 0.92, 0.1]))
    assert tie.answer is None and "no clear answer" in tie.why and not quiz.is_right(tie, "1.2")
    assert quiz.previous_token_head(frame.drop(columns="prev_token")).answer is None


def test_planted_induction_target():
    T, L = 12, 4
    import numpy as np
    pattern = np.zeros((T, T))
    for i in range(T):
        pattern[i, max(i + 1 - L, 0)] = 1.0  # a perfect induction head
    scores = pd.DataFrame({"block": [2], "head": [1], "induction": [0.95]})
    q = quiz.induction_target(scores, lambda l, h: pattern, list("abcdabcdabcd"), L, 2)
    assert q.answer.startswith(f"position {L + L // 2 + 1 - L}:")
    assert quiz.induction_target(scores, lambda l, h: pattern, list("abcdabcdabcd"), L, 1).answer is None


def test_planted_ablation_and_restart():
    grid = pd.DataFrame({"block": [1, 1, 2], "head": [1, 2, 1], "loss_later_delta": [0.01, 2.0, 0.5]})
    q = quiz.ablation_compare(grid)
    assert "1.1" in q.prompt and "1.2" in q.prompt and q.answer == "less"
    flat = quiz.ablation_compare(grid.assign(loss_later_delta=[0.01, 0.02, 0.0]))
    assert flat.answer is None
    copier = {"first_copy": 0.02, "first_predictable": 0.9, "rest": 0.97}
    assert quiz.restart_recovery(copier, 1 / 64).answer == quiz.RESTART_OPTIONS[1]
    blind = {"first_copy": 0.02, "first_predictable": 0.02, "rest": 0.03}
    assert quiz.restart_recovery(blind, 1 / 64).answer == quiz.RESTART_OPTIONS[2]
