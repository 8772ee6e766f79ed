"""Attention: every head's pattern on a task sequence or your own text, the head scores, the offset-mass
profile and the period-shift probe."""
import streamlit as st

from core.model import symbols
from core.model.symbols import MAX_TEXT_LEN, describe_alphabet
from core.model.task import DEFAULT_PERIOD
from core.quiz import questions as quiz
from core.reading import views
from core.reading.probes import probe_periods
from ui import share, snippets
from ui.cache import per_model
from ui.charts import attention as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.layout import chart_and_note, chart_pair
from ui.pins import pinnable, pinned
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import LabModel
from ui.steps import heads_at_step

entry = heads_at_step("att")  # every number below is this step's
task, cfg = entry.task, entry.info["config"]


@per_model(name="attention.task_view", show_spinner="Running the model…", max_entries=64)
def task_view(entry: LabModel, period: int, seed: int) -> views.SequenceView:
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.task_sequence_view(entry.model, entry.task, period, seed)


@per_model(name="attention.text_view", show_spinner="Running the model…", max_entries=64)
def text_view(entry: LabModel, text: str) -> views.SequenceView:
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.text_view(entry.model, text)


@per_model(name="attention.sweep", show_spinner="Probing every period…", max_entries=16)
def sweep(entry: LabModel):
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.sweep_view(entry.model, entry.task)


@per_model(name="attention.probe", show_spinner=False, max_entries=64)
def probe(entry: LabModel, period: int) -> dict:
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.probe_view(entry.model, entry.task, period)


st.markdown(
    "Each head decides, for every position *i* (the query), how to split one unit of attention over "
    "the positions *j ≤ i* before it (the keys). Pick a sequence, then read the patterns: a line just "
    "below the diagonal is a previous-token head; a stripe that starts with the second copy, one step "
    "right of the period, is an induction head (Elhage et al. 2021; Olsson et al. 2022).")

lo, hi = probe_periods(task)
c1, c2, c3 = st.columns([1.1, 1.4, 1])
modes = share.SEQ_MODES["attention"]  # link value -> the radio option
source = c1.radio("Sequence", list(modes.values()), key="att_source")
view, period, seed, text = None, None, None, None
if source == modes["task"]:
    default = min(max((task.period_min + task.period_max) // 2, lo), hi)
    period = c2.slider("Period L", lo, hi, default, key="att_period",
                       help=f"The model was trained on periods {task.period_min}–{task.period_max}.")
    seed = c3.number_input("Sample seed", 0, share.SEED_MAX, 0, key="att_seed")
    view = task_view(entry, int(period), int(seed))
else:
    text = c2.text_input("Your sequence", "the cat sat. the cat sat. the cat sat.", key="att_text")
    c2.caption(f"One character = one token, in the order {describe_alphabet(cfg.vocab_size)} "
               f"(a = token 0, … '.' = token {cfg.vocab_size - 1}); at most {MAX_TEXT_LEN} characters. "
               "Repeat a phrase to give induction heads something to find.")
    try:
        view = text_view(entry, text)
    except symbols.InputProblem as e:
        st.warning(str(e))
weighted = c3.radio("Show", ["raw attention", "value-weighted"], key="att_weighting",
                    help="Value-weighted: each weight times ‖v_j W_O‖, the size of what key j writes, "
                         "then renormalised per row.") == "value-weighted"

shown = True  # the questions below answered or skipped (typed text that cannot be read asks nothing)
if view is not None:
    patterns = view.weighted if weighted else view.raw
    shown = ask(quiz.previous_token_head(view.scores, view.intervals), hides="the patterns and scores below")
    shown &= ask(quiz.induction_target(view.scores, lambda l, h: view.raw[l, h], view.labels, view.period,
                                       cfg.n_layers), hides="the patterns and scores below")
    if shown:
        st.subheader("Every head")
        st.markdown(f"**A {link('previous-token head')} draws a line just below the diagonal; an "
                    f"{link('induction head')} a stripe one step right of the {link('period')}.**")
        st.caption("**What am I looking at?** One heatmap per head (rows: blocks, columns: heads). In each, row *i* "
                   "is a query position and column *j* a key; brighter = more attention. Above the diagonal is the "
                   "future, which a causal head cannot see. Weights under 0.01 are not drawn. Click a row (or a "
                   "token in the strip below) to pin that query in every head: the bars show where the heads send "
                   "it, their mean, summed over the queries pinned (shift-click adds one; a click on empty space "
                   "releases; hover to preview). The pin stays when you change the head or the model, and a "
                   "link carries it. "
                   + ("Value-weighted view: attention to a position that writes little is dimmed (Elhage et al. 2021), "
                      "so a head that parks its attention somewhere harmless fades out." if weighted else ""))
        pin = pinned("att_pin", len(view.tokens))
        pinnable(charts.pattern_grid(patterns, view.labels, pin), "att_grid_pin", "query", "att_pin", "attention")

        st.subheader("One head, up close")
        labels = symbols.head_labels(cfg.n_layers, cfg.n_heads)
        pick = st.columns([1, 3])[0].selectbox("Head (block.head)", labels, key="att_head",
                                               index=min(len(labels) - 1, cfg.n_heads))
        layer, head = symbols.parse_head_label(pick)
        left, right = chart_and_note()  # side by side where both fit, the note below where not
        with left:
            pinnable(charts.head_heatmap(patterns[layer, head], view.labels, view.predicted, view.period, pin,
                                         pinned("att_keys", len(view.tokens))),
                     "att_head_pin", "qi", "att_pin", "attention", keys=("kj", "att_keys"))
        right.caption(
            "**What am I looking at?** The same pattern with each position's token on the axes (position · "
            "character, ␣ = space). Hover a cell for the query and key tokens, the weight and the model's "
            "guess for the token after the query. "
            + (f"Outlined cells mark j = i + 1 − L (L = {view.period}): the token that came right after the "
               "previous occurrence of the query's token, which is what an induction head should look at."
               if view.period else ""))
        right.markdown(f"**Sequence** ({len(view.tokens)} tokens):")
        right.code("".join(view.labels), language=None, wrap_lines=True)
        python_panel(snippets.attention_pattern(entry, period, seed, text, pick, weighted),
                     shows={"pattern": patterns[layer, head]})

        st.subheader("Head scores")
        st.markdown("**Each score is the share of a head's attention that lands where one kind of head would look.**")
        score_cols = [c for c in view.scores.columns if c not in ("label", "layer", "head")]
        tok_labels = {"tok_previous_token": ("tok_prev", "the previous token"),
                      "tok_duplicate_token": ("tok_dup", "an earlier copy of the same token"),
                      "tok_induction": ("tok_ind", "the token after an earlier copy"),
                      "tok_first_token": ("tok_first", "position 0")}
        st.dataframe(charts.styled_scores(view.scores.drop(columns=["layer", "head"]), score_cols), hide_index=True,
                     width="stretch", column_config={
                         c: st.column_config.Column(label, help=f"{c}: the share of the head's attention on {what}")
                         for c, (label, what) in tok_labels.items()})
        if view.intervals is not None and len(view.intervals):
            with st.expander(f"95% intervals over the {view.n_seqs} sequences (bootstrap)"):
                iv = view.intervals
                st.dataframe({"head": iv["label"],
                              **{name: [f"{a:.2f} – {c:.2f}" for a, c in zip(iv[f"{name}_low"], iv[f"{name}_high"])]
                                 for name in ("prev_token", "induction_any")}}, hide_index=True)
                st.caption("Each sequence's own score, resampled 1000 times with replacement (fixed seed) and pooled "
                           "as the table above pools them. The previous-token question counts a head as the answer "
                           "only when its interval lies above every other head's.")
        st.download_button("Download the scores (CSV)", view.scores.to_csv(index=False).encode(),
                           file_name=f"head_scores_{'L' + str(view.period) if view.period else 'text'}.csv",
                           mime="text/csv", key="att_csv")
        period_text = (
            f"Averaged over {view.n_seqs} sampled sequences of period L = {view.period} (the one above is the first). "
            "**prev_token** = mean A[i, i−1]; **induction** = mean A[i, i+1−L] over later copies (i ≥ L), the "
            "token after the latest earlier copy; **induction_any** = the same summed over every earlier copy, "
            "A[i, i+1−L] + A[i, i+1−2L] + …, which is what counts as an induction head here (with several "
            "copies in a sequence, induction heads also read older ones); **duplicate** = mean A[i, i−L]; "
            "**first_token** = mean A[i, 0] (a resting place, or *sink*: Xiao et al. 2023); **self** = mean "
            "A[i, i] over i ≥ 1 (position 0 can only attend to itself). " if view.period
            else "Scores of the sequence you typed. ")
        st.caption(
            "**What am I looking at?** One row per head, sort by clicking a column; colours run from dark (0) to "
            "yellow (1): the share of each head's attention where one kind of head would look.")
        st.expander("How each score is computed").caption(
            period_text + "The tok_ columns (tok_prev, tok_dup, tok_ind, tok_first, tok_self) need no period: "
            "token-based detectors, the share of all the head's attention that "
            "lands where the archetype would look. Three are TransformerLens's (previous token; an earlier copy of "
            "the same token; the token after an earlier copy); two are ours, scored the same way (position 0; "
            "itself). Rows with nothing to find count as 0, so tok_ind stays below 1 even for a perfect "
            "induction head. Scores use the raw pattern.")
        python_panel(snippets.attention_scores(entry, period, seed, text), shows={"scores": view.scores[score_cols]})

        st.subheader("Attention by offset")
        st.markdown("**A head's favourite distance back shows as a peak: 1 for a previous-token head, L − 1 for an "
                    "induction head.**")
        max_k = min(len(view.tokens) - 1, 2 * (view.period or task.period_max) + 2)
        draw(st, charts.offset_chart(view.offsets, view.period, max_k), width="content")
        st.caption(
            "**What am I looking at?** For each offset k, the mean weight a head puts k positions back, A[i, i−k]. "
            "A previous-token head peaks at k = 1. An induction head peaks at k = L − 1 (dashed), the position "
            "after the previous copy of the current token, and again at 2L − 1, 3L − 1 … for older copies; a "
            "duplicate-token head at k = L (dotted). Offsets up "
            f"to {max_k} are shown (far back, few queries remain and the curves get noisy).")
        python_panel(snippets.attention_offsets(entry, period, seed, text), shows={"mass": view.offsets["mass"]})

st.subheader("The period-shift probe")
st.markdown("**A look-up follows the period wherever it goes; a fixed offset works only at the periods it fits.**")
st.markdown(
    "Does the model *look up* the next token, or has it learned to copy from a fixed distance back? "
    "Evaluate it on sequences of one period at a time, including periods it never saw. A lookup keeps "
    "working when the period moves; a fixed offset works only where it happens to fit.")
sw = sweep(entry)
probe_period = st.slider("Probe period", lo, hi, min(max(DEFAULT_PERIOD, lo), hi), key="att_probe")
pr = probe(entry, int(probe_period))
m = pr["metrics"]
a, b, c = st.columns(3)
a.metric("second-copy accuracy", f"{m['acc_second_copy']:.2f}")
b.metric("later-copy accuracy", f"{m['acc_later_copies']:.2f}")
c.metric("later-copy loss (nats)", f"{m['loss_later_copies']:.2f}")
p1, p2 = chart_pair()
draw(p1, charts.sweep_chart(sw, task.period_min, task.period_max, 1 / cfg.vocab_size, int(probe_period)),
                width="stretch")
p1.caption("**What am I looking at?** Accuracy on the second and later copies when every sequence has the "
           "period on the x-axis; grey band: the periods seen in training; dotted line: chance 1/V; red: "
           "the probe period chosen above.")
if shown:  # each head's attention at the lookup offset answers the induction question above
    draw(p2, charts.probe_mass_chart(pr["mass"]), width="stretch")
    p2.caption(f"**What am I looking at?** At probe period {probe_period}, each head's mean attention at offset "
               f"{probe_period - 1} (where a lookup must look) and at the offsets L − 1 of the shortest and longest "
               "training periods (where a fixed-offset rule would keep looking).")
else:
    p2.caption("Each head's attention at the offset a lookup needs shows here once you answer or skip the questions "
               "above: it would give the second one away.")
python_panel(snippets.period_probe(entry, int(probe_period)),
             shows={"metrics": [m["acc_second_copy"], m["acc_later_copies"], m["loss_later_copies"]],
                    "mass": pr["mass"]["mass"]})
