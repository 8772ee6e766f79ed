"""Predict-then-reveal questions (core/quiz/questions.py, ui/quiz.py): on every page and on the shipped 2-block
and 1-block models, each question marks its right answer right and wrong answers wrong, the right
answer agrees with an independent computation where one is cheap, and a question without a clear
answer for the model says so instead of asking."""

import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.model.checkpoints import read_checkpoint
from core.model.symbols import with_labels
from core.quiz import causal as quiz_causal
from core.quiz import questions as quiz
from core.quiz import training as quiz_training
from core.reading.attention import task_sequences

from helpers import ROOT, open_app

TWO, ONE = "variable-period-2block.pt", "variable-period-1block.pt"
PAGES = [None, "app_pages/attention.py", "app_pages/circuits.py", "app_pages/depth.py", "app_pages/icl.py",
         "app_pages/archetypes.py", "app_pages/causal.py", "app_pages/train.py"]  # None: Home



def open_page(page: str | None, file: str) -> AppTest:
    return open_app(page, file, timeout=180)


def quiz_radios(at):
    return [r for r in at.radio if str(r.key).startswith("quiz_")]


def verdict(at) -> str:
    right = [s.value for s in at.success if s.value.startswith("Right.")]
    wrong = [e.value for e in at.error if e.value.startswith("Not quite")]
    assert len(right) + len(wrong) == 1, (right, wrong)
    return "right" if right else "wrong"


@pytest.mark.app
@pytest.mark.parametrize("file", [TWO, ONE])
@pytest.mark.parametrize("page", PAGES, ids=[p or "home" for p in PAGES])
def test_each_question_marks_right_and_wrong(page, file):
    at = open_page(page, file)
    keys = [r.key for r in quiz_radios(at)]
    unanswerable = [i.value for i in at.info
                    if any(w in i.value for w in ("no clear answer", "one block", "no composition", "two blocks"))]
    assert len(keys) + len(unanswerable) >= 2, (page, file)  # every page asks (or explains) at least two
    if file == TWO:
        assert keys, f"{page} on {file} asks nothing"
    answers = {}
    for key in keys:
        options = at.radio(key=key).options
        results = {}
        for option in options[:6]:
            if f"{key}_grade" in at.session_state:  # graded once and locked (ui/quiz.py): ask afresh
                del at.session_state[f"{key}_grade"]
                at.run()
            at.radio(key=key).set_value(option).run()
            assert not at.exception, at.exception
            results[option] = verdict(at)
        del at.session_state[f"{key}_grade"]
        at.run()
        at.radio(key=key).set_value(None).run()
        rights = [o for o, v in results.items() if v == "right"]
        assert len(rights) <= 2 and len(results) - len(rights) >= 1, results  # two: the rows cannot tell them apart
        if len(options) <= 6:
            assert len(rights) >= 1, results
        answers[key.split("_")[2]] = rights[0] if len(rights) == 1 else set(rights) if rights else None
    if page == "app_pages/attention.py":
        check_attention_answers(at, file, answers)
    if page == "app_pages/circuits.py" and answers.get("copy"):
        assert answers["copy"] == naive_top_copier(file)
    if page == "app_pages/train.py":  # its questions are about the shipped 2-block run, whatever is picked
        check_training_answers(answers)


def check_training_answers(answers):
    """The shipped 2-block run's history, read with plain loops (not core.training.live or core.training.transition)."""
    _, info = read_checkpoint(ROOT / "checkpoints" / TWO)
    rows = info["history"]
    first_low = next(i for i, r in enumerate(rows) if r["loss_later_copies"] < 1.0)
    start = max(i for i in range(first_low) if rows[i]["loss_later_copies"] >= 3.0)
    formed = next(i for i, r in enumerate(rows) if max(r["prev_token"][0]) >= 0.5)
    # the rule the explanation states: up to the drop's start before, then while, from the first row
    # below 1 nat after; a crossing in the same logging interval as a boundary counts on both sides
    opts = quiz_training.TIMING_OPTIONS
    if formed <= start:
        want = opts[0]
    elif formed == start + 1:
        want = {opts[0], opts[1]}
    elif formed < first_low:
        want = opts[1]
    elif formed == first_low:
        want = {opts[1], opts[2]}
    else:
        want = opts[2]
    assert answers["timing"] == want
    delta = rows[first_low]["loss_first_copy"] - rows[start]["loss_first_copy"]
    assert answers["first"] == quiz_training.FIRST_COPY_OPTIONS[2 if delta >= 0.2 else 0 if delta <= -0.2 else 1]


def check_attention_answers(at, file, answers):
    """The previous-token head, from the patterns with a plain loop (not core.reading.heads)."""
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


# ---- core/quiz/questions.py on planted numbers -----------------------------------------------------------


def heads_frame(heads, **columns) -> pd.DataFrame:
    """A planted head table as core returns one: label, then 0-based layer and head, then the columns."""
    return with_labels(pd.DataFrame({"layer": [l for l, _ in heads], "head": [h for _, h in heads], **columns}))


def test_planted_previous_token_and_ties():
    frame = heads_frame([(0, 0), (0, 1), (1, 0)], prev_token=[0.1, 0.93, 0.2])
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
    scores = heads_frame([(1, 0)], induction=[0.95])
    q = quiz.induction_target(scores, lambda l, h: pattern, list("abcdabcdabcd"), L, 2)
    assert q.answer.startswith(f"position {L + L // 2 + 1 - L}:")
    assert quiz.induction_target(scores, lambda l, h: pattern, list("abcdabcdabcd"), L, 1).answer is None


def test_planted_ablation_and_restart():
    grid = heads_frame([(0, 0), (0, 1), (1, 0)], loss_later_delta=[0.01, 2.0, 0.5])
    q = quiz.ablation_compare(grid)
    assert "1.1" in q.prompt and "1.2" in q.prompt and q.answer == "less"
    flat = quiz.ablation_compare(grid.assign(loss_later_delta=[0.01, 0.02, 0.0]))
    assert flat.answer is None
    copier = {"first_copy": 0.02, "first_predictable": 0.9, "rest": 0.97}
    assert quiz.restart_recovery(copier, 1 / 64).answer == quiz.RESTART_OPTIONS[1]
    blind = {"first_copy": 0.02, "first_predictable": 0.02, "rest": 0.03}
    assert quiz.restart_recovery(blind, 1 / 64).answer == quiz.RESTART_OPTIONS[2]


def test_planted_training_timing_and_first_copy():
    """Histories written by hand: the loss drops between steps 20 and 40 (V = 64)."""
    def row(step, later, first, prev):
        return {"step": step, "loss_later_copies": later, "loss_first_copy": first,
                "prev_token": [[prev, 0.1], [0.1, 0.1]], "induction": [[0.0, 0.0], [0.0, 0.0]]}
    losses = [(0, 4.2), (10, 4.1), (20, 3.5), (30, 2.0), (40, 0.5), (50, 0.2)]
    for formed_at, answer in ((10, 0), (50, 2)):
        hist = [row(s, loss, 4.2 + (0.5 if s >= 40 else 0), 0.9 if s >= formed_at else 0.1) for s, loss in losses]
        q = quiz_training.prev_head_timing(hist, 64)
        assert q.answer == quiz_training.TIMING_OPTIONS[answer], (formed_at, q.why)
        assert quiz.is_right(q, q.answer) and not quiz.is_right(q, quiz_training.TIMING_OPTIONS[answer - 1])
        assert quiz_training.first_copy_during_drop(hist, 64).answer == "it rises"
    flat = [row(s, 4.1, 4.1, 0.9) for s, _ in losses]
    assert quiz_training.prev_head_timing(flat, 64).answer is None
    assert quiz_training.first_copy_during_drop(flat, 64).answer is None
    steady = [row(s, loss, 4.15, 0.9) for s, loss in losses]
    assert quiz_training.first_copy_during_drop(steady, 64).answer == "it stays within 0.1 nats"
    one_block = [{**r, "prev_token": [[0.9, 0.1]], "induction": [[0.0, 0.0]]} for r in steady]
    assert "fewer than two blocks" in quiz_training.prev_head_timing(one_block, 64).why


def test_timing_boundaries_follow_the_stated_rule():
    """A head formed at exactly the drop's start (loss still at or above 3 nats) is 'before';
    within one logging interval of a boundary both sides count; the drop 10 -> 60 here (V = 64)."""
    opts = quiz_training.TIMING_OPTIONS

    def hist(formed_at):
        losses = [(0, 4.2), (10, 4.0), (20, 2.5), (30, 2.0), (40, 1.5), (50, 1.2), (60, 0.5), (70, 0.2)]
        return [{"step": s, "loss_later_copies": loss, "loss_first_copy": 4.2,
                 "prev_token": [[0.9 if s >= formed_at else 0.1, 0.1], [0.1, 0.1]],
                 "induction": [[0.0, 0.0], [0.0, 0.0]]} for s, loss in losses]
    cases = {0: (opts[0], ()), 10: (opts[0], ()), 20: (opts[1], (opts[0],)), 40: (opts[1], ()),
             60: (opts[2], (opts[1],)), 70: (opts[2], ())}
    for formed_at, (answer, also) in cases.items():
        q = quiz_training.prev_head_timing(hist(formed_at), 64)
        assert (q.answer, q.also) == (answer, also), (formed_at, q.why)
        for option in opts:
            assert quiz.is_right(q, option) == (option == answer or option in also), (formed_at, option)
    assert "last at or above 3 nats at step 10" in quiz_training.prev_head_timing(hist(10), 64).why
    # the shipped run: formed at 225, the drop 200 -> 250, logged every 25 steps: before or while both count
    shipped = read_checkpoint(ROOT / "checkpoints" / TWO)[1]["history"]
    q = quiz_training.prev_head_timing(shipped, 64)
    assert (q.answer, q.also) == (opts[1], (opts[0],)) and "step 225" in q.why


def test_planted_causal_questions():
    heads = heads_frame([(0, 0), (0, 1), (1, 0), (1, 1)], patch_effect=[0.1, -0.2, 0.45, 0.44])
    q = quiz_causal.patched_heads(heads)
    assert q.answer == "block 2" and q.options == ["block 1", "block 2"]
    assert quiz_causal.patched_heads(heads_frame([(0, 0), (0, 1)], patch_effect=[0.45, 0.44])).answer is None
    one = quiz_causal.patched_heads(heads_frame([(0, h) for h in range(4)], patch_effect=[0.1, 0.6, 0.2, 0.3]))
    assert one.answer == "1.2"
    paths = pd.DataFrame({"sender": ["1.1", "1.2", "1.3", "1.1"], "path": ["k", "k", "k", "v"],
                          "direction": ["noising"] * 4, "receiver_head": [-1, -1, -1, -1],
                          "patch_effect": [0.9, 0.3, 0.8, 0.0]})
    assert quiz_causal.needed_key_path(paths).answer == "1.2"  # the value path of 1.1 is not a key path
    lens = pd.DataFrame({"stage": [0, 1, 2] * 2, "stage_label": ["embedding", "after block 1", "after block 2"] * 2,
                         "copy": ["second"] * 3 + ["first"] * 3, "prob": [0.02, 0.3, 0.9, 0.9, 0.9, 0.9]})
    assert quiz_causal.lens_stage(lens).answer == "after block 2"
    assert quiz_causal.lens_stage(lens.assign(prob=[0.02, 0.1, 0.2] * 2)).answer == "at no stage"
    assert quiz_causal.lens_stage(lens.assign(prob=[0.02, 0.48, 0.9] * 2)).answer is None


def test_planted_home_questions():
    q = quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 0.3})
    assert q.answer == quiz.LOOKUP_OPTIONS[0] and not quiz.is_right(q, quiz.LOOKUP_OPTIONS[1])
    assert quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 4.1}).answer == quiz.LOOKUP_OPTIONS[2]
    assert quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 4.55}).answer == quiz.LOOKUP_OPTIONS[3]
    assert quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 3.9}).answer == quiz.LOOKUP_OPTIONS[1]
    assert quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 4.0}).answer is None  # 0.2: a border
    assert quiz.later_vs_first({"loss_first_copy": 4.2, "loss_later_copies": 2.17}).answer is None  # 2.03: a border
    assert quiz.later_vs_first({"loss_first_copy": float("nan"), "loss_later_copies": 1.0}).answer is None
    heads = heads_frame([(0, 0), (0, 1), (1, 0), (1, 1)], induction_any=[0.0, 0.1, 0.8, 0.9])
    assert quiz.induction_head_count(heads).answer == "2"
    assert quiz.induction_head_count(heads.assign(induction_any=[0.0, 0.0, 0.0, 0.1])).answer == "none"
    assert quiz.induction_head_count(heads.assign(induction_any=[0.0, 0.0, 0.52, 0.9])).answer is None
    assert quiz.induction_head_count(heads.iloc[:0]).answer is None


def test_home_lookup_question_on_the_shipped_models():
    """The 1-block model's later-copy loss is lower than its first-copy loss without a look-up;
    the question's options are bands of the measured difference and the answer says where the gap comes from."""
    from core.training.overview import model_overview

    N_OVERVIEW = 64  # dashboard.py's
    answers = {}
    for file in (ONE, TWO):
        model, info = read_checkpoint(ROOT / "checkpoints" / file)
        m = model_overview(model, info["task"], n_seqs=N_OVERVIEW, seed=0).metrics
        q = quiz.later_vs_first(m)
        answers[file] = q
        assert f"{m['loss_first_copy']:.2f}" in q.why and f"{m['loss_later_copies']:.2f}" in q.why
    assert answers[ONE].answer == quiz.LOOKUP_OPTIONS[1] and "without a look-up" in answers[ONE].why
    assert not quiz.is_right(answers[ONE], quiz.LOOKUP_OPTIONS[0])
    assert answers[TWO].answer == quiz.LOOKUP_OPTIONS[0]


def _one_question_in_two_panels(panels):
    from core.model.checkpoints import read_checkpoint as read
    from core.quiz import training as qt
    from ui.quiz import ask

    from helpers import ROOT as root

    info = read(root / "checkpoints" / "variable-period-2block.pt")[1]
    for panel in panels:  # a student's run with the defaults has the shipped run's history, question and all
        ask(qt.first_copy_during_drop(info["history"], info["config"].vocab_size), panel=panel)


@pytest.mark.parametrize("panels, fails", [(("run", ""), False), (("", ""), True)])
def test_one_question_asked_in_two_panels_of_a_page_gets_two_widgets(panels, fails):
    """The Train page asks the shipped run's questions about a finished run too: for a run trained with the
    defaults the two are the same question, which without a panel name made one widget key twice."""
    at = AppTest.from_function(_one_question_in_two_panels, args=(panels,), default_timeout=60).run()
    assert bool(at.exception) == fails, at.exception
    assert len(at.radio) == (1 if fails else 2)
