"""Laws of the drop: how the drop step moves with context, batch and vocabulary over many seeds, set beside
the published predictions; the clamps; the Causal page's readings over training seeds. Reads the shipped
tables only (checkpoints/laws/, core.pool.laws)."""
import streamlit as st

from core.pool import laws
from core.training.transition import STUDY_FILE
from ui.charts.laws import clamps_chart, law_chart

TITLES = {"context": "Context length, the task scaled with it", "seqlen": "Context length alone",
          "batch": "Batch size", "vocab": "Vocabulary size"}
NOTES = {  # beside each chart: what the sweep varies and what the paper behind the prediction measured
    "context": (
        "**Context length, the task scaled with it.** Each point trains on sequences of length N whose "
        "pattern lengths run from N/6 to N/3, so a longer context also means a longer look back. "
        "Musat et al. (2025) follow the training dynamics of a simplified two-layer transformer on a minimal "
        "in-context task and bound the time until its induction head emerges by the square of the context "
        "length: on these axes, a line of slope 2. Aoyama, Wilcox & Schneider (2025) pretrain language models "
        "at many batch sizes and contexts and find one equation in the two predicting where induction heads "
        "form: after a number of tokens growing as √(B·C), which at B·C tokens a step is a line of slope −½ "
        "in steps. The two disagree "
        "in sign, so this one sweep can tell them apart."),
    "seqlen": (
        "**Context length alone.** The pattern lengths stay 16-32 and only the sequence grows: a longer "
        "sequence holds more copies of the same pattern, so each step shows the model more later-copy "
        "targets, without the look back getting any longer. This is Aoyama et al.'s C at fixed B, where "
        "they predict slope −½; Musat et al.'s N² is about the context the head has to search, so it is set "
        "beside it too."),
    "batch": (
        "**Batch size at fixed context.** More sequences per step: each step's gradient averages over more "
        "examples, and the model sees B·96 tokens a step. If the formation point in tokens seen grows as "
        "√(B·C) (Aoyama, Wilcox & Schneider, 2025), the drop in steps falls as B^−½: slope −½ here. A "
        "slope of −1 would mean a fixed number of tokens seen; a slope of 0 a fixed number of steps."),
    "vocab": (
        "**Vocabulary size.** V symbols to copy: the later-copy loss starts from ln V, and the drop is "
        "where it falls below half of that. Singh et al. (2024), who took induction circuits apart by "
        "clamping their parts during training, report the transition coming later as the number of labels "
        "grows. They give a direction, not a power, so the question is only whether the slope is "
        "above 0."),
}

CHART_NOTE = (
    "**What am I looking at?** One dot per training run (seed) at its drop step: the first measured step "
    "with later-copy loss below ln V / 2. A run that never dropped within its steps is a triangle drawn at "
    "the cap; it counts as later than the cap, never as missing. The grey bar spans each point's middle half "
    "of the seeds (25% to 75%), the black tick is the median. The solid line is the least-squares line "
    "through the medians on log-log axes; the dashed ones have the predicted slopes, drawn through the "
    "middle of the fit so their steepness can be compared.")


@st.cache_data(show_spinner=False, max_entries=8)
def _law(name: str, mtime: float):
    law = laws.LAWS[name]
    result = laws.read_law(law.path, law)
    runs, lines = laws.chart_frames(result)
    return result, runs, lines, laws.sentences(result)


@st.cache_data(show_spinner=False, max_entries=4)
def _groups(path: str, column: str, mtime: float) -> dict:
    return laws.groups(path, column)


def law_section(name: str) -> None:
    law = laws.LAWS[name]
    st.subheader(TITLES[name])
    if not law.path.is_file():
        st.info(f"Not measured yet: checkpoints/laws/{name}.csv is not installed with this copy of the lab.")
        return
    try:
        result, runs, lines, said = _law(name, law.path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/{name}.csv cannot be read as a law: {e}")
        return
    st.markdown("\n".join(f"- {s}" for s in said))
    chart, note = st.columns([3, 2])
    chart.altair_chart(law_chart(runs, lines, law.axis_name), width="stretch")
    note.markdown(NOTES[name])
    note.caption(CHART_NOTE)
    st.caption("The command that measured this table (it resumes: finished runs are kept):")
    st.code(result.command, language="bash")
    with st.expander(f"Every run of checkpoints/laws/{name}.csv"):
        st.dataframe(runs.drop(columns=["y"]), hide_index=True, width="stretch")


def depth_and_start_section() -> None:
    st.subheader("Depth and the initial embedding")
    lines = []
    if STUDY_FILE.is_file():
        for blocks, point in _groups(str(STUDY_FILE), "blocks", STUDY_FILE.stat().st_mtime).items():
            lines.append(laws.group_sentence(f"{blocks} block{'s' if blocks > 1 else ''} (the transition study)",
                                             point))
    init = laws.LAWS_DIR / "init.csv"
    if init.is_file():
        names = {"shared": "Enlarged start (the default)", "plain": "Plain start"}
        for value, point in _groups(str(init), "init", init.stat().st_mtime).items():
            lines.append(laws.group_sentence(f"{names.get(value, value)}, 2 blocks", point))
    if not lines:
        st.info("Not measured yet: neither the transition study nor checkpoints/laws/init.csv is installed.")
        return
    st.markdown("\n".join(f"- {s}" for s in lines))
    st.markdown(
        "One block has no second layer to read what a previous-token head wrote, so it cannot build the "
        "induction circuit (Olsson et al., 2022) and its later-copy loss stays near ln V. With two blocks every "
        "seed drops. The *enlarged* start multiplies the initial embedding by 3 and adds one shared direction "
        "to every row (docs/DESIGN.md, \"The initial embedding\"); the *plain* start is the textbook one, "
        "trained here as long as the other sweeps' runs.")


@st.cache_data(show_spinner=False, max_entries=2)
def _clamps(mtime: float):
    return laws.clamp_sentences(), laws.clamp_frame(), laws.table_command(laws.CLAMPS_FILE)


@st.cache_data(show_spinner=False, max_entries=2)
def _readings(mtime: float):
    return laws.readings_sentences(), laws.table_command(laws.READINGS_FILE)


def clamps_section() -> None:
    st.subheader("Clamps")
    path = laws.CLAMPS_FILE
    if not path.is_file():
        st.info("Not measured yet: checkpoints/laws/clamps.csv is not installed with this copy of the lab.")
        return
    try:
        said, runs, command = _clamps(path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/clamps.csv cannot be read: {e}")
        return
    st.markdown(
        "Singh et al. (2024) clamp parts of the induction circuit while it trains: an activation is replaced by "
        "its ideal value in every forward pass, training and evaluation alike, and the rest of the network "
        "learns around it. Two clamps are run here. The **layer-1 clamp** is the lab's hold (Train page, "
        "Training experiments): a block-1 head's pattern sits on the previous token. The **layer-2 clamp** "
        "gives a block-2 head the ideal induction pattern, computed from the tokens: each position attends to "
        "the positions just after earlier copies of its own token (a position with none attends to itself). "
        "The clamped head's queries and keys then get no gradient; its values and output still learn. The "
        "later-copy loss that defines the drop is measured on the clamped model.")
    st.markdown("\n".join(f"- {s}" for s in said))
    st.altair_chart(clamps_chart(runs), width="stretch")
    st.caption("One dot per seed at its drop step; grey bar: the middle half of the seeds, black tick: the median. "
               "The comparison with no clamp resamples each arm's seeds; the last sentence sets the result against "
               "Singh et al.'s.")
    st.caption("The command that measured this table (it resumes: finished runs are kept):")
    st.code(command, language="bash")


def readings_section() -> None:
    st.subheader("Replication of the circuit readings across seeds")
    path = laws.READINGS_FILE
    if not path.is_file():
        st.info("Not measured yet: checkpoints/laws/readings.csv is not installed with this copy of the lab.")
        return
    try:
        said, command = _readings(path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/readings.csv cannot be read: {e}")
        return
    st.markdown(
        "The Causal page reads one model: which block-1 head is the previous-token head, how much noising it "
        "costs, whose key path into block 2 is needed most, how much the induction heads restore. Its intervals "
        "cover that model's evaluation sequences only. Here every reading is taken again on models trained "
        "from different seeds (the unclamped runs above), and counted: on how many seeds it holds, and how far "
        "its number moves.")
    st.markdown("\n".join(f"- {s}" for s in said))
    st.caption("The command that measured this table (it trains each seed again, reads the model, and keeps only "
               "the readings):")
    st.code(command, language="bash")


st.title("Laws of the drop")
st.markdown(
    "Train TinyCharLM many times, changing one setting at a time, and ask how the step where the later-copy "
    "loss drops moves with it. Three published results make predictions you can check here. Every number on "
    "this page is read from sweep tables shipped with the lab (`python -m core.sweep` wrote them; the command "
    "is under each chart): nothing trains when you open it.")
st.caption(laws.sweeps_caption())  # five small tables: read on every run
for name in laws.LAWS:
    law_section(name)
depth_and_start_section()
clamps_section()
readings_section()
