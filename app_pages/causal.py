"""Causal experiments: activation patching, path patching and the logit lens on the picked model."""
from functools import partial

import numpy as np
import streamlit as st

from core.causal import readings
from core.causal.results import POSITION_BUDGET
from core.model.symbols import block_label, describe_alphabet
from core.quiz import causal as quiz_causal
from ui import causal_sections as sections
from ui import numbers, share, snippets
from ui.cache import per_model
from ui.charts import causal as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.layout import chart_pair
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import LabModel, require_model

N_SEQS = sections.N_SEQS
DEFAULT_TEXT = "induction " * 3
SMALL_GAP = readings.MIN_GAP  # nats: below this M(clean) - M(corrupted) is too small for ratios to mean much
BLANK = 0.02  # a row of the position sweep whose every cell is within ±BLANK reads as blank
PATH_NAMES = {"q": "query", "k": "key", "v": "value"}
ADVANCED = "cz_advanced"  # the researcher view's toggle: method detail, statistics and the extra checks
CORRUPTION_LABELS = {"first-copy": "first copy replaced by a fresh pattern",
                     "resample": "resample: another sequence of the same period"}


@per_model(name="causal.mechanism",
           show_spinner="Path patching at every snapshot of the run (a few seconds)…", max_entries=8)
def _mechanism(entry: LabModel, period: int, seed: int, corruption: str) -> object:
    from core.causal import experiments  # imported in the view: it imports torch

    return experiments.mechanism_over_training(entry.model, entry.full_info, period, N_SEQS, seed, corruption)


entry = require_model()
task, cfg = entry.info["task"], entry.info["config"]
st.markdown(
    "**In one line:** run the model on an input it gets right and on one it gets wrong, copy one piece of the "
    "right run into the wrong one, and see how much of the right answer comes back. That finds the heads and "
    f"paths that carry the induction circuit's answer ({link('activation patching')}; Vig et al., 2020; Meng et "
    "al., 2022; Wang et al., 2022).")
st.markdown(
    "The **clean** run is a task sequence: a pattern and its copies, which the model can predict from the "
    "first copy. The **corrupted** run is one where the first copy no longer tells it the answer. **M** is the "
    "mean log-probability the model gives the right token over the second copy. A **patch effect** says how much "
    "of the gap between the two runs one copied piece brings back: 1 all of it, 0 nothing, below 0 it made "
    "things worse:")
st.latex(r"\text{patch effect} = \frac{M(\text{patched}) - M(\text{corrupted})}{M(\text{clean}) - M(\text{corrupted})}")
with st.expander("The two corruptions and M, exactly"):
    st.markdown(
        "**First copy** replaces positions 0 … L−1 by a fresh random pattern and keeps the rest, so the second "
        "copy can no longer be read from the context. **Resample** runs another sequence of the same period in full "
        "(a fresh pattern repeated, Heimersheim & Nanda, 2024), so every position is drawn afresh, the second "
        "copy's queries included (it matches the clean token only by chance). The right token is always the clean "
        "one. M averages the right token's log-probability over the second-copy targets L+1 ≤ t < 2L; the target at "
        "t = L is left out, since even the clean run cannot know there that the pattern is about to repeat. "
        f"{link('ablation', 'Ablation')} asks what breaks when a head is removed from a run that works; patching "
        "asks what is enough to repair a run that fails.")
advanced = st.toggle("Researcher view", key=ADVANCED,
                     help="Also show each measurement's method in full, noising beside denoising, other metrics, "
                          "gradient estimates (attribution patching, AtP*, GradDrop), path patching position by "
                          "position, the circuit as a whole and the paths over training.")

modes = share.SEQ_MODES["causal"]  # link value -> the radio option
source = st.radio("Sequences", list(modes.values()), horizontal=True, key="cz_source")
corruption = st.radio("Corruption", list(task.corruptions), format_func=CORRUPTION_LABELS.get, horizontal=True,
                      key="cz_corruption",
                      help="First copy: only positions 0 … L−1 change, so a path that reads the second copy's "
                           "positions sees nearly the same input in both runs. Resample: the whole sequence changes.")
c1, c2 = st.columns(2)
period = text = None
sweeps = True if st.session_state.get("cz_sweeps") else None  # None: only where they are quick
try:
    if source == modes["task"]:
        start = min(max(2, (task.period_min + task.period_max) // 2), task.seq_len // 2)
        period = c1.number_input("Period L of every sequence", 1, task.seq_len, start, key=f"cz_period_{entry.key}",
                                 help=f"The model was trained on periods {task.period_min}–{task.period_max} in "
                                      f"sequences of {task.seq_len} tokens.")
        seed = c2.number_input("Sample seed", 0, share.SEED_MAX, 0, key="cz_seed")
        res = sections.first_part(entry, int(period), None, int(seed), corruption, advanced)
        what = f"{N_SEQS} sampled sequences of period {int(period)}"
    else:
        text = c1.text_input("A pattern followed by at least one full copy", DEFAULT_TEXT, key="cz_text",
                             help=f"One character = one token ({describe_alphabet(cfg.vocab_size)}).")
        seed = c2.number_input("Corruption seed", 0, share.SEED_MAX, 0, key="cz_seed")
        res = sections.first_part(entry, None, text, int(seed), corruption, advanced)
        what = (f"your sequence (period {res.period}) against {N_SEQS} random corruptions of its first copy"
                if corruption == "first-copy" else
                f"your sequence (period {res.period}) against {N_SEQS} random sequences of the same period")
except ValueError as e:
    st.warning(f"{e} Nothing to patch yet.")
    st.stop()

st.markdown("**First clean sequence** and **its corruption** " +
            ("(the first copy differs, everything after it is the same):" if corruption == "first-copy" else
             "(another sequence of the same period, whole):"))
st.code("clean:     " + "".join(res.clean) + "\ncorrupted: " + "".join(res.corrupted), language=None)
gap = res.gap
m1, m2, m3 = st.columns(3)
m1.metric("M(clean)", f"{res.m_clean:.3f}", help="Mean log-probability of the right second-copy token, clean run.")
m2.metric("M(corrupted)", f"{res.m_corrupted:.3f}", help="The same on the corrupted run.")
m3.metric("M(clean) − M(corrupted)", f"{gap:.3f}", help="The denominator of every patch effect on this page.")
st.caption(f"Measured now on {what}.")
read = partial(sections.reading, entry, None if period is None else int(period), text, int(seed), sweeps,
               POSITION_BUDGET, corruption, research=advanced)
snippet = partial(snippets.causal, entry, None if period is None else int(period), int(seed), text, N_SEQS, sweeps,
                  corruption=corruption)
python_panel(snippet("runs"), shows={"m": [res.m_clean, res.m_corrupted], "heads": res.heads["patch_effect"]})

if cfg.n_layers == 0:
    st.info("This model has **no attention blocks**: its logits are W_E[x] W_Eᵀ of the current token alone. "
            + ("The corrupted first copy cannot change any second-copy prediction, so M(clean) = M(corrupted) "
               "exactly and every patch effect is 0/0: there is nothing to patch." if corruption == "first-copy" else
               "Under resample the second copy's own tokens change too, so M(clean) and M(corrupted) differ only "
               "through the current token, and there is still no component to patch.")
            + " Only the logit lens below means something "
            "here: the embedding is the whole model.")
elif cfg.n_layers == 1:
    st.info("A **one-block** model cannot look up the token after an earlier occurrence: that needs a head whose keys "
            "read what a head in an earlier block wrote (see *What depth can express*). Whatever gap there is "
            "between the two runs here comes from other ways of reading the first copy: a head that attends a fixed "
            "distance back (which works only at the period it was trained on), or one that raises the logits of "
            "tokens seen earlier, since the right token is among them. Sections 1–3 and the logit "
            "lens show which head and which positions carry that; path patching needs two blocks.")
if cfg.n_layers and gap < SMALL_GAP:
    st.warning(f"M(clean) − M(corrupted) is only {gap:.3f} nats: this model hardly uses the first copy on these "
               "sequences, so every patch effect below is a ratio of small differences and mostly noise. Pick "
               "**variable-period-2block**, or a period the model was trained on.")

checks = {}
if cfg.n_layers:
    # -----------------------------------------------------------------------------------------
    st.header("1 · Which heads carry the answer")
    st.markdown("**Takeaway:** copy one head's clean output into the corrupted run: if the answer comes back, "
                "that head alone is enough to carry it.")
    heads = res.heads
    shown = ask(quiz_causal.patched_heads(heads, gap), hides="every head's patch effect")
    left, right = st.columns([1, 2]) if shown else (None, None)
    best = heads.loc[heads["patch_effect"].idxmax()] if heads["patch_effect"].notna().any() else None
    if shown:
        draw(left, charts.head_effects(heads, "each head's clean output, all positions"), width="content")
        right.markdown(
            "**Checks.** " + readings.checks_sentence(res, block_label(cfg.n_layers - 1))
            + (f" The largest single-head effect here is head {best['label']}: "
               f"{best['patch_effect']:.2f} (95% interval over {readings.interval_unit(res)} "
               f"{best['effect_low']:.2f} to {best['effect_high']:.2f})." if best is not None else ""))
        right.caption(
            "**What am I looking at?** One cell per head (block.head from 1): its output at every position is "
            "taken from the clean run and put into the corrupted run, with everything above it recomputed. "
            "**Unlike ablation**, which removes a head from a run that works, patching adds one clean piece to a "
            "run that fails: it finds what *suffices*, and a head that only acts together with others can score "
            "low. **Unlike attention weights**, this measures an effect on the output: a head can attend sharply "
            "and still score 0. Below 0, the clean piece mixed with the corrupted rest pushes towards a wrong "
            "token.")
if cfg.n_layers and advanced:
    sections.needed_or_enough(res, heads)
    sections.metric_section(res, read("metric_sentence"))
if cfg.n_layers:
    # -----------------------------------------------------------------------------------------
    st.header("2 · Where the answer sits: the residual stream, one position at a time")
    st.markdown(f"**Takeaway:** restore the clean {link('residual stream')} at one position and depth at a time "
                "to see where the answer is stored on its way to the output.")
    asked = None if period is None else int(period)  # section 1 is on screen: now the sweeps, with their spinner
    res = sections.with_sweeps(res, entry, asked, text, int(seed), sweeps, POSITION_BUDGET, corruption, advanced)
    if advanced:
        checks = sections.research_checks(entry, asked, text, int(seed), sweeps, POSITION_BUDGET, corruption)
    period = res.period
    if res.resid is None:
        slow = res.position_cost / POSITION_BUDGET
        st.info(f"Sections 2 and 3 patch one position at a time: on this model and sequence length that is about "
                f"{slow:.0f} times the work of the largest sweep the page runs by itself, which can take minutes "
                "on a shared server. The other sections are computed already.")
        st.button("Run the position sweeps anyway", key="cz_sweeps_button",
                  on_click=lambda: st.session_state.update(cz_sweeps=True))
if cfg.n_layers and res.resid is not None:
    rows = [f"before {block_label(l)}" for l in range(cfg.n_layers)]
    draw(st, charts.position_effects(res.resid, rows,
                                            "clean stream at one position, corrupted everywhere else",
                                            "stream", period, res.clean), width="content")
    st.caption(
        "**What am I looking at?** Row *before block l*, column p: the whole residual stream vector entering block l "
        "at position p alone comes from the clean run. Before block 1 the stream is just the token embedding, so a "
        "cell lights up only where the clean token itself matters. Rows further up show where the blocks below have "
        "moved information to. One position carries only a small share of the answer, so the colour scale "
        "runs to the largest value in the grid (see the legend). The dashed lines mark where the second (and third) "
        "copy starts. Positions past the "
        "last second-copy target cannot change M and stay at 0. **Unlike ablation**, this localises information "
        "in position and depth, not in a component; **unlike attention weights**, it says where the answer is "
        "*stored*, not where some head looks.")
    if res.resid_noise is not None and advanced:
        draw(st, charts.position_effects(res.resid_noise, rows,
                                                "noising: corrupted stream at one position, clean everywhere else",
                                                "stream", period, res.clean), width="content")
        noisy = res.resid_noise
        lo = np.unravel_index(np.nanargmin(noisy), noisy.shape)
        st.caption(
            "**Noising**, the same sweep the other way round (Heimersheim & Nanda, 2024): the corrupted stream at "
            "one position goes into the clean run. Near 1 nothing is lost there; near 0 that one position is "
            f"needed. The most needed single position here: {rows[lo[0]]}, position {lo[1]} "
            f"({noisy[lo]:.2f})."
            + (" Under the first-copy corruption the tokens from position L on are the same in both runs, so "
               "noising the stream before block 1 there changes nothing (exactly 1); choose resample to test those "
               "positions." if corruption == "first-copy" else ""))
    window = res.embedding_window
    if window is not None and abs(res.resid[0]).max() < BLANK:
        a, b = window["positions"][0], window["positions"][-1]
        st.markdown(
            f"**Why the row *before block 1* is blank** (every cell within ±{BLANK:g} here): no single restored "
            "token is enough. An induction head finds the token to copy at a key whose own token *and* the token "
            "(or, as section 4 shows for a head that looks two back, the tokens) before it are clean, so one clean "
            "position on its own restores nothing. Restoring positions "
            f"{a}–{b} together gives {window['effect']:.3f}; one of the L−1 second-copy targets is "
            f"{window['one_target']:.3f} of them.")

    # -----------------------------------------------------------------------------------------
    st.header("3 · Each head, one position at a time")
    st.markdown("**Takeaway:** the same, one head at a time: at which positions each head's write matters.")
    draw(st, charts.position_effects(res.head_positions, res.head_rows,
                                            "one head's clean output at one position", "head", period, res.clean),
                    width="content")
    st.caption(
        "**What am I looking at?** Row block.head, column p: that head's clean output at position p alone goes into "
        "the corrupted run (colour scale: the largest value in this grid). "
        + (read("position_sum_sentence") or "")
        + " A head in the last block can help only at positions whose next token is a second-copy target; a "
        "head in block 1 can help only where a later head reads it. **Unlike** an attention pattern, which shows "
        "where a head reads *from*, this shows at which position its *write* matters.")
    att = res.attribution
    if att is not None and advanced:
        said = read("attribution_sentence")
        st.markdown(
            "**Attribution patching** (Nanda, 2023; Syed et al., 2023) estimates this whole grid from one backward "
            "pass: (clean − corrupted output) · ∂M/∂output at the corrupted run, divided by the gap. "
            + (said or "The gap is too small here for the comparison to mean much.")
            + " " + (read("first_order_sentence") or ""))
        st.dataframe(numbers.table(att["sums"][["label", "exact_sum", "estimate_sum", "same_sign", "scale", "corr",
                                                "star_sum", "star_same_sign"]].rename(
            columns={"label": "head", "estimate_sum": "attribution, summed", "exact_sum": "exact, summed",
                     "same_sign": "same sign", "scale": "attribution / exact", "corr": "correlation over positions",
                     "star_sum": "AtP*, summed", "star_same_sign": "AtP* same sign"})),
            hide_index=True)
        star = read("atp_star_sentence")
        if star:
            st.markdown(star.replace("**AtP***", f"**{link('AtP*')}**", 1))
        sections.graddrop_section(checks["graddrop"], gap, snippet)
    python_panel(snippet("positions"), shows={"resid": res.resid, "heads": res.head_positions})

if cfg.n_layers:
    # -----------------------------------------------------------------------------------------
    st.header("4 · Path patching: one sender, one receiver, one input")
    if cfg.n_layers < 2:
        st.info("Path patching needs a head whose output another head reads: a **1-block** model has no such pair "
                "(every head writes straight to the logits). Pick **variable-period-2block** to see it.")
    else:
        paths = res.paths
        st.markdown(f"**Takeaway:** {link('path patching')} follows one sender head into one input of one receiver "
                    "head. An induction head should need the previous-token head through its **keys**, where it "
                    f"matches 'the token before me' ({link('K-composition')}).")
        st.markdown(
            "A head in a later block reads the stream through three inputs: its **query** (Q), its **keys** (K) and "
            "its **values** (V). Path patching changes what *one* receiver head sees through *one* of them, "
            "replacing *one* sender head's output, and leaves every other path as it was. **Noising** puts the "
            "sender's corrupted output into the clean run along that path: an effect near 0 means the path is "
            "**needed** (the clean performance is gone), near 1 that it is not. **Denoising** puts the sender's clean "
            "output into the corrupted run: near 1 means the path alone **suffices**. Column *2.all* patches the "
            "same path into every head of block 2 at once.")
        paths_shown = ask(quiz_causal.needed_key_path(paths, gap), hides="the path-patching charts")
        untestable = read("untestable_paths")
        senders = res.senders.set_index("sender")
        if untestable and paths_shown:
            listed = "; ".join(
                f"{PATH_NAMES[p]} rows of {', '.join(who)}" for p, who in untestable.items())
            shares = ", ".join(f"{s} {senders.loc[s, 'at_queries']:.0%}" for s in senders.index)
            st.info(f"**Rows this corruption cannot test: {listed}** (hidden below). A path can only show something "
                    "where the sender writes differently in the two runs. The first-copy corruption changes only "
                    "positions 0 … L−1, and a block-1 head at the second copy's query positions reads the last few "
                    f"tokens, which are the same in both runs: share of those positions where each sender's output "
                    f"moves by more than a tenth: {shares}. Choose **resample** to test them.")
        elif paths_shown:
            st.caption(f"Every row is testable with this corruption: each block-1 head's output differs between the "
                       f"runs at {senders['at_queries'].min():.0%} or more of the second copy's query positions "
                       f"and {senders['at_keys'].min():.0%} or more of the first copy's positions.")
        den = read("largest_denoising") if advanced else None
        if den is not None:
            top, low = den.loc[den["patch_effect"].idxmax()], den.loc[den["patch_effect"].idxmin()]
            if corruption == "first-copy":
                expect = ("With this corruption the right token sits only in the clean first copy, and a head that "
                          "copies it reads it through its **values**. A denoised key path can point the block-2 heads "
                          "at the right position, where they then read a corrupted token and copy that, so it can "
                          "even do harm; a denoised value path can bring back only what a head already attends to. "
                          "Expect small denoising effects, some below 0.")
            else:
                expect = ("With resample every position of the corrupted run is another sequence, so a single clean "
                          "path restores only part of what the block-2 heads need (the match through keys and "
                          "queries, the token through values): expect partial effects.")
            st.info(f"{expect} Measured here, into all of block 2: the largest denoising effect is "
                    f"{top['patch_effect']:.3f} ({PATH_NAMES[top['path']]} from {top['sender']}), the lowest "
                    f"{low['patch_effect']:.3f} ({PATH_NAMES[low['path']]} from {low['sender']}).")
        testable = dict(list(paths[paths["testable"].astype(bool)].groupby(["path", "direction"], sort=False)))
        for path, name in (("q", "query (Q)"), ("k", "keys (K)"), ("v", "values (V)")):
            if not paths_shown or not any(p == path for p, _ in testable):
                continue
            cols = st.columns(2)
            for col, direction in zip(cols, ("noising", "denoising")):
                sub = testable.get((path, direction), paths.iloc[:0])
                draw(col, charts.path_effects(sub, f"{direction}: sender → receiver's {name}"), width="content")
        for sentence in (read("key_composition_sentence"), read("longer_match_sentence")) if paths_shown else ():
            if sentence:
                st.markdown(sentence)
        if paths_shown and read("most_needed_key_path") is None:
            st.markdown("On these sequences no single block-1 head's key path into block 2 is clearly the most needed "
                        f"(M(clean) − M(corrupted) is {gap:.2f} nats; a clear answer needs at least "
                        f"{readings.MIN_GAP:g} and a noising interval ending below {readings.NEEDED:g} and below "
                        "every other sender's): this model gives no clear answer here.")
        if paths_shown:
            st.caption(
                "**What am I looking at?** Rows: sender heads (block 1); columns: receiver heads (block 2). Each "
                "cell is the patch effect of that one path. **Unlike ablation**, which removes a head from every "
                "place it writes to at once, a path keeps the sender intact everywhere except in one input of one "
                "receiver. **Unlike attention weights or composition scores**, which read weights or patterns, this"
                " measures what the path does to the output. When several heads in block 2 share a job, noising one"
                " path into one of them costs little: the others cover for it, which the *2.all* column shows.")
        python_panel(snippet("paths"), shows={"paths": paths["patch_effect"]})
        if not advanced:
            st.caption("The **Researcher view** (the switch at the top) adds path patching position by position, "
                       "weight composition beside it, the circuit as a whole and the paths over training.")
    if cfg.n_layers >= 2 and advanced:
        sections.path_positions_part(entry, res, None if period is None else int(period), text, int(seed), corruption,
                                     N_SEQS, snippet)
        sections.composition_section(res, gap, checks["rope"], snippet)
        sections.circuit_section(res, snippet, checks.get("circuit_fresh"))
        if entry.info.get("snapshots") and period is not None:
            st.subheader("The same paths over training")
            if st.session_state.get("cz_mechanism"):
                mech = _mechanism(entry, int(period), int(seed), corruption)
                draw(st, charts.mechanism(mech, readings.MIN_GAP, "noising each block-1 head's path into "
                                                 "all of block 2, at every snapshot"), width="content")
                left_out = sorted(set(mech.loc[mech["gap"] < readings.MIN_GAP, "step"]))
                st.caption(
                    "**What am I looking at?** The key and value rows of the path-patching table above, measured "
                    "again on the same sequences at every snapshot of this run's weights (band: 95% interval). "
                    f"Steps where M(clean) − M(corrupted) is below {readings.MIN_GAP:g} nats are left out"
                    + (f" ({left_out[0]}–{left_out[-1]}, {len(left_out)} snapshots): there the model hardly uses "
                       "the first copy and every ratio is noise." if left_out else ".")
                    + " " + (readings.mechanism_sentence(mech) or "No snapshot has a large enough gap to read."))
            else:
                st.button("Measure these paths at every snapshot of the run", key="cz_mechanism_button",
                          on_click=lambda: st.session_state.update(cz_mechanism=True))

# ---------------------------------------------------------------------------------------------
st.header("5 · The logit lens")
st.markdown(f"**Takeaway:** the {link('logit lens')} reads the stream after each block as if the model ended there: "
            "it shows when the right answer becomes readable, not which part put it there.")
lens, by_copy = res.lens, res.lens_by_copy
if ask(quiz_causal.lens_stage(by_copy, gap=gap if cfg.n_layers else None), hides="the logit lens charts"):
    draw(st, charts.lens_grid(lens, res.period, "right next token's probability, read after each stage "
                                     "(first clean sequence)"), width="content")
    st.caption(
        "**What am I looking at?** The residual stream at each position, read through the unembedding W_Eᵀ as if it "
        "were the last layer (nostalgebraist, 2020): row *embedding* is the direct path W_E[x] W_Eᵀ, row *after "
        "block l* the stream after l blocks. TinyCharLM has no final LayerNorm, so the last row is exactly the "
        "model's output. Hover for the right token's rank (1 = top).")
    a, b = chart_pair()
    draw(a, charts.lens_by_copy(by_copy, "prob", "mean p(right token) by copy", "mean probability"), width="content")
    draw(b, charts.lens_by_copy(by_copy, "rank", "mean rank of the right token by copy", "mean rank (1 = top)",
                                log=True), width="content")
    st.caption(f"Averaged over every target of the {res.n_seqs} clean sequences, split by copy: the first copy "
               f"(t < L), which nothing earlier predicts, the second (L ≤ t < 2L) and the later ones (t ≥ L). "
               f"Chance is p = 1/{cfg.vocab_size}, rank {(cfg.vocab_size + 1) / 2:g}.")
    python_panel(snippet("lens"), shows={"prob": by_copy["prob"], "rank": by_copy["rank"]})

# ---------------------------------------------------------------------------------------------
st.header("6 · How this relates to the IOI method")
st.markdown("**Takeaway:** the same tools found the indirect-object circuit in GPT-2 small; here the answer is known "
            "in advance, so you can check the method itself.")
if advanced:
    st.markdown(
        "Wang et al. (2022) found the indirect-object circuit in GPT-2 small with these tools (see *Head "
        "archetypes & IOI*). Their clean input was an IOI sentence; their corrupted input the same template with "
        "other, unrelated names, so the answer was no longer supported by the context: a whole other prompt, "
        "closer to the **resample** corruption here than to the first-copy one. They measured the logit "
        "difference between the two names where we use the right token's log-probability. They worked backwards "
        "from the logits. Their first step is **path patching into the logits by noising**: each head's corrupted"
        " output is sent only along its direct path to the output, to find the heads that matter *directly*. "
        "Section 1 here measures something else: the *total* effect of *denoising* one head (its clean output "
        "into the corrupted run, every block above recomputed), which also counts what later heads do with it. "
        "Their next step, path patching into those heads' queries, keys and values, is section 4. Here the answer"
        " is known in advance, so you can check the method: the block-1 previous-token head should matter through"
        " the block-2 heads' **keys** (its query rows can only be tested with the resample corruption, see "
        "section 4), and the block-2 heads should matter directly.")
st.page_link("app_pages/archetypes.py", label="The IOI circuit on the Head archetypes & IOI page", icon="🧭")
