"""Sections of the Causal page that test a whole circuit and its measurements: the metric, weight
composition beside path patching (plain and RoPE-aware), GradDrop, path patching per position, and the circuit
as a whole, drawn from core.causal.results.Experiments and core.causal.checks."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import altair as alt
import pandas as pd
import streamlit as st

from core.causal import check_readings, readings
from core.model.symbols import block_label, encode_text
from ui import numbers
from ui.cache import per_model
from ui.charts.kept import draw, kept
from ui.python_panel import Snippet, python_panel
from ui.state import LabModel

SnippetOf = Callable[[str], Snippet]  # the page's snippet builder: a section of ui.snippets.CAUSAL_SECTIONS -> its code
# sentences read off small tables of the views, a third of a warm rerun's CPU when made again every run
_composition_sentence = kept(readings.composition_sentence)
_rope_sentence = kept(check_readings.rope_sentence)
_circuit_sentence = kept(check_readings.circuit_sentence)
_graddrop_sentence = kept(check_readings.graddrop_sentence)


def runs_of(entry: LabModel, period: int | None, text: str | None, seed: int, corruption: str,
            n_seqs: int):
    """The pair of runs (core.causal.patching.PatchRuns) the page's experiments measured: sampled at `period`,
    or the typed `text` corrupted. For views that are not stored: patching imports torch."""
    from core.causal import experiments, patching

    if text is None:
        return patching.task_runs(entry.model, entry.task, n_seqs, seed, period, corruption)
    return experiments.typed_runs(entry.model, encode_text(text, entry.model.cfg.vocab_size), n_seqs, seed, corruption)


N_SEQS = 32  # sampled sequences (or corruptions of a typed one) per experiment


@per_model(name="causal.task_experiments",
           show_spinner="Patching every head and path (a second or two)…", max_entries=32, version=3)
def task_experiments(entry: LabModel, period: int, seed: int, corruption: str, research: bool = True) -> dict:
    """Everything but the position sweeps (task_sweeps, drawn after section 1); research=False: what the page
    shows outside its researcher view, a quarter of the CPU on the 2-block model
    (core.causal.experiments.experiments)."""
    from core.causal import experiments

    return experiments.task_experiments(entry.model, entry.task, period, N_SEQS, seed, False, 0, corruption, research)


@per_model(name="causal.text_experiments",
           show_spinner="Patching every head and path (a second or two)…", max_entries=32, version=2)
def text_experiments(entry: LabModel, text: str, seed: int, corruption: str, research: bool = True) -> dict:
    from core.causal import experiments

    tokens = encode_text(text, entry.model.cfg.vocab_size)
    return experiments.text_experiments(entry.model, tokens, N_SEQS, seed, False, 0, corruption, research)


SWEEPS_SPINNER = "Patching one position at a time for sections 2 and 3 (a few seconds)…"


@per_model(name="causal.task_sweeps", show_spinner=SWEEPS_SPINNER, max_entries=32)
def task_sweeps(entry: LabModel, period: int, seed: int, positions: bool | None, budget: int, corruption: str,
                research: bool = True) -> dict:
    """core.causal.experiments.task_sweeps: the position sweeps of task_experiments' runs (None where the budget
    leaves them out): most of the experiments' CPU, so the page computes them after drawing section 1."""
    from core.causal import experiments

    return experiments.task_sweeps(entry.model, entry.task, period, N_SEQS, seed, positions, budget, corruption,
                                   research)


@per_model(name="causal.text_sweeps", show_spinner=SWEEPS_SPINNER, max_entries=32)
def text_sweeps(entry: LabModel, text: str, seed: int, positions: bool | None, budget: int, corruption: str,
                research: bool = True) -> dict:
    from core.causal import experiments

    tokens = encode_text(text, entry.model.cfg.vocab_size)
    return experiments.text_sweeps(entry.model, tokens, N_SEQS, seed, positions, budget, corruption, research)


def first_part(entry: LabModel, period: int | None, text: str | None, seed: int, corruption: str,
               research: bool = True):
    """The page's experiments without the position sweeps: sampled at `period`, or on the typed `text` when it
    is given (research: the researcher view's too)."""
    return (task_experiments(entry, period, seed, corruption, research) if text is None else
            text_experiments(entry, text, seed, corruption, research))


def with_sweeps(res, entry: LabModel, period: int | None, text: str | None, seed: int, positions: bool | None,
                budget: int, corruption: str, research: bool = True):
    """res (first_part's) with the position sweeps filled in (each None where the budget leaves them out)."""
    sweeps = (task_sweeps(entry, period, seed, positions, budget, corruption, research) if text is None else
              text_sweeps(entry, text, seed, positions, budget, corruption, research))
    return replace(res, **sweeps)


def experiments(entry: LabModel, period: int | None, text: str | None, seed: int, positions: bool | None,
                budget: int, corruption: str, research: bool = True):
    """The page's experiments, the position sweeps in (first_part, then with_sweeps)."""
    return with_sweeps(first_part(entry, period, text, seed, corruption, research), entry, period, text, seed,
                       positions, budget, corruption, research)


FRESH_SEED = 10_000  # added to the page's seed: the sequences the circuit is scored on again, never chosen on


@per_model(name="causal.research_checks", show_spinner="GradDrop and the RoPE-aware composition score…", max_entries=32,
           version=3)
def research_checks(entry: LabModel, period: int | None, text: str | None, seed: int, positions: bool | None,
                    budget: int, corruption: str) -> dict:
    """checks.all_checks on the runs of the page's experiments (the cached ones), the circuit scored again on
    N_SEQS sampled sequences of seed + FRESH_SEED (none for a typed text: it has no other sequences)."""
    from core.causal import checks

    res = experiments(entry, period, text, seed, positions, budget, corruption)
    fresh = runs_of(entry, period, None, seed + FRESH_SEED, corruption, N_SEQS) if text is None else None
    return checks.all_checks(entry.model, runs_of(entry, period, text, seed, corruption, N_SEQS), res, fresh)


# the readings that read the position sweeps: every other one reads first_part alone, so it is ready before them
SWEEP_READINGS = frozenset({"position_sum_sentence", "attribution_sentence", "first_order_sentence",
                            "atp_star_sentence"})


@per_model(name="causal.reading", show_spinner=False, max_entries=256, version=2)
def reading(entry: LabModel, period: int | None, text: str | None, seed: int, positions: bool | None, budget: int,
            corruption: str, name: str, research: bool = True):
    """core.causal.readings.<name> of the page's experiments, read once like them: a warm rerun of the page
    spent a quarter of its CPU reading the same sentences off the same tables. Only SWEEP_READINGS wait for the
    position sweeps."""
    res = first_part(entry, period, text, seed, corruption, research)
    if name in SWEEP_READINGS:
        res = with_sweeps(res, entry, period, text, seed, positions, budget, corruption, research)
    return getattr(readings, name)(res)


@per_model(name="causal.path_positions",
           show_spinner="Path patching at every position, under both references (about half a minute)…",
           max_entries=8)
def _path_positions(entry: LabModel, period: int | None, text: str | None, seed: int, corruption: str,
                    n_seqs: int) -> dict:
    from core.causal import checks

    positions = checks.path_positions(entry.model, runs_of(entry, period, text, seed, corruption, n_seqs))
    return {"positions": positions, "whole": checks.whole_paths(positions)}


def path_positions_part(entry: LabModel, res, period: int | None, text: str | None, seed: int, corruption: str,
                        n_seqs: int, snippet: SnippetOf | None = None) -> None:
    """Section 4's paths position by position: measured once its button is pressed (it costs tens of seconds)."""
    st.subheader("The same paths, position by position")
    if st.session_state.get("cz_positions"):
        pos = _path_positions(entry, period, text, seed, corruption, n_seqs)
        path_positions_section(pos["positions"], pos["whole"], res.period, res.gap, corruption)
        if snippet is not None:
            python_panel(snippet("path_positions"), shows={"change": pos["positions"]["change"],
                                                           "lost": pos["whole"]["lost"]})
    else:
        st.button("Measure the paths at every position, under both references", key="cz_positions_button",
                  on_click=lambda: st.session_state.update(cz_positions=True))


DIRECT_COLUMN = "share kept when only the direct path is noised"


def needed_or_enough(res, heads: pd.DataFrame) -> None:
    """The researcher's table of each head's denoising, noising and direct-path effects, with its caption."""
    st.subheader("Needed, or only enough? Three measurements per head")
    noise = res.noise.merge(heads[["layer", "head", "patch_effect", "effect_low", "effect_high"]],
                            on=["layer", "head"])
    table = {"head": noise["label"]}
    for name, (v, lo, hi) in {"denoising (suffices?)": ("patch_effect", "effect_low", "effect_high"),
                              "noising (needed?)": ("noise_effect", "noise_low", "noise_high")}.items():
        table[name] = [f"{a:.2f} [{b:.2f}, {c:.2f}]" for a, b, c in zip(noise[v], noise[lo], noise[hi])]
    table[DIRECT_COLUMN] = [readings.direct_cell(r) for _, r in noise.iterrows()]
    st.dataframe(table, hide_index=True)
    st.caption(
        f"**Three measurements per head** (effect, then its 95% bootstrap interval over {readings.interval_unit(res)}; "
        "no interval here covers other training seeds). "
        "*Denoising*, the chart above: the head's clean output into the corrupted run (does it suffice?). "
        "*Noising*: its corrupted output into the clean run, every block above rerun (is it needed? near 1 = "
        f"nothing lost). *{DIRECT_COLUMN}*: its corrupted output sent only along its direct path to the logits, the "
        "blocks above left clean (Wang et al.'s first step). 1 means its direct path carries *nothing* M needs; a "
        "head whose share kept here is 1 but whose noising effect is low matters only through later heads. "
        "*untestable*: the head's output hardly differs between the two runs at the scored positions (under "
        "first-copy a block-1 head there reads the unchanged second copy), so the 1 would be forced by the "
        "corruption; choose resample to test it.")


def metric_section(res, said: str | None) -> None:
    """Section 1's head patching under three metrics (res.by_metric); `said` is readings.metric_sentence(res)."""
    if res.by_metric is None:
        return
    st.subheader("The metric: log-probability, logit difference, probability")
    bm = res.by_metric.pivot(index="label", columns="metric", values="patch_effect")
    st.dataframe(numbers.table(bm[["logprob", "logit_diff", "prob"]].rename(
        columns={"logprob": "log-prob (M)", "logit_diff": "logit difference", "prob": "probability"})))
    st.caption(
        "**What am I looking at?** Section 1's patching of each head, measured three ways (Heimersheim & "
        "Nanda, 2024): the right token's log-probability (M), its logit minus that of the token the "
        "corrupted first copy offers there, and its probability. The log-probability moves when any other "
        "token's logit moves; the logit difference compares the right answer with the wrong one the "
        "corruption offers and is linear in the final stream; the probability saturates near 0 and 1. "
        + (said or ""))


def composition_section(res, gap: float, rope: pd.DataFrame | None = None, snippet: SnippetOf | None = None) -> None:
    """Weight K-composition beside key-path noising (res.composition), with the RoPE-aware score when `rope`
    (core.causal.checks.rope_composition) is given (and then its snippet, when `snippet` is)."""
    comp = res.composition if rope is None else rope
    if comp is None:
        return
    st.subheader("Weight-based K-composition beside path patching")
    st.dataframe(numbers.table(comp.drop(columns=["receiver_offset", "offset_mass"], errors="ignore").rename(
        columns={"k_score": "K-composition (weights)", "k_rope": "RoPE-aware (turned by the offsets attended at)",
                 "k_lost": "share of M lost, key path noised"})), hide_index=True)
    st.caption(
        "**What am I looking at?** For each block-1 sender and block-2 receiver, the K-composition score "
        "of the weights (Elhage et al., 2021; *Circuits & ablations*) beside what noising that key path "
        "costs. TinyCharLM rotates queries and keys by their position (RoPE), so the attention score reads "
        "x_i W_Q R_(j−i) W_Kᵀ x_jᵀ; the weight-only product W_OVᵀ W_QK leaves the rotation out, as if every "
        "key sat at the query's own position, and cannot tell a previous-token head from a self-attending "
        "one. Path patching runs the model, rotation included. "
        + (_composition_sentence(comp, gap) or ""))
    if rope is not None:
        st.markdown(
            "**The rotation put back** (rotary embeddings, Su et al., 2021). The RoPE-aware score takes the "
            "receiver's W_Q R_(−d) W_Kᵀ at each offset d "
            "= i − j between a query and a key, and averages the same norm ratio over the offsets the receiver "
            "actually attends at on the clean runs, weighted by its attention there. At d = 0 it is the plain "
            "score; an induction head attends L − 1 back, where every rotary pair has turned by L − 1 times its "
            "frequency, so the stream directions its queries match in a key are not the ones they match at d = 0. "
            + (_rope_sentence(rope, res.offsets, gap) or ""))
        if snippet is not None:
            python_panel(snippet("rope"), shows={
                "rope": rope[["k_score", "k_rope", "k_lost", "receiver_offset", "offset_mass"]]})


def circuit_section(res, snippet: SnippetOf | None = None, fresh: dict | None = None) -> None:
    """The circuit as a whole (res.circuit, core.causal.circuit.page_circuit): chosen and scored with one
    reference, the mean over the corrupted runs, and scored again on fresh sequences (`fresh`, research_checks'
    "circuit_fresh"); with its snippet when `snippet` is given."""
    circ = res.circuit
    if circ is None:
        return
    st.subheader("The circuit as a whole")
    grown = circ.get("grown") or []
    st.markdown(
        "Give every path and head its mean output over the corrupted runs, one at a time, on the clean sequences "
        "(Wang et al., 2022, mean-ablate over a reference distribution the same way), and keep in the circuit "
        "each element whose knockout alone clearly costs M: the share of the span kept has a 95% interval over "
        "the sequences ending below "
        f"{readings.NEEDED:g}. The same reference scores it: with everything else at its mean, the circuit "
        f"({', '.join(circ['elements']) or 'empty'}) keeps **{circ['recovered']:.0%}** of the span between the "
        f"whole model and the fully ablated one (M {circ['f_circuit']:.2f} against {circ['f_model']:.2f} nats, "
        f"and {circ['f_none']:.2f} with everything ablated: a span of {circ['span']:.2f} nats). The span is not "
        "M(clean) − M(corrupted): the mean of the corrupted runs is not any one of them."
        + (" Adding, one at a time, the element that raises M most: " + ", then ".join(
            f"{label} ({share:.0%})" for label, share in grown) + ". Those parts cost little knocked out alone, "
           "but carry M together." if grown else ""))
    rows = circ["rows"]
    each = rows[rows["element"].notna()]
    if len(each):
        st.markdown(
            f"Removed one at a time, an element leaves the circuit and the whole model "
            f"{each['completeness'].min():.2f} to {each['completeness'].max():.2f} nats apart "
            f"({each['completeness_share'].min():.0%} to {each['completeness_share'].max():.0%} of the span; "
            "completeness below): the larger that is, the more the rest of the model does besides the circuit.")
    shown = rows[["label", "completeness", "completeness_share", "minimality", "minimality_share"]].assign(
        completeness_share=100 * rows["completeness_share"], minimality_share=100 * rows["minimality_share"])
    nats, share = st.column_config.NumberColumn(format="%.3f"), st.column_config.NumberColumn(format="%.1f%%")
    st.dataframe(shown.rename(columns={
        "label": "element removed (v)", "completeness": "completeness (nats)", "completeness_share": "completeness "
        "(share)", "minimality": "minimality (nats)", "minimality_share": "minimality (share)"}), hide_index=True,
        column_config={"completeness (nats)": nats, "minimality (nats)": nats, "completeness (share)": share,
                       "minimality (share)": share})
    st.caption(
        "**What am I looking at?** A reduced version of Wang et al.'s tests, with one reference (the mean over the "
        "corrupted runs) for choosing the circuit and for scoring it: F is M in nats with only the named elements "
        "intact, and each figure is also given as a share of the span F(M) − F(∅). Completeness is tried only for "
        "K = {v} (one element removed) and K = C (the last row), not searched over subsets of the circuit as they "
        "do. *Completeness* |F(C∖v) − F(M∖v)|: remove the same element from the circuit and from the whole model; a "
        "complete circuit behaves like the model under every such knockout (small values). *Minimality* F(C) − "
        "F(C∖v): how much the circuit loses without that element, taken at K = {} only (Wang et al. take the "
        "largest loss over subsets K of the circuit removed first, which can only be larger); near 0 or below, the "
        "rest of the circuit does as well without it, which says the element is not needed only for a circuit "
        "that keeps most of the span. Unlike theirs, the elements are paths (a block-1 head into one input of "
        "block 2, or into the logits) and block-2 heads, not heads; the circuit is chosen by single knockouts, "
        "not searched; and it is chosen and scored on the same sequences, so it is also scored on fresh ones "
        "below. Why the mean: under first-copy "
        "each corrupted run keeps its sequence's second copy, so a reference made per sequence leaves every query "
        "path untouched and can neither choose nor score one.")
    for said in (check_readings.minimality_sentence(circ), check_readings.fresh_sentence(circ, fresh, res.n_seqs),
                 _circuit_sentence(circ, res.gap, res.corruption)):
        if said:
            st.markdown(said)
    if snippet is not None:
        python_panel(snippet("circuit"), shows={"completeness": rows["completeness"], "minimality": rows["minimality"]})


def graddrop_section(table: pd.DataFrame | None, gap: float, snippet: SnippetOf | None = None) -> None:
    """GradDrop beside AtP* and the exact sweep (core.causal.checks.graddrop), with its snippet when
    `snippet` is given."""
    if table is None:
        return
    dropped = [c for c in table.columns if c.startswith("dropped_")]
    shown = table[["label", "exact_sum", "star_sum", *dropped[1:], "direct_exact", "graddrop", "abs_exact"]]
    st.dataframe(numbers.table(shown.rename(columns={
        "label": "head", "exact_sum": "exact, summed", "star_sum": "AtP*, summed", "direct_exact": "exact, direct "
        "path only", "graddrop": "GradDrop ranking score", "abs_exact": "exact |cells|, summed",
        **{c: f"AtP*, {block_label(int(c.removeprefix('dropped_layer')))}'s gradient dropped" for c in dropped}})),
        hide_index=True)
    st.caption("**What am I looking at?** Per head, summed over positions: the exact one-position sweep above, "
               "AtP*, AtP* with each later block's gradient dropped (in a 2-block model: the head's direct path "
               "alone), the exact effect of the head's clean output sent along its direct path only, GradDrop's "
               "score and the exact cells' absolute values, summed. GradDrop's score ranks heads; it is not an "
               "estimate of any column beside it (a block-2 head keeps its estimate whichever block's gradient is "
               "dropped, so in a 2-block model its score is exactly twice its AtP* cells' absolute values, summed).")
    said = _graddrop_sentence(table, gap)
    st.markdown(said or "**GradDrop** (Kramár et al., 2024): the gap is too small here for the comparison to mean "
                "much.")
    if snippet is not None:
        python_panel(snippet("graddrop"), shows={"graddrop": table.select_dtypes("number")})


def _lost_grid(cells: pd.DataFrame, title: str, period: int | None) -> alt.LayerChart:
    """Heatmap of the share of M lost (−change) per sender row and position."""
    data = cells.assign(lost=-cells["change"].round(4), row=cells["sender"] + " → " + cells["path"])
    m = float(data["lost"].abs().max() or 1.0)
    rect = alt.Chart(data).mark_rect().encode(
        x=alt.X("position:O", axis=alt.Axis(labelAngle=0, values=list(range(0, int(data["position"].max()) + 1, 4)))),
        y=alt.Y("row:N", title="path"),
        color=alt.Color("lost:Q", title=f"share of M lost (±{m:.2g})", scale=alt.Scale(scheme="redblue",
                                                                                       domain=[m, -m])),
        tooltip=["row:N", "position:O", alt.Tooltip("lost:Q", format=".3f", title="share of M lost")])
    layers = [rect]
    if period:
        layers.append(alt.Chart(pd.DataFrame({"position": [period]})).mark_rule(color="black", strokeDash=[4, 3])
                      .encode(x="position:O"))
    rows = data["row"].nunique()
    return alt.layer(*layers, title=title).properties(width=min(820, max(300, 12 * data["position"].nunique())),
                                                      height=28 * rows + 10)


def path_positions_section(positions: pd.DataFrame, whole: pd.DataFrame, period: int | None, gap: float,
                           corruption: str) -> None:
    """Path patching per position and with a mean reference (core.causal.checks.path_positions)."""
    for ref, name in (("corrupted", "each sequence's corrupted run"), ("mean", "the mean over the corrupted runs")):
        sub = positions[positions["reference"] == ref]
        for by, where in (("sender", "one sender position at a time"), ("receiver", "one receiver position at a time")):
            cells = sub[sub["by"] == by]
            draw(st, _lost_grid(cells, f"noising into all of block 2, {where}; reference: {name}", period),
                            width="content")
    table = whole.pivot_table(index="sender", columns=["path", "reference"], values="lost")
    table.columns = [f"{p} path, {r}" for p, r in table.columns]
    st.dataframe(numbers.table(table), width="content")
    st.caption(
        "**What am I looking at?** Section 4's noising, resolved by position. *One sender position*: the sender's "
        "output is swapped only at position p, so the block-2 heads' query, key or value at p (which read only "
        "the stream at p) change there alone. *One receiver position*: the sender's output is swapped everywhere, "
        "but only block 2's changed output at position i goes on to the logits. The *reference* is what the "
        "sender's output is swapped for: each sequence's own corrupted run, or the mean of the sender's output over "
        "the corrupted runs at each position, as Wang et al. (2022) mean-ablate over a reference distribution. "
        "By sender position only the key path is measured (each cell reruns block 2). The table: the share of M "
        "lost by each whole path (the receiver-position cells summed).")
    said = check_readings.positions_sentence(positions, whole, period, gap, corruption)
    if said:
        st.markdown(said)
