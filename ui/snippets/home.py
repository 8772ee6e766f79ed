"""The Home page's snippet (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _overview(model, task, N_SEQS, SEED):
    from core.training.overview import model_overview
    ov = model_overview(model, task, n_seqs=N_SEQS, seed=SEED)
    print(ov.metrics)
    print(ov.heads.round(3).to_string(index=False))
    return {"metrics": [ov.metrics[k] for k in ("loss_first_copy", "loss_later_copies", "acc_later_copies")],
            "heads": ov.heads.select_dtypes("number")}


def overview(entry, n_seqs: int, seed: int) -> Snippet:
    return snippet("The headline numbers and the head table of the picked model, measured on fresh sequences.",
                   entry, _overview, N_SEQS=n_seqs, SEED=seed)
