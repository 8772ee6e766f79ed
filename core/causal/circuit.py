"""The circuit as a whole (Wang et al., 2022, section 4): keep a circuit's paths, ablate everything else,
and measure how much of M it keeps; then completeness and minimality. A reduced version of their tests:
completeness is tried for K = {v} (each element alone) and K = C, never searched over subsets.

For a 2-block model a circuit is a set of elements:
- ("path", h, p): block-1 head h's output reaches every block-2 head's input p ("q", "k" or "v");
- ("direct", h): block-1 head h's output reaches the logits directly;
- ("head", h): block-2 head h's output reaches the logits.
The run is the clean one; every element outside the circuit carries the *reference* instead of the clean
output. One reference serves both to choose the circuit's elements and to score it:
- "mean": the head's mean output over the corrupted runs, at each position (Wang et al.'s mean ablation over
  a reference distribution, their ABC prompts). The default: under first-copy corruption every sequence's
  second copy is its clean one, so a reference made per sequence cannot test any query path; the mean can.
- "corrupted": each sequence's own corrupted run (what the page's path patching noises with).
F(C) is M with only C intact; F(all) = M(clean); recovered = (F(C) - F(none)) / (F(all) - F(none)), the span.

- choose(): the elements clearly needed one at a time: with that element alone ablated from the whole model,
  the share of the span kept has a 95% interval over the sequences ending below clarity.NEEDED.
- completeness: for each element v of C, |F(C minus v) - F(all minus v)| (Wang et al.'s K = {v}), and K = C:
  |F(none) - F(all minus C)|. Small = the circuit behaves like the model under the same knockouts.
- minimality: for each v in C, F(C) - F(C minus v). Large = v is needed in C. Taken at K = {} only: Wang et al.
  take the largest F(C minus (K + v)) - F(C minus K) over subsets K of C, which can only be larger.
Both in nats and as shares of the span.

How this differs from Wang et al. besides: the elements are paths (a block-1 head into one input of block 2, or
into the logits) and block-2 heads, not heads alone; the circuit is chosen by single knockouts, not searched; and
it is chosen and scored on the same sequences, so `fresh_report` scores the chosen elements again on sequences
drawn with another seed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.causal.clarity import NEEDED
from core.causal.patching import PatchRuns, metric_by_seq
from core.causal.path_patching import PATHS, receiver_edits
from core.model.hooks import hook_name
from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM
from core.reading import bootstrap

REFERENCES = ("mean", "corrupted")


def elements(model: TinyCharLM) -> frozenset:
    """Every element of a 2-block model (the whole model as a circuit)."""
    H = model.cfg.n_heads
    return frozenset({("path", h, p) for h in range(H) for p in PATHS} | {("direct", h) for h in range(H)}
                     | {("head", h) for h in range(H)})


def describe(element: tuple) -> str:
    """'1.4 → k', '1.4 → logits', '2.1' (labels from core.model.symbols)."""
    if element[0] == "path":
        return f"{head_label(0, element[1])} → {element[2]}"
    if element[0] == "direct":
        return f"{head_label(0, element[1])} → logits"
    return head_label(1, element[1])


def _order(element: tuple) -> tuple:
    """Paths, then direct paths, then block-2 heads; by head, then q, k, v."""
    kind = ("path", "direct", "head").index(element[0])
    return kind, element[1], PATHS.index(element[2]) if kind == 0 else 0


def _check(model: TinyCharLM, circuit, reference: str) -> frozenset:
    if model.cfg.n_layers != 2:
        raise ValueError(f"The circuit test is written for 2-block models; this one has {model.cfg.n_layers}.")
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {', '.join(REFERENCES)}, got {reference!r}.")
    circuit = frozenset(circuit)
    unknown = circuit - elements(model)
    if unknown:
        raise ValueError(f"Not elements of this model: {sorted(map(str, unknown))} (see circuit.elements).")
    return circuit


def _reference(runs: PatchRuns, layer: int, reference: str) -> torch.Tensor:
    """What an ablated head of `layer` carries: [1 or B, H, T, D]."""
    out = runs.corrupted_cache["head_out"][layer]
    return out.mean(0, keepdim=True) if reference == "mean" else out


@torch.no_grad()
def faithfulness_by_seq(model: TinyCharLM, runs: PatchRuns, circuit, reference: str = "mean") -> np.ndarray:
    """M of each clean sequence [B] with every element outside `circuit` ablated to `reference`."""
    circuit = _check(model, circuit, reference)
    H = model.cfg.n_heads
    clean1, clean2 = runs.clean_cache["head_out"][0], runs.clean_cache["head_out"][1]  # [B, H, T, D]
    off1 = _reference(runs, 0, reference) - clean1  # what ablating a block-1 head's output adds to a stream
    ref2 = _reference(runs, 1, reference)
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
        final += (out2[:, h] if ("head", h) in circuit else ref2[:, h]) - clean2[:, h]
    logits, _ = model.run_with_hooks(resid=final, start=2)
    return metric_by_seq(logits, runs.clean, runs.periods).double().numpy()


def faithfulness(model: TinyCharLM, runs: PatchRuns, circuit, reference: str = "mean") -> float:
    """F(circuit): M on the clean run with every element outside `circuit` ablated to `reference`."""
    w = runs.weights
    return float((faithfulness_by_seq(model, runs, circuit, reference) * w).sum() / w.sum())


def knockouts(model: TinyCharLM, runs: PatchRuns, reference: str = "mean") -> pd.DataFrame:
    """Each element ablated alone from the whole model: element, label, kept (the share of the span
    F(all) - F(none) that F(all minus v) keeps), kept_low, kept_high (its interval over the sequences,
    resampled with the span), lost_nats (F(all) - F(all minus v))."""
    every = elements(model)
    w = runs.weights
    f_all, f_none = (faithfulness_by_seq(model, runs, c, reference) for c in (every, frozenset()))
    order = sorted(every, key=_order)
    f_v = np.stack([faithfulness_by_seq(model, runs, every - {v}, reference) for v in order])  # [E, B]

    def share(idx):  # [N, B] -> [E, N]
        ws = w[idx]
        top, bottom = (f_all[idx] * ws).sum(-1), (f_none[idx] * ws).sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return ((f_v[:, idx] * ws).sum(-1) - bottom) / (top - bottom)

    low, high = bootstrap.sequence_interval(share, len(w))
    mean = lambda f: (f * w).sum(-1) / w.sum()  # noqa: E731
    span = mean(f_all) - mean(f_none)
    kept = (mean(f_v) - mean(f_none)) / span if span else np.full(len(order), np.nan)
    return pd.DataFrame({"element": order, "label": [describe(v) for v in order], "kept": kept,
                         "kept_low": low, "kept_high": high, "lost_nats": mean(f_all) - mean(f_v)})


def choose(model: TinyCharLM, runs: PatchRuns, reference: str = "mean", table: pd.DataFrame | None = None
           ) -> frozenset:
    """The circuit one reference finds: every element whose knockout alone (knockouts(), or `table` if given)
    keeps a share of the span with an interval ending below clarity.NEEDED."""
    table = knockouts(model, runs, reference) if table is None else table
    return frozenset(table.loc[table["kept_high"] < NEEDED, "element"])


def grow(model: TinyCharLM, runs: PatchRuns, start, reference: str = "mean") -> list[tuple[tuple, float]]:
    """Greedy additions to `start` until it keeps clarity.NEEDED of the span: each round adds the element that
    raises F(C) most; [(element, recovered after adding it)], at most 8 of them. What one knockout at a time
    misses: parts that each cost little alone but carry M together."""
    circuit = _check(model, start, reference)
    every = elements(model)
    f_model, f_none = faithfulness(model, runs, every, reference), faithfulness(model, runs, frozenset(), reference)
    span = f_model - f_none
    if not span:
        return []
    recovered = (faithfulness(model, runs, circuit, reference) - f_none) / span
    added = []
    while recovered < NEEDED and len(added) < 8 and circuit != every:
        scores = {v: faithfulness(model, runs, circuit | {v}, reference) for v in sorted(every - circuit, key=_order)}
        best = max(scores, key=scores.get)
        circuit = circuit | {best}
        recovered = (scores[best] - f_none) / span
        added.append((best, float(recovered)))
    return added


def circuit_report(model: TinyCharLM, runs: PatchRuns, circuit, reference: str = "mean") -> dict:
    """{reference, f_model, f_circuit, f_none, span (f_model - f_none), recovered, rows}: rows one per element
    of the circuit (element, label, completeness |F(C-v) - F(all-v)|, minimality F(C) - F(C-v), in nats, and
    completeness_share, minimality_share: the same over the span) plus a row "the whole circuit" for K = C
    (completeness |F(none) - F(all - C)|, minimality F(C) - F(none))."""
    circuit = _check(model, circuit, reference)
    every = elements(model)

    def f(c):
        return faithfulness(model, runs, c, reference)

    f_model, f_c, f_none = f(every), f(circuit), f(frozenset())
    rows = []
    for v in sorted(circuit, key=_order):
        f_cv = f(circuit - {v})
        rows.append({"element": v, "label": describe(v), "completeness": abs(f_cv - f(every - {v})),
                     "minimality": f_c - f_cv})
    rows.append({"element": None, "label": "the whole circuit", "completeness": abs(f_none - f(every - circuit)),
                 "minimality": f_c - f_none})
    span = f_model - f_none
    table = pd.DataFrame(rows, columns=["element", "label", "completeness", "minimality"])
    for c in ("completeness", "minimality"):
        table[f"{c}_share"] = table[c] / span if span else np.nan
    return {"reference": reference, "f_model": f_model, "f_circuit": f_c, "f_none": f_none, "span": span,
            "recovered": (f_c - f_none) / span if span else float("nan"), "rows": table}


def fresh_report(model: TinyCharLM, fresh: PatchRuns, circuit) -> dict:
    """The chosen circuit scored again on `fresh` runs (sequences it was not chosen on), with the mean reference
    it was chosen with: circuit_report's figures {reference, f_model, f_circuit, f_none, span, recovered} and its
    rows, plus n_seqs."""
    rep = circuit_report(model, fresh, circuit)
    rep["n_seqs"] = int(fresh.clean.shape[0])
    return rep


def chosen(circ: dict) -> frozenset:
    """The elements of page_circuit's circuit (its report's rows, the whole-circuit row aside)."""
    rows = circ["rows"]
    return frozenset(rows.loc[rows["element"].notna(), "element"])


def page_circuit(model: TinyCharLM, runs: PatchRuns) -> dict:
    """The Causal page's circuit: chosen and scored with the mean reference (circuit_report of choose()), with
    "elements" (their labels), "knockouts" (the table it was chosen from), "grown": grow()'s additions as
    [(label, recovered)], and "other": the same circuit test with the corrupted-run reference (elements,
    recovered, f_circuit, f_none, f_model, span), to show what the reference changes. The page's path patching
    plays no part: the circuit is chosen by its own reference."""
    out = {}
    for reference in REFERENCES:
        table = knockouts(model, runs, reference)
        found = choose(model, runs, reference, table=table)
        rep = circuit_report(model, runs, found, reference)
        rep["elements"] = [describe(e) for e in sorted(found, key=_order)]
        rep["knockouts"] = table
        out[reference] = rep
    main = out["mean"]
    main["grown"] = [(describe(v), r) for v, r in grow(model, runs, choose(model, runs, "mean",
                                                                          table=main["knockouts"]))]
    other = out["corrupted"]
    main["other"] = {k: other[k] for k in ("reference", "elements", "recovered", "f_circuit", "f_none", "f_model",
                                           "span")}
    return main
