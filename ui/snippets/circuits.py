"""Snippets of the Circuits & ablations page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from core.model.symbols import parse_head_label
from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _head(model, task, LAYER, HEAD, LABEL):
    from core.reading import analysis
    hv = analysis.head_circuit_view(model, task, layer=LAYER, head=HEAD)  # head LABEL
    return hv


def _head_snippet(title: str, entry, label: str, piece) -> Snippet:
    layer, head = parse_head_label(label)
    return snippet(title, entry, _head, piece, LAYER=layer, HEAD=head, LABEL=label)


def _circuits(hv):
    print("W_QK", hv.qk.shape, "rank", hv.qk_rank, "singular values", hv.qk_s.round(3))
    print("W_OV", hv.ov.shape, "rank", hv.ov_rank, "singular values", hv.ov_s.round(3))
    return {"qk_s": hv.qk_s, "ov_s": hv.ov_s, "ranks": [hv.qk_rank, hv.ov_rank]}


def head_circuits(entry, label: str) -> Snippet:
    return _head_snippet(f"Head {label}'s QK and OV circuits and their singular values.", entry, label, _circuits)


def _profile(hv):
    for name, scores in hv.profile.items():
        print(name, scores.round(3))
    return {"profile": list(hv.profile.values())}


def rotary_profile(entry, label: str) -> Snippet:
    return _head_snippet(f"Head {label}'s score against the offset i - j (rotary positional profile).", entry, label,
                         _profile)


def _copying(hv):
    print("C", hv.C.shape)
    print("this head:", hv.copy)
    print("its block, heads summed:", hv.block_copy)
    print("effective embedding:", hv.copy_effective, hv.block_copy_effective)
    return {"copy": hv.copy, "block": hv.block_copy,
            "effective": [hv.copy_effective, hv.block_copy_effective]}


def copying(entry, label: str) -> Snippet:
    return _head_snippet(f"Head {label}'s OV copying matrix C = W_E W_OV W_Eᵀ and its copying scores.", entry, label,
                         _copying)


def _copying_table(model, task):
    from core.reading import analysis
    table = analysis.copying_table_view(model, task)  # effective columns: self-attention measured on the task
    print(table.round(3).to_string(index=False))
    return {"top1": table["ov_diag_top1"]}


def copying_table(entry) -> Snippet:
    return snippet("The diagonal-on-top copying score of every head and every block's sum.", entry, _copying_table)


def _composition(model):
    from core.reading import analysis
    scores, baseline = analysis.composition_view(model)
    print(baseline)
    print(scores.round(3).to_string(index=False))
    return {"score": scores["score"], "baseline": baseline}


def composition(entry) -> Snippet:
    return snippet("Q, K and V composition scores between blocks, and the random-matrix baseline.", entry,
                   _composition)


def _ablation(model, task, SPEC):
    from core.reading import analysis
    table = analysis.ablation_view(model, task, SPEC)  # {"block.head": "zero" or "mean"}
    print(table.round(3))
    return {"table": table[["clean", "ablated", "delta"]]}


def ablation(entry, heads: list[str], mode: str) -> Snippet:
    return snippet("Copy metrics before and after ablating the chosen heads.", entry, _ablation,
                   SPEC={h: mode for h in heads})


def _ablation_grid(model, task, MODE):
    from core.reading import analysis
    grid = analysis.ablation_grid_view(model, task, mode=MODE)
    print(grid.round(3).to_string(index=False))
    return {"grid": grid[["loss_later_delta", "acc_later_delta"]]}


def ablation_grid(entry, mode: str) -> Snippet:
    return snippet(f"Each head {mode}-ablated on its own: the change in later-copy loss and accuracy.", entry,
                   _ablation_grid, MODE=mode)
