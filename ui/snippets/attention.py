"""Snippets of the Attention page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from core.model.symbols import parse_head_label
from ui.python_panel import Snippet
from ui.snippets.fill import Code
from ui.snippets.load import snippet


def _task_view(model, task, PERIOD, SEED):
    from core.reading import analysis
    view = analysis.task_sequence_view(model, task, period=PERIOD, seed=SEED)
    return view


def _text_view(model, TEXT):
    from core.reading import analysis
    view = analysis.text_view(model, TEXT)
    return view


def _view(period, seed, text) -> tuple:
    """The piece that computes the page's view, and its values."""
    return (_task_view, {"PERIOD": period, "SEED": seed}) if text is None else (_text_view, {"TEXT": text})


def _pattern(view, LAYER, HEAD, WHICH, LABEL):
    """WHICH: `raw` or `weighted`."""
    pattern = view.WHICH[LAYER, HEAD]  # head LABEL: [query i, key j]; view.WHICH is [block, head, i, j]
    print("".join(view.labels))
    print(pattern.round(2))
    return {"pattern": pattern}


def attention_pattern(entry, period, seed, text, label: str, weighted: bool) -> Snippet:
    layer, head = parse_head_label(label)
    view, values = _view(period, seed, text)
    return snippet(f"Head {label}'s {'value-weighted ' if weighted else ''}attention pattern on this sequence.", entry,
                   view, _pattern, LAYER=layer, HEAD=head, WHICH=Code("weighted" if weighted else "raw"), LABEL=label,
                   **values)


def _scores(view):
    print(view.scores.round(3).to_string(index=False))
    return {"scores": view.scores.drop(columns=["label", "layer", "head"])}


def attention_scores(entry, period, seed, text) -> Snippet:
    view, values = _view(period, seed, text)
    return snippet("Every head's scores (label block.head counted from 1; layer and head from 0).", entry, view,
                   _scores, **values)


def _offsets(view):
    offsets = view.offsets  # label, layer, head, offset, mass
    print(offsets.pivot_table(index="offset", columns="label", values="mass").round(3).head(40))
    return {"mass": view.offsets["mass"]}


def attention_offsets(entry, period, seed, text) -> Snippet:
    view, values = _view(period, seed, text)
    return snippet("Mean attention k positions back, A[i, i-k], for every head and offset.", entry, view, _offsets,
                   **values)


def _probe(model, task, PERIOD):
    from core.reading import analysis
    sweep = analysis.sweep_view(model, task)  # one row per period
    probe = analysis.probe_view(model, task, period=PERIOD)
    print(sweep.round(3).to_string(index=False))
    print(probe["metrics"])
    print(probe["mass"].round(3).to_string(index=False))
    return {"metrics": [probe["metrics"][k] for k in ("acc_second_copy", "acc_later_copies", "loss_later_copies")],
            "mass": probe["mass"]["mass"]}


def period_probe(entry, period) -> Snippet:
    return snippet("The period-shift probe: accuracy at every period, and the metrics at the probe period.", entry,
                   _probe, PERIOD=period)
