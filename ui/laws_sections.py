"""The Laws of the drop page's sections on stages: the constant-rate table (checkpoints/laws/targets.csv,
core.laws.stages: onset, drop and completion on the same runs, and how many seeds a slope needs) and the
Markov-chain table (checkpoints/laws/markov.csv, core.laws.markov: the unigram and bigram onsets) with its
part on other chains (checkpoints/laws/markov_prior.csv: does the unigram solution delay the bigram one?)."""
from __future__ import annotations

import streamlit as st

from core.laws import markov, stages, stats
from core.sweeps.run import COMPLETE
from core.training.onset import RISING
from ui import snippets
from ui.charts.kept import draw
from ui.charts.laws import markov_chart, prior_chart, stages_chart
from ui.glossary import link
from ui.python_panel import python_panel
from ui.snippets.laws import law_markov, law_markov_prior


@st.cache_data(show_spinner=False, max_entries=2)
def _stages(mtime: float):
    table = stages.targets_table()
    return (stages.stage_sentences(table), stages.stage_chart_frame(table), stages.stage_frame(table),
            stages.power_frame(table), stats.table_command(stages.TARGETS_FILE))


STAGES_NOTE = (
    "**What am I looking at?** One dot per point and stage: the median step, over the seeds, at which the runs "
    "reached it; the pale bar spans the middle half of the seeds. The x axis is how many later-copy targets "
    "(positions whose token the model can copy from an earlier copy) one training step holds: B sequences times "
    "T − L each. Solid lines join the points where the sequence length T varies at B = 32, dashed ones where the "
    "batch B varies at T = 96; the point T = 96, B = 32 is on both. If the number of targets a step holds were "
    "all that counted, the solid and the dashed line of a stage would lie on one another. A slope of −1 would mean "
    "a fixed number of later-copy targets seen, 0 a fixed number of steps.")


def stages_section() -> None:
    """Onset, drop and completion on the same constant-rate runs: sentences, chart, table, command."""
    st.subheader("Onset, drop and completion at a constant rate")
    path = stages.TARGETS_FILE
    if not path.is_file():
        st.info("Not measured yet: checkpoints/laws/targets.csv is not installed with this copy of the lab.")
        return
    try:
        said, chart_rows, frame, _, command = _stages(path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/targets.csv cannot be read: {e}")
        return
    st.markdown(
        "The tables above read one step per run, the drop, under the default schedule, whose learning rate decays "
        "over the runs' last steps (the caption at the top says from which), so a late drop happens at a lower rate "
        f"than an early one. These runs keep the rate constant, train until their later-copy loss is below "
        f"{COMPLETE:g} nats or their cap (long enough that few runs reach it: the first sentence below counts "
        "them), and read three steps on the same runs, each the closest measure of a different claim. "
        "The **head-score onset**, the first step from which block 1's best previous-token score stays at or above "
        f"{RISING:g} (Train page: the score that starts the circuit), is the formation Musat et al. (2025) bound by "
        "N² and "
        "Aoyama, Wilcox & Schneider (2025) place at a number of tokens growing as √(B·C). The **drop** (ln V / 2) "
        f"is the tables' own step. **Completion** ({COMPLETE:g} nats) is how long the copy takes to learn once the "
        "circuit is there, which neither paper predicts. Two series: the sequence length T at batch 32 (more "
        "later-copy targets in each sequence, the look back unchanged) and the batch B at T = 96 (more sequences a "
        "step); set on one axis, the later-copy targets per step, they separate how many targets the model has seen "
        "from how many steps it has taken.")
    st.markdown("\n".join(f"- {x}" for x in said))
    chart, note = st.columns([3, 2])
    draw(chart, stages_chart(chart_rows), width="stretch")
    note.caption(STAGES_NOTE)
    python_panel(snippets.law_stages(), shows={"median": frame["median"], "said": said})
    shown = frame.replace([float("inf")], float("nan"))  # above the cap: shown empty
    st.dataframe(shown[["seq_len", "batch_size", "targets_per_step", "stage_name", "median", "q25", "q75", "reached",
                        "targets_seen"]].rename(columns={
        "seq_len": "T", "batch_size": "B", "targets_per_step": "targets a step", "stage_name": "stage",
        "median": "median step", "q25": "25%", "q75": "75%", "reached": "reached",
        "targets_seen": "targets seen"}), hide_index=True, width="stretch",
        column_config={"targets a step": st.column_config.NumberColumn(format="%.0f"),
                       "targets seen": st.column_config.NumberColumn(format="%.0f")})
    st.caption(f"Per point and stage: the later-copy targets one step holds, the median step and quartiles over the "
               f"{int(frame['n'].max())} seeds (a run that never reached the stage ranked last; empty: above the cap), "
               "how many runs reached it, and the later-copy targets seen by the median step (the median step times "
               "the targets a step holds). The command that measured the table (it resumes: finished runs are "
               "kept):")
    st.code(command, language="bash")


def power_section() -> None:
    """How many seeds a slope of −0.5 needs to be told from 0, from the constant-rate table's seed spread."""
    path = stages.TARGETS_FILE
    if not path.is_file():
        return
    try:
        power = _stages(path.stat().st_mtime)[3]
    except ValueError:
        return  # stages_section said why
    st.subheader("How many seeds a slope needs")
    st.markdown(
        "A slope of −0.5 (Aoyama et al.'s in steps) and a slope of 0 (a fixed number of steps) predict different "
        "lines, but each point's median moves with the seeds drawn. How many seeds a point would tell the two "
        "apart? The measured spread answers it: each seed's log step at each point, less its point's log median, "
        "is that seed's noise, kept together across the points as the paired bootstrap keeps it. An experiment "
        "with n seeds draws n of them with replacement, adds a true slope, and fits the medians as the page does; "
        "under slope 0 the fitted slopes give the range a 95% test would accept, and the share of experiments "
        "under −0.5 outside it is the power. Resampling more seeds than were measured assumes the measured ones "
        "show the spread well.")
    power_said = stages.power_sentence(power)
    if power_said:
        st.markdown(power_said)
    st.dataframe(power.rename(columns={
        "series": "series", "stage": "stage", "seeds_measured": "seeds", "noise_sd": "spread", "power_5": "power, 5 "
        "seeds", "power_12": "power, 12 seeds", "needed": "seeds for 80%"}).assign(**{
            "power, 5 seeds": 100 * power["power_5"], "power, 12 seeds": 100 * power["power_12"]}),
        hide_index=True, width="stretch", column_config={
            "spread": st.column_config.NumberColumn(format="%.2f"),
            "power, 5 seeds": st.column_config.NumberColumn(format="%.1f%%"),
            "power, 12 seeds": st.column_config.NumberColumn(format="%.1f%%")})
    st.caption("**What am I looking at?** One row per series and stage: how many seeds reached it at every point "
               "(their spread is the noise resampled), the spread (the standard deviation of a seed's log step about "
               "its point's log median), the power with 5 and 12 seeds a point, and the fewest seeds a point from "
               f"which the power stays at {stages.POWER:.0%} or more (empty: not within {stages.MAX_SEEDS}). A series "
               "spanning a wider "
               "range of x needs fewer seeds: the same slope moves its ends further apart.")
    python_panel(snippets.law_power(), shows={"needed": power["needed"], "said": power_said})


@st.cache_data(show_spinner=False, max_entries=2)
def _markov(mtime: float):
    table = markov.read_markov()
    return table, markov.markov_sentences(table), markov.markov_frame(table), markov.fit_line(table)


MARKOV_NOTE = (
    "**What am I looking at?** One dot per run and stage at the step its stage began: blue the unigram stage "
    "(the model's predictions nearest to the in-context token counts), vermillion the bigram stage (nearest to "
    "the in-context transition counts: the statistical induction head). The dots of one setting are moved a "
    "little sideways by stage and seed so that equal steps stay visible. A run that never reached the bigram "
    "stage within its cap is a triangle at the cap: it counts as later than the cap, never as missing. "
    "The pale bar spans each point's middle half of the seeds, the tick is the median; the dashed black curve "
    "is the least-squares line through the medians of the bigram onset on log-log axes, drawn here on linear "
    "ones.")


@st.cache_data(show_spinner=False, max_entries=2)
def _prior(mtime: float):
    table = markov.read_prior()
    return table, markov.prior_sentences(table), markov.prior_frame(table)


PRIOR_NOTE = (
    "**What am I looking at?** One row per training distribution, one dot per seed at its bigram onset, counted in "
    "training sequences seen that are not unigram-optimal (so on the last row the unigram-optimal quarter of each "
    "batch comes free, as on Edelman et al.'s axis). A run that never reached the bigram stage within its cap is a "
    "triangle at the cap. The pale bar is the 95% bootstrap interval of the median over the seeds, the tick the "
    "median. Whether two rows differ is read from the interval of the ratio of their medians, in the sentences "
    "above: two bars can overlap while that interval stays clear of 1. Every run is measured on the full "
    "Dirichlet prior's chains, whatever it trained on.")


def _runs_and_command(table, name: str) -> None:
    """A Markov table's every run (in an expander) and the command that measured it."""
    with st.expander(f"Every run of the {name.removesuffix('.csv').replace('_', ' ')} table"):
        st.dataframe(table.table.drop(columns=["cpu", "code", "run_id"], errors="ignore"), hide_index=True,
                     width="stretch")
    st.caption("The command that measured the table, run from a copy of the lab's repository:")
    st.code(table.command, language="bash")


def prior_part() -> None:
    """The same preset on other chains (checkpoints/laws/markov_prior.csv): does the unigram solution delay the
    bigram one? Nothing when the table is not installed."""
    path = markov.PRIOR_FILE
    if not path.is_file():
        return
    try:
        table, said, runs = _prior(path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/markov_prior.csv cannot be read: {e}")
        return
    st.markdown(
        "#### Stumbling block or stepping stone?\n"
        "Edelman et al. (2024) ask whether the unigram stage helps the model towards the bigram one or holds it "
        "up. They train on *doubly stochastic* chains, whose columns sum to 1 as well as their rows, so every state "
        "is equally frequent in the long run and counting single tokens is no better than guessing uniformly: no "
        "unigram solution on offer. Then they mix in *unigram-optimal* chains, whose next token ignores the current "
        "one, and count only the doubly stochastic sequences: if the bigram stage comes later, the unigram "
        "solution was in its way. The runs below repeat that with the lab's preset.")
    st.markdown("\n".join(f"- {x}" for x in said))
    draw(st, prior_chart(runs), width="stretch")  # full width: the rows' names take a third of it
    st.caption(PRIOR_NOTE)
    python_panel(law_markov_prior(), shows={"onset": runs["y"], "said": said})
    _runs_and_command(table, markov.PRIOR_FILE.name)


def markov_section(advanced: bool = True) -> None:
    """The Markov-chain stage onsets against one setting: sentences, chart, every run, command (the chart and
    its introduction alone when not `advanced`)."""
    st.subheader("Markov chains: when the unigram and bigram stages begin")
    path = markov.MARKOV_FILE
    if not path.is_file():
        st.info("Not measured yet: checkpoints/laws/markov.csv is not installed with this copy of the lab.")
        return
    try:
        table, said, runs, line = _markov(path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"checkpoints/laws/markov.csv cannot be read: {e}")
        return
    st.markdown("**Takeaway:** on sequences from random Markov chains, Edelman et al. (2024) saw a model first count "
                f"single tokens ({link('unigram strategy')}), then what follows the current one "
                f"({link('bigram strategy')}); the chart shows when each stage began in the lab's runs.")
    st.markdown(
        "The second task of the lab (Train page: Markov chains): every sequence comes from its own Markov chain, "
        "its transition rows drawn afresh from a Dirichlet prior, so the only way to predict well is to count in "
        "context. Edelman et al. (2024) find that a 2-layer attention-only transformer passes through stages: "
        "uniform, then unigram (predicting from how often each token has occurred), then bigram (from how often "
        "each token has followed the current one). Each run below is the lab's 2-block Markov preset with one "
        f"setting changed, the {table.axis_name}, and records when each stage began. More states means more "
        "transitions to count from the same 100 tokens.")
    if advanced:
        st.markdown("\n".join(f"- {x}" for x in said))
    chart, note = st.columns([3, 2])
    draw(chart, markov_chart(runs, line, table.axis_name), width="stretch")
    note.caption(MARKOV_NOTE)
    if not advanced:
        return
    python_panel(law_markov(), shows={"onset": runs["y"], "said": said})
    _runs_and_command(table, markov.MARKOV_FILE.name)
    prior_part()
