"""Sections of the Causal page that test a whole circuit and its measurements (issue 32): the metric, weight
composition beside path patching, and the circuit as a whole, drawn from core.causal.views.Experiments."""
import streamlit as st

from core.causal import readings


def metric_section(res) -> None:
    """Section 1's head patching under three metrics (res.by_metric)."""
    if res.by_metric is None:
        return
    st.subheader("The metric: log-probability, logit difference, probability")
    bm = res.by_metric.pivot(index="label", columns="metric", values="patch_effect")
    st.dataframe(bm[["logprob", "logit_diff", "prob"]].rename(
        columns={"logprob": "log-prob (M)", "logit_diff": "logit difference", "prob": "probability"}))
    st.caption(
        "**What am I looking at?** Section 1's patching of each head, measured three ways (Heimersheim & "
        "Nanda, 2024): the right token's log-probability (M), its logit minus that of the token the "
        "corrupted first copy offers there, and its probability. The log-probability moves when any other "
        "token's logit moves; the logit difference compares the right answer with the wrong one the "
        "corruption offers and is linear in the final stream; the probability saturates near 0 and 1. "
        + (readings.metric_sentence(res) or ""))


def composition_section(res, gap: float) -> None:
    """Weight K-composition beside key-path noising (res.composition)."""
    comp = res.composition
    if comp is None:
        return
    st.subheader("Weight-based K-composition beside path patching")
    st.dataframe(comp.rename(columns={"k_score": "K-composition (weights)",
                                      "k_lost": "share of M lost, key path noised"}), hide_index=True)
    st.caption(
        "**What am I looking at?** For each block-1 sender and block-2 receiver, the K-composition score "
        "of the weights (Elhage et al., 2021; *Circuits & ablations*) beside what noising that key path "
        "costs. TinyCharLM rotates queries and keys by their position (RoPE), so the attention score reads "
        "x_i W_Q R_(j−i) W_Kᵀ x_jᵀ; the weight-only product W_OVᵀ W_QK leaves the rotation out, as if every "
        "key sat at the query's own position, and cannot tell a previous-token head from a self-attending "
        "one. Path patching runs the model, rotation included. "
        + (readings.composition_sentence(comp, gap) or ""))


def circuit_section(res) -> None:
    """The circuit path patching finds, as a whole (res.circuit)."""
    circ = res.circuit
    if circ is None:
        return
    st.subheader("The circuit as a whole")
    st.markdown(
        f"Keep only what path patching above finds needed ({', '.join(circ['elements'])}), give every other "
        "path and head its mean output over the corrupted runs, and run the clean sequences (Wang et al., "
        f"2022): the circuit keeps **{circ['recovered']:.0%}** of what the whole model has over the fully "
        f"ablated one (M {circ['f_circuit']:.2f} against {circ['f_model']:.2f}, and {circ['f_none']:.2f} "
        "with everything ablated).")
    st.dataframe(circ["rows"][["label", "completeness", "minimality"]].rename(
        columns={"label": "element removed (v)", "completeness": "completeness |F(C∖v) − F(M∖v)|",
                 "minimality": "minimality F(C) − F(C∖v)"}), hide_index=True)
    st.caption(
        "**What am I looking at?** *Completeness*: remove the same element from the circuit and from the "
        "whole model; a complete circuit behaves like the model under every such knockout (small values). "
        "*Minimality*: how much the circuit loses without that element; near 0 or below, it is not needed "
        "in the circuit. A path this corruption cannot test (under first-copy, every query path) is left "
        "out of the circuit and so ablated: where the circuit keeps little, that is where to look "
        "(resample tests the query paths).")
