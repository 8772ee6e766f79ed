"""The circuit as a whole (Wang et al., 2022, section 4): keep a circuit's paths, mean-ablate everything
else, and measure how much of M it keeps; then completeness and minimality.

For a 2-block model a circuit is a set of elements:
- ("path", h, p): block-1 head h's output reaches every block-2 head's input p ("q", "k" or "v");
- ("direct", h): block-1 head h's output reaches the logits directly;
- ("head", h): block-2 head h's output reaches the logits.
Everything not in the circuit carries the head's mean output instead (at each position, over the corrupted
runs: the reference distribution, like Wang et al.'s ABC prompts). The run is the clean one. F(C) is M with
only C intact; F(all) = M(clean); recovered = (F(C) - F(none)) / (F(all) - F(none)).

- completeness: for each element v of C, |F(C minus v) - F(all minus v)| (Wang et al.'s K = {v}, and K = C:
  F(none) against F(all minus C)). Small = the circuit behaves like the model under the same knockouts.
- minimality: for each v in C, F(C) - F(C minus v) (Wang et al.'s K = empty). Large = v is needed in C.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.causal.patching import PatchRuns, metric
from core.causal.path_patching import PATHS, receiver_edits
from core.model.hooks import hook_name
from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM


def elements(model: TinyCharLM) -> frozenset:
    """Every element of a 2-block model (the whole model as a circuit)."""
    H = model.cfg.n_heads
    return frozenset({("path", h, p) for h in range(H) for p in PATHS} | {("direct", h) for h in range(H)}
                     | {("head", h) for h in range(H)})


def describe(element: tuple) -> str:
    """'1.4 -> k', '1.4 -> logits', '2.1' (labels from core.model.symbols)."""
    if element[0] == "path":
        return f"{head_label(0, element[1])} → {element[2]}"
    if element[0] == "direct":
        return f"{head_label(0, element[1])} → logits"
    return head_label(1, element[1])


def _check(model: TinyCharLM, circuit) -> frozenset:
    if model.cfg.n_layers != 2:
        raise ValueError(f"The circuit test is written for 2-block models; this one has {model.cfg.n_layers}.")
    circuit = frozenset(circuit)
    unknown = circuit - elements(model)
    if unknown:
        raise ValueError(f"Not elements of this model: {sorted(map(str, unknown))} (see circuit.elements).")
    return circuit


@torch.no_grad()
def faithfulness(model: TinyCharLM, runs: PatchRuns, circuit) -> float:
    """F(circuit): M on the clean run with every element outside `circuit` mean-ablated."""
    circuit = _check(model, circuit)
    H = model.cfg.n_heads
    clean1, clean2 = runs.clean_cache["head_out"][0], runs.clean_cache["head_out"][1]  # [B, H, T, D]
    mean1 = runs.corrupted_cache["head_out"][0].mean(0, keepdim=True)
    mean2 = runs.corrupted_cache["head_out"][1].mean(0, keepdim=True)
    off1 = mean1 - clean1  # what ablating a block-1 head's output adds to a stream
    edits = {}
    for p in PATHS:
        gone = [h for h in range(H) if ("path", h, p) not in circuit]
        if gone:
            edits.update(receiver_edits(model, 1, range(H), p, off1[:, gone].sum(1)[None]))
    result = hook_name(1, "attn.hook_result")
    _, cache = model.run_with_hooks(resid=runs.clean_cache["resid"][1][None], start=1, stop=2, edits=edits,
                                    cache=[result])
    out2 = cache[result][0]  # [B, H, T, D]: block 2's outputs with the circuit's inputs
    final = runs.clean_cache["resid"][2].clone()
    for h in range(H):
        if ("direct", h) not in circuit:
            final += off1[:, h]
        final += (out2[:, h] if ("head", h) in circuit else mean2[:, h]) - clean2[:, h]
    logits, _ = model.run_with_hooks(resid=final, start=2)
    return float(metric(logits, runs.clean, runs.periods))


def circuit_report(model: TinyCharLM, runs: PatchRuns, circuit) -> dict:
    """{f_model, f_circuit, f_none, recovered, rows}: rows one per element of the circuit (element, label,
    completeness |F(C-v) - F(all-v)|, minimality F(C) - F(C-v)) plus a row "the whole circuit" for K = C
    (completeness |F(none) - F(all - C)|)."""
    circuit = _check(model, circuit)
    every = elements(model)
    f_model, f_c, f_none = faithfulness(model, runs, every), faithfulness(model, runs, circuit), \
        faithfulness(model, runs, frozenset())
    rows = []
    for v in sorted(circuit, key=str):
        f_cv = faithfulness(model, runs, circuit - {v})
        rows.append({"element": v, "label": describe(v),
                     "completeness": abs(f_cv - faithfulness(model, runs, every - {v})), "minimality": f_c - f_cv})
    rows.append({"element": None, "label": "the whole circuit",
                 "completeness": abs(f_none - faithfulness(model, runs, every - circuit)), "minimality": f_c - f_none})
    span = f_model - f_none
    return {"f_model": f_model, "f_circuit": f_c, "f_none": f_none,
            "recovered": (f_c - f_none) / span if span else float("nan"),
            "rows": pd.DataFrame(rows, columns=["element", "label", "completeness", "minimality"])}


def found_circuit(paths: pd.DataFrame, needed: float) -> frozenset:
    """The circuit the page's path patching finds: each block-1 path into all of block 2 whose noising
    interval ends below `needed` (testable rows only), and every block-2 head."""
    rows = paths[(paths["direction"] == "noising") & (paths["receiver_head"] < 0) & paths["testable"].astype(bool)
                 & (paths["effect_high"] < needed)]
    H = int(paths["sender_head"].max()) + 1 if len(paths) else 0
    return frozenset({("path", int(r.sender_head), r.path) for r in rows.itertuples()}
                     | {("head", h) for h in range(H)})


def page_circuit(model: TinyCharLM, runs: PatchRuns, paths: pd.DataFrame) -> dict:
    """circuit_report of found_circuit(paths) at clarity.NEEDED, with "elements": their labels (the page's view),
    "missing_queries": the block-1 query paths it leaves out, and "with_queries": the share of M it keeps with
    every block-1 query path added (a path noised alone can cost little while the query paths together carry
    much: under first-copy none of them can be tested)."""
    from core.causal.clarity import NEEDED

    found = found_circuit(paths, NEEDED)
    rep = circuit_report(model, runs, found)
    rep["elements"] = sorted(describe(e) for e in found)
    queries = {("path", h, "q") for h in range(model.cfg.n_heads)}
    rep["missing_queries"] = sorted(describe(e) for e in queries - found)
    span = rep["f_model"] - rep["f_none"]
    rep["with_queries"] = ((faithfulness(model, runs, found | queries) - rep["f_none"]) / span if span
                           else float("nan"))
    return rep
