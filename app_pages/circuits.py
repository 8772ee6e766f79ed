"""Circuits & ablations: one head's QK and OV circuits, its rotary positional profile and OV copying
matrix, composition between blocks, and knocking heads out."""
import streamlit as st

from core.model import symbols
from core.quiz import questions as quiz
from core.reading import views
from ui import snippets
from ui.cache import per_model
from ui.charts import circuits as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import LabModel
from ui.steps import heads_at_step

entry = heads_at_step("cir")  # every number below is this step's
task, cfg = entry.task, entry.info["config"]


@per_model(name="circuits.head_view", show_spinner="Reading the weights…", max_entries=64)
def head_view(entry: LabModel, layer: int, head: int) -> views.HeadCircuitView:
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.head_circuit_view(entry.model, entry.task, layer, head)


@per_model(name="circuits.copying_table", show_spinner=False, max_entries=16)
def copying_table(entry: LabModel):
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.copying_table_view(entry.model, entry.task)


@per_model(name="circuits.composition", show_spinner="Scoring composition…", max_entries=16)
def composition(entry: LabModel):
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.composition_view(entry.model)


@per_model(name="circuits.rope_k", show_spinner="Scoring composition with the rotation…", max_entries=16)
def rope_k(entry: LabModel) -> dict:
    """K-composition with and without the rotary rotation (core.causal.rope_k), as plain lists."""
    from core.causal import rope_k as rk  # here, not at the top: it imports torch (core/model/lazy.py)

    res = rk.k_composition_with_rotation(entry.model, entry.task)
    return {"sentence": rk.rotation_sentence(res), **{k: v.tolist() for k, v in res.items()}}


@per_model(name="circuits.ablate", show_spinner="Ablating…", max_entries=64)
def ablate(entry: LabModel, heads: tuple):
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.ablation_view(entry.model, entry.task, dict(heads))


@per_model(name="circuits.ablation_grid", show_spinner="Ablating each head in turn…", max_entries=16)
def ablation_grid(entry: LabModel, mode: str):
    from core.reading import analysis  # here, not at the top: it imports torch (core/model/lazy.py)

    return analysis.ablation_grid_view(entry.model, entry.task, mode)


st.markdown(
    "A head is two independent maps (Elhage et al. 2021). Its **QK circuit** W_QK = W_Q W_Kᵀ scores how "
    "much a query's content wants a key's content: it decides *where* to look. Its **OV circuit** "
    "W_OV = W_V W_O is what it writes into the stream about the position it looks at: *what* it moves. "
    f"Both are {cfg.d_model} × {cfg.d_model} but pass through only d_head = {cfg.d_head} dimensions, so "
    f"their rank is at most {cfg.d_head}. With rotary embeddings (Su et al. 2021) position enters only "
    "through the rotation of q and k, so the positional part is shown separately, as a profile over offsets.")

labels = symbols.head_labels(cfg.n_layers, cfg.n_heads)
pick = st.columns([1, 3])[0].selectbox("Head (block.head)", labels, key="cir_head",
                                       index=min(len(labels) - 1, cfg.n_heads))
layer, head = symbols.parse_head_label(pick)
hv = head_view(entry, layer, head)

st.subheader(f"QK and OV circuits of head {pick}")
st.markdown(f"**A head's two jobs are two low-rank matrices read straight from its weights: the {link('QK circuit')} "
            f"and the {link('OV circuit')}.**")
if (layer, head) == (0, entry.held_head):
    st.info(f"Head {pick} was **held on the previous position** during training, and the hold is part of this "
            "model (a training experiment its file records): it attends to the previous position whatever its "
            "W_Q and W_K say, and those never got a gradient. Its QK circuit and rotary profile below describe "
            "weights the model does not use; its OV circuit is what it writes.")
q_col, o_col = st.columns(2)
draw(q_col, charts.matrix_heatmap(hv.qk, "W_QK (content part, offset 0)", "query-side stream dimension",
                                         "key-side stream dimension", "entry"), width="content")
draw(q_col, charts.singular_values_chart(hv.qk_s, hv.d_head,
                                                f"W_QK singular values: rank {hv.qk_rank}"),
                   width="content")
draw(o_col, charts.matrix_heatmap(hv.ov, "W_OV", "read from (stream dimension)",
                                         "written to (stream dimension)",
                                         "entry"), width="content")
draw(o_col, charts.singular_values_chart(hv.ov_s, hv.d_head,
                                                f"W_OV singular values: rank {hv.ov_rank}"),
                   width="content")
st.caption(
    "**What am I looking at?** Each heatmap is a matrix over the residual stream's dimensions (blue negative, "
    "orange positive; the basis itself has no meaning, so look for structure rather than single entries). "
    "Below each, its singular values: everything after the dashed line at d_head is exactly zero, which is "
    "the rank limit made visible.")
python_panel(snippets.head_circuits(entry, pick),
             shows={"qk_s": hv.qk_s, "ov_s": hv.ov_s, "ranks": [hv.qk_rank, hv.ov_rank]})

st.subheader("Where it looks by position: the rotary profile")
st.markdown(f"**With a {link('rotary embedding')}, a head's taste for a distance back can be read without any "
            "tokens.**")
draw(st, charts.profile_chart(hv.profile, task.period_min, task.period_max), width="stretch")
st.caption(
    "**What am I looking at?** With rotary embeddings the score between a query and a key depends on their "
    "positions only through the offset t = i − j. The curve is the score this head gives a key t positions back "
    "for its *average* query and key (the mean over sampled sequences of what enters the block), i.e. the "
    "content-free part of its preference" + (", and for its biases alone: a constant query built from b_Q can "
    "prefer one fixed offset whatever the tokens, the shortcut a fixed-period model can take."
    if cfg.bias else ". Grey band: the offsets L − 1 of the training periods."))
python_panel(snippets.rotary_profile(entry, pick), shows={"profile": list(hv.profile.values())})

st.subheader("What it copies: the OV copying matrix")
st.markdown("**A head that copies raises the logit of the very token it looks at**: an induction circuit needs one "
            "to write the token it found into the prediction.")
if ask(quiz.top_copier(copying_table(entry)), hides="every head's copying scores"):
    c_col, s_col = st.columns([1.3, 1])
    draw(c_col, charts.matrix_heatmap(hv.C, f"C = W_E W_OV W_Eᵀ of head {pick}", "attended token a",
                                             "boosted logit b", "C[a, b]", labels=symbols.vocab_labels(cfg.vocab_size),
                                             size=380), width="content")
    chance = 1 / cfg.vocab_size
    cp, bc = hv.copy, hv.block_copy
    s_col.metric("diagonal on top (this head)", f"{cp['ov_diag_top1']:.2f}", help=f"chance 1/V = {chance:.3f}")
    s_col.metric(f"diagonal on top ({symbols.block_label(layer)}, heads summed)", f"{bc['ov_diag_top1']:.2f}")
    s_col.metric("eigenvalue copying score (this head)", f"{cp['ov_copying_eig']:+.2f}",
                 help="Re(Σλ) / Σ|λ| over the eigenvalues of C with every row's mean removed, C (I − 11ᵀ/V): "
                      "+1 copies, −1 suppresses.")
    if layer:
        ce, bce = hv.copy_effective, hv.block_copy_effective
        s_col.metric("on the effective embedding: diagonal on top / eigenvalue score",
                     f"{ce['ov_diag_top1']:.2f} / {ce['ov_copying_eig']:+.2f}",
                     help=f"This head, with rows read from the stream each token carries after the earlier blocks "
                          f"instead of from W_E ({symbols.block_label(layer)}'s heads summed: diagonal on top "
                          f"{bce['ov_diag_top1']:.2f}, eigenvalue score {bce['ov_copying_eig']:+.2f}).")
    s_col.caption(
        "**What am I looking at?** Row a shows how attending to a position holding token a changes every logit b, "
        "read straight from the weights with no forward pass. A copying head has an orange diagonal: seeing a "
        f"raises a. *Diagonal on top* is the share of rows whose largest entry is the diagonal (chance 1/V = "
        f"{chance:.3f}); diagonal in the top five: {cp['ov_diag_top5']:.2f}. The eigenvalue score is +1 for a "
        "pure copier and −1 for a head that pushes the attended token down.")
    method = s_col.expander("How the scores are computed")
    method.caption(
        "The eigenvalue score is taken after removing each "
        "row's mean: the softmax ignores an amount added to every logit, and the embedding direction all tokens "
        f"share puts a large one in every row (uncentred, this head would score {hv.copy_uncentred:+.2f}). "
        "A boost to one logit b whatever token is attended is not copying either, and the centred eigenvalue "
        "score ignores it exactly; the diagonal scores keep it, since it really changes which logit the head "
        "raises most."
        + (" A head in a later block does not read W_E itself: earlier blocks have already added to every token's "
           "stream (a head that attends to its own position rewrites the token, much as the first MLP does in GPT-2, "
           "whose copy scores Wang et al. (2022) read from W_E passed through that MLP). The *effective embedding* "
           "adds to W_E what each earlier head writes when it looks at the token's own position, weighted by how "
           "often it does: its mean self-attention measured on 32 sequences ("
           + ", ".join(f"{symbols.head_label(l, h)}: {v:.2f}" for l, row in enumerate((hv.self_attention or [])[:layer])
                       for h, v in enumerate(row))
           + "). What a head takes from other positions is left out. When the effective score is much higher than "
           "the plain one, the copying runs on what the earlier blocks made of the token." if layer else ""))
    python_panel(snippets.copying(entry, pick), shows={"copy": cp, "block": bc, "effective": [
        hv.copy_effective, hv.block_copy_effective]}, where=s_col)
    copy_table = copying_table(entry)
    draw(st, charts.copying_bars(copy_table, cfg.vocab_size), width="stretch")
    st.caption("**What am I looking at?** The diagonal-on-top score for every head, and (Σ) for each block's heads "
               "added together, which is what the block writes when all its heads look at the same place. Bars read "
               "rows from W_E; black ticks read them from the effective embedding, what a later block's heads "
               "actually receive (the same as the bar in block 1). Hover for both eigenvalue scores.")
    python_panel(snippets.copying_table(entry), shows={"top1": copy_table["ov_diag_top1"]})

st.subheader("Composition between blocks")
st.markdown(f"**An {link('induction head')} works because its keys read what a {link('previous-token head')} wrote: "
            f"{link('K-composition')}.**")
if cfg.n_layers < 2:
    st.info("This model has one block, so no head can read another head's output: there is no composition. "
            "That is why it cannot build an induction circuit, which needs a later head to read what an "
            "earlier head wrote.")
else:
    comp, base = composition(entry)
    draw(st, charts.composition_chart(comp, base), width="content")
    st.caption(
        "**What am I looking at?** How much a later head reads what an earlier head writes (Elhage et al. 2021): "
        "‖W_A W_B‖ / (‖W_A‖ ‖W_B‖) with Frobenius norms, where W_A is the writer's W_OV and W_B the reader's "
        "W_QK on the query side (Q), on the key side (K), or its W_OV (V). Cells print the score; the colour "
        "divides it by the mean score of random Gaussian matrices of the same shapes (in each title), so white "
        "means chance and orange means more. An induction head K-composes with a previous-token head (its "
        "keys read the previous token); the Depth page measures which heads feed its queries.")
    python_panel(snippets.composition(entry), shows={"score": comp["score"], "baseline": base})
    if rope_k(entry)["sentence"]:
        st.markdown("**Why the previous-token head need not top the K column.** " + rope_k(entry)["sentence"])

st.subheader("Ablations: knock heads out")
st.markdown("**What a head does shows when it is switched off**: a head the circuit relies on costs the later "
            "copies a lot, however its pattern looks.")
if ask(quiz.ablation_compare(ablation_grid(entry, "zero")), hides="the ablation of every head"):
    a_col, m_col = st.columns([1, 2])
    chosen = a_col.multiselect("Heads to ablate", labels, key="cir_ablate")
    mode = a_col.radio("Replace their output by", ["zero", "mean"], key="cir_mode", horizontal=True,
                       help="mean: each head's average output at that position over the evaluation batch.")
    table = ablate(entry, tuple((h, mode) for h in chosen))
    for col, name, label in zip(m_col.columns(3), ["loss_later_copies", "acc_later_copies", "loss_first_copy"],
                                ["later-copy loss (nats)", "later-copy accuracy", "first-copy loss (nats)"]):
        row = table.loc[name]
        col.metric(label, f"{row['ablated']:.3f}", delta=f"{row['delta']:+.3f}" if chosen else None,
                   delta_color="inverse" if name.startswith("loss") else "normal")
    m_col.caption(f"{views.EVAL_SEQS} sampled task sequences; the number under each metric is the change from "
                  "the intact model. " + ("Pick heads to see what breaks." if not chosen else ""))
    if chosen:
        m_col.dataframe(table.rename(columns={"clean": "before", "ablated": "after", "delta": "change"})
                        .style.format("{:+.3f}",
                        subset=["change"]).format("{:.3f}", subset=["before", "after"]), width="stretch")
    python_panel(snippets.ablation(entry, chosen, mode), shows={"table": table[["clean", "ablated", "delta"]]},
                 where=m_col)

    grid = ablation_grid(entry, mode)
    g1, g2 = st.columns(2)
    draw(g1, charts.ablation_heatmap(grid, "loss_later_delta", "Change in later-copy loss", "Δ loss (nats)"),
                    width="content")
    draw(g2, charts.ablation_heatmap(grid, "acc_later_delta", "Change in later-copy accuracy", "Δ accuracy"),
                    width="content")
    st.caption(f"**What am I looking at?** Each head {mode}-ablated on its own, everything else intact: orange "
               "cells made the metric go up, blue ones down. Heads the circuit relies on stand out; a head with "
               "a striking pattern but a pale cell here does little (attention weights alone do not show effect: "
               "Jain & Wallace 2019; Wiegreffe & Pinter 2019).")
    python_panel(snippets.ablation_grid(entry, mode), shows={"grid": grid[["loss_later_delta", "acc_later_delta"]]})
