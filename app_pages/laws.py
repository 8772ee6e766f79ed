"""Laws of the drop: how the drop step moves with context, batch and vocabulary over many seeds, set beside
the published predictions; the clamps; the Causal page's readings over training seeds. Reads the shipped
tables (checkpoints/laws/, core.laws), and a small sweep of the student's own, trained through the
server's training pool like the Train page's runs (core.series.page_sweep)."""
import pandas as pd
import streamlit as st

from core.laws import clamps, drop, readings, stats
from core.pool.status import RunStatus
from core.quiz import laws as quiz_laws
from core.series import page_sweep as ps
from core.training.config import LOG_SEQS, TrainConfig
from core.training.transition import STUDY_FILE
from ui import laws_sections, layout, snippets
from ui.charts.kept import draw
from ui.charts.laws import clamps_chart, law_chart
from ui.glossary import link
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.training import capacity, follow_series, run_pool, session_owner

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
        "in steps. The two disagree in sign, but neither measured this setting: Musat et al.'s bound is "
        "asymptotic, for their modified architecture and task; Aoyama et al. vary B and C at fixed data "
        "statistics, counting tokens. Here the patterns lengthen with N, so the task changes along the axis, "
        "and the sweep measures TinyCharLM's own slope for this scaling rather than telling the two apart."),
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
    "vocab": None,  # vocab_note(): its numbers are computed from the vocab table's settings
}

QUIZ_LAW = "batch"  # the law whose section asks first (its direction is clear on the shipped table)
ADVANCED = "lw_advanced"  # the researcher view's toggle: statistics, commands, every run, the extra studies
CHART_NOTE = (
    "**What am I looking at?** One dot per training run (seed) at its drop step: the first measured step "
    "with later-copy loss below ln V / 2. A run that never dropped within its steps is a triangle drawn at "
    "the cap; it counts as later than the cap, never as missing. The grey bar spans each point's middle half "
    "of the seeds (25% to 75%), the black tick is the median. The solid line is the least-squares line "
    "through the medians on log-log axes; the dashed ones have the predicted slopes, drawn through the "
    "middle of the fit so their steepness can be compared.")


def vocab_note() -> str:
    """The vocab chart's note, its numbers (the drop threshold, how often a token repeats inside a pattern)
    computed from the vocab table's settings (core.laws.drop.vocab_effects)."""
    eff = drop.vocab_effects()
    lo, hi = eff[min(eff)], eff[max(eff)]
    return (
        "**Vocabulary size.** V symbols to copy: the later-copy loss starts from ln V, and the drop is where it "
        "falls below half of that. Singh et al. (2024), who took induction circuits apart by clamping their parts "
        "during training, report the transition coming later as the number of labels grows; they give a "
        "direction, not a power, so the question is only whether the slope is above 0. V is not their number of "
        f"labels, though: it also moves the drop's threshold (ln V / 2 is {lo['threshold']:.2f} nats at V = "
        f"{min(eff)}, {hi['threshold']:.2f} at V = {max(eff)}) and how often a token repeats inside a pattern (a "
        f"share {lo['repeats']:.2f} of a pattern's positions hold a token that occurs there more than once at V = "
        f"{min(eff)}, {hi['repeats']:.2f} at V = {max(eff)}; such a token has two successors to choose from). "
        "Reddy (2023) traces the abrupt emergence of an induction head in a related in-context classification "
        "task to nested nonlinearities learned one after another, and relates whether in-context learning wins to "
        "the data's statistics, the number of classes among them.")


@st.cache_data(show_spinner=False, max_entries=8)
def _law(name: str, mtime: float):
    law = drop.LAWS[name]
    result = drop.read_law(law.path, law)
    runs, lines = drop.chart_frames(result)
    return result, runs, lines, drop.sentences(result)


@st.cache_data(show_spinner=False, max_entries=4)
def _sweeps_caption(tables: tuple) -> str:
    """drop.sweeps_caption() of the tables as they are: (name, mtime) of each, so a new table is read again."""
    return drop.sweeps_caption()


@st.cache_data(show_spinner=False, max_entries=4)
def _groups(path: str, column: str, mtime: float) -> dict:
    return stats.groups(path, column)


def law_section(name: str, advanced: bool) -> None:
    law = drop.LAWS[name]
    st.subheader(TITLES[name])
    if not law.path.is_file():
        st.info(f"Not measured yet: the {law.axis_name} sweep's table is not installed with this copy of the lab.")
        return
    try:
        result, runs, lines, said = _law(name, law.path.stat().st_mtime)
    except ValueError as e:
        st.warning(f"The {law.axis_name} sweep's table cannot be read as a law: {e}")
        return
    if name == QUIZ_LAW and not ask(quiz_laws.drop_direction(result), hides="this sweep's chart and numbers"):
        return
    line = quiz_laws.takeaway(result)
    if line:
        st.markdown(f"**Takeaway:** {line}")
    if advanced:
        st.markdown("\n".join(f"- {s}" for s in said))
    chart, note = st.columns([3, 2])
    draw(chart, law_chart(runs, lines, law.axis_name), width="stretch")
    note.markdown(NOTES[name] or vocab_note())
    if not advanced:
        return
    note.caption(CHART_NOTE)
    python_panel(snippets.law_sweep(name), shows={"fit": [result.fit.slope, result.fit.low, result.fit.high]
                                                  if result.fit else [], "drop": runs["y"], "lines": lines["y"],
                                                  "said": said})
    st.caption("The command that measured this table, run from a copy of the lab's repository (it resumes: "
               "finished runs are kept):")
    st.code(result.command, language="bash")
    with st.expander(f"Every run of the {law.axis_name} sweep"):
        st.dataframe(runs.drop(columns=["y"]), hide_index=True, width="stretch")


def depth_and_start_section() -> None:
    st.subheader("Depth and the initial embedding")
    lines = []
    if STUDY_FILE.is_file():
        for blocks, point in _groups(str(STUDY_FILE), "blocks", STUDY_FILE.stat().st_mtime).items():
            lines.append(stats.group_sentence(f"{blocks} block{'s' if blocks > 1 else ''} (the transition study)",
                                             point))
    init = stats.LAWS_DIR / "init.csv"
    if init.is_file():
        names = {"shared": "Enlarged start (the default)", "plain": "Plain start"}
        for value, point in _groups(str(init), "init", init.stat().st_mtime).items():
            lines.append(stats.group_sentence(f"{names.get(value, value)}, 2 blocks", point))
    if not lines:
        st.info("Not measured yet: neither the transition study nor checkpoints/laws/init.csv is installed.")
        return
    st.markdown("\n".join(f"- {s}" for s in lines))
    two = _two_blocks(tuple((p.name, p.stat().st_mtime) for p in sorted(stats.LAWS_DIR.glob("*.csv"))))
    st.markdown(
        "One block has no second layer to read what a previous-token head wrote, so it cannot build the "
        "induction circuit (Olsson et al., 2022) and its later-copy loss stays near ln V. " + two + " The "
        "*enlarged* start (the lab's default) multiplies the initial embedding by 3 and adds one shared direction "
        "to every row; the *plain* start is the textbook one, trained here as "
        "long as the other sweeps' runs, and its plateau outlasts that cap.")
    if STUDY_FILE.is_file() and (stats.LAWS_DIR / "init.csv").is_file():
        python_panel(snippets.law_depth_and_start(), shows={"said": lines, "two_blocks": two})


@st.cache_data(show_spinner=False, max_entries=4)
def _two_blocks(tables: tuple) -> str:
    """drop.two_block_sentence() of the tables as they are ((name, mtime) of each)."""
    return drop.two_block_sentence()


@st.cache_data(show_spinner=False, max_entries=2)
def _clamps(mtime: float):
    return clamps.clamp_sentences(), clamps.clamp_frame(), stats.table_command(clamps.CLAMPS_FILE)


@st.cache_data(show_spinner=False, max_entries=2)
def _readings(mtime: float):
    return readings.readings_sentences(), stats.table_command(readings.READINGS_FILE)


def clamps_section() -> None:
    st.subheader("Clamps")
    path = clamps.CLAMPS_FILE
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
        "learns around it. Their *layer-1 clamp* replaces the first layer as a whole: the second layer's "
        "patterns are computed from a residual stream that holds each position's previous token, and its values "
        "from the embeddings alone. The two clamps run here are narrower, one head each. The **held "
        "previous-token head** is the lab's hold (Train page, Training experiments): one block-1 head's pattern "
        "sits on the previous token, the counterpart of their one-head previous-token clamp, while the other "
        "block-1 heads train as usual. The **induction clamp** gives a block-2 head the ideal induction pattern, "
        "computed from the tokens: each position attends to the positions just after earlier copies of its own "
        "token (a position with none attends to itself), the counterpart of their induction-head clamp. The "
        "clamped head's queries and keys then get no gradient; its values and output still learn. The "
        "later-copy loss that defines the drop is measured on the clamped model.")
    st.markdown("\n".join(f"- {s}" for s in said))
    draw(st, clamps_chart(runs), width="stretch")
    python_panel(snippets.law_clamps(), shows={"drop": runs["y"], "said": said})
    st.caption("One dot per seed at its drop step; grey bar: the middle half of the seeds, black tick: the median. "
               "The comparison with no clamp resamples the seeds, each seed's runs in both arms together; the last "
               "sentence sets the result against Singh et al.'s.")
    st.caption("The command that measured this table (it resumes: finished runs are kept):")
    st.code(command, language="bash")


def readings_section() -> None:
    st.subheader("Replication of the circuit readings across seeds")
    path = readings.READINGS_FILE
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
    python_panel(snippets.law_readings(), shows={"said": said})
    st.caption("The command that measured this table (it trains each seed again, reads the model, and keeps only "
               "the readings):")
    st.code(command, language="bash")


SWEEP = "lw_sweep"  # this session's PageSweep (not a widget key: it outlives a visit to another page)
SWEEP_COLUMNS = {"value": "value", "seed": "seed", "status": "status", "steps_run": "steps", "drop_step": "drop step",
                 "final_loss_later": "final later-copy loss"}


def _start_sweep() -> None:
    old = st.session_state.get(SWEEP)
    if old is not None and old.active:
        return
    setting = st.session_state["lw_sw_setting"]
    try:
        specs = ps.sweep_settings(setting, st.session_state.get(f"lw_sw_values_{setting}", []),
                                  int(st.session_state["lw_sw_seeds"]), int(st.session_state["lw_sw_steps"]))
    except ValueError as e:
        st.session_state["lw_sw_error"] = str(e)
        return
    st.session_state[SWEEP] = ps.PageSweep(run_pool(), specs, setting, f"{session_owner()}|sweep").start()


def _stop_sweep() -> None:
    if (sweep := st.session_state.get(SWEEP)) is not None:
        sweep.cancel()


def _sweep_progress(sweep: ps.PageSweep) -> None:
    n, name = len(sweep.specs), ps.NAMES[sweep.setting]
    run = sweep.current
    if sweep.active and run is not None:
        spec = run.settings
        where = ("waiting for your own Train-page run to end (a session trains one run at a time)"
                 if run.status == RunStatus.WAITING and run.blocked
                 else f"waiting for a free training slot (place {run.position} in line)"
                 if run.status == RunStatus.WAITING else f"step {run.step} of {run.total_steps}")
        st.progress(min((sweep.done + run.step / max(run.total_steps, 1)) / n, 1.0),
                    text=f"Run {sweep.done + 1} of {n} ({name} {getattr(spec, sweep.setting)}, seed {spec.seed}): "
                         f"{where}. {sweep.done} done, {sweep.queued} queued.")
    elif sweep.active:
        st.progress(sweep.done / n, text=f"{sweep.done} of {n} runs done, {sweep.queued} queued.")
    elif sweep.cancelled.is_set() and sweep.done < n:
        st.warning(f"Stopped after {sweep.done} of {n} runs; the results below are those runs'.")


def _sweep_results(sweep: ps.PageSweep) -> None:
    results = list(sweep.results)  # once: the sweep's thread appends to it while this draws
    if not results:
        return
    frame = pd.DataFrame(results)[list(SWEEP_COLUMNS)].rename(columns=SWEEP_COLUMNS)
    st.dataframe(frame.rename(columns={"value": ps.NAMES[sweep.setting]}), hide_index=True, width="stretch",
                 column_config={"final later-copy loss": st.column_config.NumberColumn(format="%.3f")})
    for r in results:
        if r["error"]:
            st.error(f"{ps.NAMES[sweep.setting]} {r['value']}, seed {r['seed']}: {r['error']}")
    if sweep.active:
        return
    result, said = sweep.outcome()
    st.markdown("\n".join(f"- {s}" for s in said))
    if result is None:
        return
    runs, lines = drop.chart_frames(result)
    chart, note = st.columns([3, 2])
    draw(chart, law_chart(runs, lines, result.law.axis_name, height=300), width="stretch")
    note.caption(CHART_NOTE)


def own_sweep_section() -> None:
    st.subheader("Run a small sweep yourself")
    st.markdown(
        f"Vary one setting over {ps.MIN_VALUES} or {ps.MAX_VALUES} of the tables' values, with {ps.MIN_SEEDS} or "
        f"{ps.MAX_SEEDS} seeds each: at most {ps.MAX_RUNS} runs of at most {ps.MAX_STEPS} steps. The cap is there "
        "because this machine is shared: the runs take the server's training slots one after another, like the "
        "Train page's (a session trains one run at a time, and every student waits in the same line), while the "
        "tables above took hundreds of runs on a machine of their own. "
        f"Up to step {ps.MAX_STEPS} your runs train as the tables' runs of the same seeds (seeds 0, 1, 2; the "
        f"tables hold the learning rate for their first {ps.MAX_STEPS} steps, and so do these), so a drop after "
        f"step {ps.MAX_STEPS} counts as \"later than the cap\" here. Each run logs every {ps.LOG_EVERY} steps, so a "
        f"drop step is read to {ps.LOG_EVERY} steps, as in the tables, but on the first {LOG_SEQS} sequences of the "
        f"fixed evaluation batch where the tables read all {TrainConfig().eval_size}: the same training can cross "
        "ln V / 2 one log earlier or later here. Everything else is the default 2-block "
        "preset. The sweep goes on while you visit other pages; only the drop steps are kept, not the models.")
    sweep = st.session_state.get(SWEEP)
    running = sweep is not None and sweep.active
    off = capacity() == 0
    a, b, c, d = st.columns([2, 3, 1, 1])
    setting = a.radio("Vary", list(ps.CHOICES), format_func=ps.NAMES.get, key="lw_sw_setting",
                      disabled=running)
    defaults = {"batch_size": [16, 32, 64]}
    b.multiselect(f"Values of {ps.NAMES[setting]}", ps.CHOICES[setting],
                  default=defaults.get(setting, list(ps.CHOICES[setting])), key=f"lw_sw_values_{setting}",
                  disabled=running)
    c.radio("Seeds", list(range(ps.MIN_SEEDS, ps.MAX_SEEDS + 1)), key="lw_sw_seeds", disabled=running)
    d.number_input("Steps", ps.MIN_STEPS, ps.MAX_STEPS, ps.MAX_STEPS, step=10, key="lw_sw_steps", disabled=running)
    try:
        specs = ps.sweep_settings(setting, st.session_state.get(f"lw_sw_values_{setting}", []),
                                  int(st.session_state["lw_sw_seeds"]), int(st.session_state["lw_sw_steps"]))
        problem = None
    except ValueError as e:
        specs, problem = [], str(e)
    if problem:
        st.error(f"This sweep cannot be trained: {problem}")
    if off:
        st.info("Training is switched off on this server (ATTENTION_LAB_MAX_TRAININGS=0).")
    row = layout.button_row()
    row.button(f"Train these {len(specs)} runs" if specs else "Train", type="primary", on_click=_start_sweep,
              disabled=bool(problem) or running or off, key="lw_sw_start")
    row.button("Stop", on_click=_stop_sweep, disabled=not running, key="lw_sw_stop",
              help="End the run in progress (nothing of it is kept) and start no further run.")
    if error := st.session_state.pop("lw_sw_error", None):
        st.error(error)
    if sweep is not None:
        values = sorted({getattr(s, sweep.setting) for s in sweep.specs})
        st.caption(f"Your sweep: {ps.NAMES[sweep.setting]} {', '.join(map(str, values))} × seeds "
                   f"{', '.join(map(str, sorted({s.seed for s in sweep.specs})))}, {sweep.specs[0].steps} steps each.")
    st.fragment(run_every=1.0 if running else None)(_sweep_live)()


def _sweep_draw(sweep: ps.PageSweep) -> None:
    _sweep_progress(sweep)
    _sweep_results(sweep)


def _sweep_live() -> None:
    follow_series(SWEEP, "lw_sw_drawn_active", _sweep_draw)


st.markdown(
    "**In one line:** train the same model many times, changing one setting at a time, and see whether "
    f"{link('the drop')} (the sudden fall of the {link('later-copy loss')}) comes earlier or later. Three published "
    "results make predictions you can check here. Every number on this page is read from sweep runs shipped with "
    "the lab, several training seeds for each setting: nothing trains when you open it.")
advanced = st.toggle("Researcher view", key=ADVANCED,
                     help="Also show each sweep's statistics (fits, bootstrap intervals, rank correlations), every "
                          "run, the commands that measured the tables, and the studies of stages, statistical power, "
                          "clamps and the circuit readings over seeds.")
if advanced:
    st.caption(_sweeps_caption(tuple((p.name, p.stat().st_mtime) for p in sorted(stats.LAWS_DIR.glob("*.csv")))))
for name in drop.LAWS:
    law_section(name, advanced)
if advanced:
    laws_sections.stages_section()
    laws_sections.power_section()
laws_sections.markov_section(advanced)
own_sweep_section()
depth_and_start_section()
if advanced:
    clamps_section()
    readings_section()
else:
    st.caption("The **Researcher view** (the switch at the top) adds each sweep's statistics and every run, the "
               "onset, drop and completion of constant-rate runs, how many seeds a slope needs, the Markov runs on "
               "other chains, clamped circuits, and the Causal page's readings repeated over training seeds.")
