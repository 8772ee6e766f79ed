"""Exercises that check themselves: the path, each exercise's rating and page, the downloads (a
notebook per section for the picked model, the plain Python files), and the hints and solutions behind
a click. The app never runs a student's code: the checks run on the student's machine (exercises/)."""
import pandas as pd
import streamlit as st

from core.quiz import questions as quiz
from exercises import build
from exercises.catalogue import EXERCISES, MARKOV_MODEL, MARKOV_SECTION, SECTIONS, in_section, rating
from ui.cache import per_model
from ui.glossary import link
from ui.model_keys import shipped_file
from ui.pages import PATH
from ui.quiz import ask
from ui.state import LabModel, selected_model

PAGES = {p.file: p for p in PATH}


@st.cache_data(show_spinner=False, max_entries=64)
def _notebook(section: str, path: str | None, label: str) -> bytes:
    return build.notebook_bytes(section, path, label)


@st.cache_data(show_spinner=False)
def _template(section: str) -> bytes:
    return build.template_source(section).encode()


@per_model(name="exercises.slip_scores", show_spinner="Scoring the heads…", max_entries=16)
def _slip_scores(entry: LabModel) -> pd.DataFrame:
    """Every head's induction and duplicate score on the picked model's task sequences at the middle of its
    periods (the Attention page's scores), for the question on the induction score's commonest slip."""
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)
    from core.reading.probes import probe_periods

    task = entry.task
    lo, hi = probe_periods(task)
    view = analysis.task_sequence_view(entry.model, task, min(max((task.period_min + task.period_max) // 2, lo), hi))
    return view.scores[[c for c in ("label", "induction", "duplicate") if c in view.scores.columns]]


def _slip_question(entry) -> None:
    """Predict, then see: what reading A[i, i - L] instead of A[i, i + 1 - L] does to an induction score."""
    st.markdown("**Before you start: an off-by-one in a score can hide or fake a head.** The checks below catch "
                f"it; first guess what it does to your model's strongest {link('induction head')}.")
    scores = _slip_scores(entry)
    if ask(quiz.induction_slip(scores, entry.info["config"].n_layers), hides="the two scores of every head"):
        names = {"label": "head", "induction": "A[i, i + 1 − L] (right)", "duplicate": "A[i, i − L] (the slip)"}
        st.dataframe(scores.rename(columns=names), hide_index=True, column_config={
            names[c]: st.column_config.NumberColumn(format="%.2f") for c in ("induction", "duplicate")})
        st.caption("Each head's mean attention on the token after the earlier copy (the right cell) and on the "
                   "earlier copy itself (the slipped cell), over the Attention page's sampled sequences.")


@st.cache_data(show_spinner=False)
def _texts(name: str) -> tuple[str, str]:
    """An exercise's statement and its solution's source (read with inspect: most of a rerun's CPU, once)."""
    ex = next(e for e in EXERCISES if e.name == name)
    return ex.statement(), ex.solution()


st.markdown(
    "Reading a circuit is one skill; computing it yourself is the one that sticks. Each exercise below is one "
    "function you write: a computation the other pages make, from the task's batches to path patching. Its "
    "check runs your function on the model you picked and on small planted models whose answers are known, "
    "compares it with the lab's own computation, and says in one sentence what is wrong: a wrong shape (which "
    "axis), off by one position, not normalised, rows and columns swapped, the wrong copy, a patch in the "
    "wrong place.")
st.markdown(
    "**Two ways to work.** *Plain Python files:* in a copy of the repository, write the functions in "
    "`exercises/part1_attention.py` … `part5_markov.py` and run `python -m pytest exercises` from its root "
    "folder (`ATTENTION_LAB_MODEL=my-model.pt` checks on your own model). *Notebooks:* download a section's "
    "notebook below (it checks on the model picked in the sidebar; part 5's on a Markov-chain model), save it "
    "in the repository's root folder and run it top to bottom. Both use the same checks. This app never runs "
    "the code you write.")

DEFAULT_MODEL = "checkpoints/variable-period-2block.pt"
entry = selected_model()
task = entry.task.name if entry is not None else None  # core.model.tasks: parts 1-4 are the repeat task's, 5 Markov's
markov = task == "markov"
shipped = entry is not None and shipped_file(entry.key) is not None
picked = (f"checkpoints/{shipped_file(entry.key)}" if shipped else None, entry.label) if entry is not None else None
# Which model each section's notebook checks on: parts 1-4 on a repeat-task model, part 5 on a Markov-chain one.
repeat_target = picked if task == "repeat" else (DEFAULT_MODEL, "the default model")
markov_target = picked if markov else (MARKOV_MODEL, "the shipped Markov run")
if markov:
    st.info(f"**{entry.label}** was trained on the Markov-chain task: part 5's notebook checks on it. Parts 1-4 "
            "compute on the repeat task's batches, so their notebooks check on the default model instead (pick a "
            "repeat-task model in the sidebar to check them on it).")
if entry is not None and not shipped:
    which = "Part 5's notebook checks" if markov else "The notebooks of parts 1-4 check"
    st.info(f"{which} on **{entry.label}**, a model of this session: download it (Train page, or the sidebar), "
            "save it beside the notebook and put its file name in the notebook's first code cell.")
st.caption("Difficulty and importance out of 5 (🔴 and 🔵 below); the minutes are a guide for a first attempt. "
           "Every exercise names the page where you see its result on screen.")

if entry is not None and task == "repeat" and entry.info["config"].n_layers:
    _slip_question(entry)

number = build.numbered()
st.subheader("The path at a glance")
# st.table wraps a long title where st.dataframe's canvas would cut it off
st.table(pd.DataFrame([{"#": number[ex.name], "exercise": ex.title, "function": ex.name, "part": ex.section[4],
                        "difficulty": ex.difficulty, "importance": ex.importance, "minutes": ex.minutes,
                        "result on": PAGES[ex.page].title if ex.page in PAGES else ex.page}
                       for ex in EXERCISES]), hide_index=True)


def _part(section: str, title: str) -> None:
    """One part's header, notebook downloads and exercises."""
    st.header(title)
    model_path, model_label = markov_target if section == MARKOV_SECTION else repeat_target
    if section == MARKOV_SECTION:
        st.caption("These check on a Markov-chain model: the one picked in the sidebar when it is of that task, "
                   f"else the shipped run `{MARKOV_MODEL}`.")
    left, right = st.columns(2)
    left.download_button(f"📓 Notebook for {model_label}", _notebook(section, model_path, model_label),
                         file_name=f"attention-lab-exercises-{section}.ipynb", mime="application/x-ipynb+json",
                         key=f"ex_nb_{section}", width="stretch")
    right.download_button(f"🐍 {section}.py (the plain file)", _template(section), file_name=f"{section}.py",
                          mime="text/x-python", key=f"ex_py_{section}", width="stretch")
    for ex in in_section(section):
        with st.container(border=True):
            st.subheader(f"{number[ex.name]}. {ex.title}", anchor=ex.name)
            page = PAGES.get(ex.page)
            head, link = st.columns([5, 2], vertical_alignment="center")
            head.markdown(f"`{ex.name}` · difficulty {rating(ex.difficulty, '🔴')} · importance "
                          f"{rating(ex.importance, '🔵')} · about {ex.minutes} min")
            if page is not None:
                with link:
                    st.page_link(page.file, label=f"Result on: {page.title}", icon=page.icon)
            statement, solution = _texts(ex.name)
            st.code(statement, language=None, wrap_lines=True)
            for i, hint in enumerate(ex.hints, 1):
                with st.expander(f"Hint {i}"):
                    st.markdown(hint)
            with st.expander("Solution"):
                st.code(solution, language="python")


# one part at a time: all 32 exercises one under another made a page 19,800 px tall at 1400 px
for (section, title), tab in zip(SECTIONS.items(), st.tabs([t.split(":")[0] for t in SECTIONS.values()])):
    with tab:
        _part(section, title)
