"""Predict-then-reveal questions (core/quiz/questions.py, ui/quiz.py): on every page and on the shipped 2-block
and 1-block models, each question marks its right answer right and wrong answers wrong, the right
answer agrees with an independent computation where one is cheap, and a question without a clear
answer for the model says so instead of asking."""

import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.errors import AppTestError

from core.model.checkpoints import read_checkpoint
from core.model.symbols import with_labels
from core.quiz import causal as quiz_causal
from core.quiz import questions as quiz
from core.quiz import training as quiz_training
from core.reading.attention import task_sequences

from helpers import ROOT, open_app

TWO, ONE = "variable-period-2block.pt", "variable-period-1block.pt"
PAGES = [None, "app_pages/attention.py", "app_pages/circuits.py", "app_pages/depth.py", "app_pages/icl.py",
         "app_pages/archetypes.py", "app_pages/causal.py", "app_pages/train.py",
         "app_pages/exercise_page.py"]  # None: Home
ONE_QUESTION = {"app_pages/exercise_page.py"}  # pages that ask (or explain) one question, not two


@pytest.fixture
def predict_first(monkeypatch):
    """The questions as a student meets them: what answers each stays hidden until an answer (tests/conftest.py
    turns this off for the other page tests)."""
    monkeypatch.setenv("ATTENTION_LAB_PREDICT", "on")


def open_page(page: str | None, file: str) -> AppTest:
    return open_app(page, file, timeout=180)


def quiz_radios(at):
    """The questions graded as they are answered (not the Train page's predictions for a run to come)."""
    return [r for r in at.radio if str(r.key).startswith("quiz_") and not str(r.key).startswith("quiz_before_")]


def verdicts(at) -> list[str]:
    """Every graded box on screen: "right" or "wrong"."""
    return (["right" for s in at.success if s.value.startswith("Right.")]
            + ["wrong" for e in at.error if e.value.startswith("Not quite")])


@pytest.mark.app
@pytest.mark.parametrize("file", [TWO, ONE])
def test_each_question_grades_once(file, predict_first):
    """On every page: each question's answer is one of its options, the option picked is graded right exactly
    when it is that answer (or one the measurement cannot tell from it), the grade shows in the box with the
    number it rests on, and it stays when the radio is set again (graded once, against the numbers it was
    asked with)."""
    at = open_page(None, file)
    for page in PAGES:
        if page is not None:
            at.switch_page(page).run()
            assert not at.exception, at.exception
        keys = [r.key for r in quiz_radios(at)]
        if page == "app_pages/train.py":  # asked before a run exists, graded when it ends: test_pages_train
            before = [r for r in at.radio if str(r.key).startswith("quiz_before_")]
            assert [r.options for r in before] == [o for _, _, o in quiz_training.BEFORE_TRAINING]
            check_training_answers(shipped_training_answers())  # what a default run is graded against
            continue
        unanswerable = [i.value for i in at.info
                        if any(w in i.value for w in ("no clear answer", "one block", "no composition", "two blocks",
                                                      "no induction head", "fewer than two blocks"))]
        assert len(keys) + len(unanswerable) >= (1 if page in ONE_QUESTION else 2), (page, file)
        if file == TWO:
            assert keys, f"{page} on {file} asks nothing"
        answers = {}
        for n, key in enumerate(keys, 1):
            options = at.radio(key=key).options
            at.radio(key=key).set_value(options[0]).run()
            assert not at.exception, at.exception
            grade = at.session_state[f"{key}_grade"]
            rights = {grade["answer"], *grade["also"]}
            assert rights <= set(options) and len(rights) <= 2 and len(options) > len(rights), (key, grade)
            assert grade["right"] == (options[0] in rights)
            assert len(verdicts(at)) == n  # one graded box per answered question
            assert any(c.isdigit() for c in grade["why"])  # the number it rests on
            with pytest.raises(AppTestError, match="disabled"):  # locked: no second answer
                at.radio(key=key).set_value(options[1])
            answers[key.split("_")[2]] = grade["answer"] if not grade["also"] else rights
        if page == "app_pages/attention.py":
            check_attention_answers(at, file, answers)
        if page == "app_pages/circuits.py" and answers.get("copy"):
            assert answers["copy"] == naive_top_copier(file)


@pytest.mark.app
def test_what_answers_a_question_stays_hidden_until_an_answer_or_a_skip(predict_first):
    """Home: the score table answers 'how many heads...', the loss metrics the look-up question; neither is on
    screen before the student commits. Skipping shows the answer and the table; answering the other shows the
    metrics. A later change of the sequence keeps the Attention page's grade (asked once, graded once)."""
    at = open_page(None, TWO)
    count = next(r.key for r in quiz_radios(at) if r.key.startswith("quiz_q_count"))
    lookup = next(r.key for r in quiz_radios(at) if r.key.startswith("quiz_q_lookup"))
    assert not at.dataframe and not at.metric
    at.button(key=f"{count}_skipbtn").click().run()
    assert len(at.dataframe) == 1 and at.session_state[f"{count}_grade"]["given"] is None
    assert any(i.value.startswith("Skipped: the answer is") for i in at.info)
    assert not any(m.label == "later-copy loss (nats)" for m in at.metric)
    at.radio(key=lookup).set_value(quiz.LOOKUP_OPTIONS[0]).run()
    assert any(m.label == "later-copy loss (nats)" for m in at.metric)

    at.switch_page("app_pages/attention.py").run()
    charts = len(at.get("vega_lite_chart"))
    prev = next(r.key for r in quiz_radios(at) if r.key.startswith("quiz_q_prev"))
    at.radio(key=prev).set_value(at.radio(key=prev).options[0]).run()
    grade = at.session_state[f"{prev}_grade"]
    ind = next(r.key for r in quiz_radios(at) if r.key.startswith("quiz_q_ind"))
    at.button(key=f"{ind}_skipbtn").click().run()
    assert len(at.get("vega_lite_chart")) > charts  # the patterns, once both are answered
    at.number_input(key="att_seed").set_value(3).run()
    assert at.session_state[f"{prev}_grade"] == grade and prev in [r.key for r in quiz_radios(at)]


def shipped_training_answers() -> dict:
    """The training questions' answers on the shipped 2-block run: those a student's run with the defaults (the
    same history) is graded against."""
    info = read_checkpoint(ROOT / "checkpoints" / TWO)[1]
    history, vocab = info["history"], info["config"].vocab_size
    out = {}
    for q in (quiz_training.prev_head_timing(history, vocab), quiz_training.first_copy_during_drop(history, vocab)):
        out[q.key.removeprefix("q_")] = {q.answer, *q.also} if q.also else q.answer
    return out


def _predict_then_train():
    """Predictions made before a run exists, tied to it at the press, graded when it has ended (ui/quiz.py)."""
    import streamlit as st

    from core.model.checkpoints import read_checkpoint as read
    from core.quiz import training as qt
    from ui.quiz import ask_before, ask_recorded, record_before

    from helpers import ROOT as root

    stage = st.session_state.setdefault("stage", "before")
    if stage == "press":
        record_before("run-1")
        st.session_state["stage"] = stage = "ended"
    if stage == "ended":  # the finished run: the shipped 2-block run's history
        info = read(root / "checkpoints" / "variable-period-2block.pt")[1]
        for q in (qt.first_copy_during_drop(info["history"], info["config"].vocab_size),
                  qt.prev_head_timing(info["history"], info["config"].vocab_size)):
            assert ask_recorded(q, "run-1")
    for key, prompt, options in qt.BEFORE_TRAINING:  # the next run's
        ask_before(key, prompt, options)


def test_a_prediction_made_before_training_is_graded_against_the_finished_run(predict_first):
    """A right pick and a wrong one, made before the run: locked when picked, graded right and wrong once the run
    has ended (against its history, not at the moment of asking), the grade kept with the run, and the next
    run's questions start unpicked."""
    answers = shipped_training_answers()
    right, timing = answers["first"], answers["timing"]
    rights = {timing} if isinstance(timing, str) else timing
    wrong = next(o for o in quiz_training.TIMING_OPTIONS if o not in rights)
    at = AppTest.from_function(_predict_then_train, default_timeout=60).run()
    assert not at.exception, at.exception
    at.radio(key="quiz_before_q_first_0").set_value(right).run()
    at.radio(key="quiz_before_q_timing_0").set_value(wrong).run()
    assert not at.success and not at.error, "graded before the run"
    with pytest.raises(AppTestError, match="disabled"):  # locked when picked
        at.radio(key="quiz_before_q_first_0").set_value(next(o for o in quiz_training.FIRST_COPY_OPTIONS
                                                             if o != right))
    at.session_state["stage"] = "press"
    at.run()
    assert not at.exception, at.exception
    assert verdicts(at) == ["right", "wrong"]
    assert at.error[0].value.startswith("Not quite: the answer is **") and "logged every" in at.error[0].value
    grades = at.session_state["quiz_before_runs"]["run-1"]["grades"]
    assert grades["q_first"]["given"] == right and grades["q_timing"]["given"] == wrong
    assert [at.radio(key=f"quiz_before_{k}_1").value for k in ("q_first", "q_timing")] == [None, None]
    at.run()  # graded once: the same boxes again
    assert verdicts(at) == ["right", "wrong"]


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


def test_planted_induction_slip_and_ambiguous_patterns():
    frame = heads_frame([(0, 0), (1, 0), (1, 1)], induction=[0.0, 0.9, 0.3], duplicate=[0.1, 0.05, 0.2])
    q = quiz.induction_slip(frame, 2)
    assert q.answer == quiz.SLIP_OPTIONS[1] and "0.90" in q.why and "0.05" in q.why
    assert quiz.induction_slip(frame.assign(duplicate=[0.1, 0.85, 0.2]), 2).answer == quiz.SLIP_OPTIONS[0]
    assert quiz.induction_slip(frame.assign(duplicate=[0.1, 0.6, 0.2]), 2).answer is None  # falls, not by half
    assert quiz.induction_slip(frame, 1).answer is None
    # 'abcaXY': 'a' is followed by 'b' and by 'X'; the knowable targets after an 'a' start at the second copy
    pattern, names = [0, 1, 2, 0, 3, 4], "abcXY"
    T, L = 18, 6
    rows = [{"position": t, "correct": t != 10, "copy": "first" if t < L else "second" if t < 2 * L else "later"}
            for t in range(1, T)]
    r = quiz.repeated_symbols(pattern, rows, lambda t: names[t])
    assert r["symbols"] == ["a"] and r["followers"] == {"a": ["X", "b"]}
    # targets after an 'a' (positions 0, 3, 6, 9, 12, 15 hold 'a'): 7, 10, 13, 16 are knowable; 10 was wrong
    assert (r["n"], r["right"]) == (4, 3)
    assert quiz.repeated_symbols([0, 1, 2, 3], rows, lambda t: names[t]) is None


def test_rotation_explains_the_k_composition_ranking_on_the_shipped_model():
    """The Circuits page's sentence: on the shipped 2-block model the weight-based score does not rank the
    previous-token head first as the writer of the strongest induction head's keys; with the rotation put back it
    does (core/causal/rope_k.py, a plain loop for the previous-token head here)."""
    from core.causal.rope_k import k_composition_with_rotation, rotation_sentence

    model, info = read_checkpoint(ROOT / "checkpoints" / TWO)
    res = k_composition_with_rotation(model, info["task"])
    tokens, _ = task_sequences(info["task"], model.cfg.vocab_size, 32, seed=0)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    P = cache["pattern"][0]
    prev = [float(sum(P[b, h, i, i - 1] for b in range(P.shape[0]) for i in range(1, P.shape[2])))
            for h in range(P.shape[1])]
    w, r = max(range(len(prev)), key=prev.__getitem__), int(res["induction"].argmax())
    assert int(res["prev"].argmax()) == w
    assert int(res["plain"][:, r].argmax()) != w and int(res["rope"][:, r].argmax()) == w
    sentence = rotation_sentence(res)
    assert "leaves the rotary rotation out" in sentence
    assert f"1.{w + 1} scores {float(res['rope'][w, r]):.3f}" in sentence
