"""The researcher's checks on one pair of runs, beside core.causal.experiments.Experiments: path patching
per position and with a mean reference, GradDrop beside AtP*, and the RoPE-aware K-composition score. Each
returns numpy or pandas objects (0-based layer and head, labels from core.model.symbols); the Causal page
draws them and core.causal.check_readings says what they show.
"""
from __future__ import annotations

import pandas as pd

from core.causal import atp, composition, path_patching
from core.causal.patching import PatchRuns
from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM

# by sender position only the key path (each cell reruns block 2; the other paths' cells would triple the cost);
# by receiver position every path (block 2 runs once per sender, only the unembedding per cell)
POSITION_PATHS = {"sender": ("k",), "receiver": path_patching.PATHS}


def path_positions(model: TinyCharLM, runs: PatchRuns) -> pd.DataFrame:
    """Noising each block-1 head's path into all of block 2, resolved by position, under both references:
    path_patching.path_positions_table rows with reference, by and sender (label), for the paths of
    POSITION_PATHS. ValueError for fewer than two blocks."""
    if model.cfg.n_layers < 2:
        raise ValueError("Path patching needs two blocks: this model has fewer.")
    senders = [(0, h) for h in range(model.cfg.n_heads)]
    frames = []
    for reference in path_patching.REFERENCES:
        for by, paths in POSITION_PATHS.items():
            df = path_patching.path_positions_table(model, runs, senders, (1, None), paths, "noising", reference, by)
            df.insert(0, "reference", reference)
            df.insert(1, "by", by)
            frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out.insert(2, "sender", [head_label(l, h) for l, h in zip(out["sender_layer"], out["sender_head"])])
    return out


def whole_paths(positions: pd.DataFrame) -> pd.DataFrame:
    """Per reference, path and sender: the whole path's share of M lost (lost, the by-receiver cells summed:
    block 2 is the last block, so they add up to it exactly) and the by-sender cells summed (sender_sum, where
    measured). Rows: reference, path, sender, lost, sender_sum."""
    rows = []
    for (ref, path, sender), sub in positions.groupby(["reference", "path", "sender"], sort=True):
        rec, snd = sub[sub["by"] == "receiver"], sub[sub["by"] == "sender"]
        rows.append({"reference": ref, "path": path, "sender": sender, "lost": float(-rec["change"].sum()),
                     "sender_sum": float(-snd["change"].sum()) if len(snd) else float("nan")})
    return pd.DataFrame(rows, columns=["reference", "path", "sender", "lost", "sender_sum"])


def graddrop(model: TinyCharLM, runs: PatchRuns, exact, star) -> pd.DataFrame:
    """atp.graddrop_table against the exact one-head-one-position sweep and AtP* (both [n_layers, n_heads, T],
    as results.Experiments holds them: head_positions and attribution["star"], reshaped)."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    return atp.graddrop_table(model, runs, exact.reshape(L, H, -1), star.reshape(L, H, -1))


def rope_composition(model: TinyCharLM, runs: PatchRuns, paths: pd.DataFrame) -> pd.DataFrame:
    """composition.rope_composition_vs_paths (plain and RoPE-aware K-composition beside key-path noising), with
    each receiver's most attended offset (receiver_offset) and its mass there (offset_mass)."""
    frame = composition.rope_composition_vs_paths(model, runs, paths)
    mass = composition.receiver_offsets(runs, 1)
    top = {head_label(1, h): (int(mass[h].argmax()), float(mass[h].max())) for h in range(model.cfg.n_heads)}
    frame["receiver_offset"] = [top[r][0] for r in frame["receiver"]]
    frame["offset_mass"] = [top[r][1] for r in frame["receiver"]]
    return frame


def all_checks(model: TinyCharLM, runs: PatchRuns, res, fresh: PatchRuns | None = None) -> dict:
    """The cheap checks beside results.Experiments `res` (measured on these runs): {"graddrop": graddrop() or None
    without the position sweeps, "rope": rope_composition() or None, "circuit_fresh": res.circuit's elements scored
    on `fresh` runs (circuit.fresh_report; None without fresh runs or a circuit)}; all None below two blocks."""
    from core.causal import circuit

    if model.cfg.n_layers < 2:
        return {"graddrop": None, "rope": None, "circuit_fresh": None}
    return {"graddrop": graddrop(model, runs, res.head_positions, res.attribution["star"])
            if res.attribution is not None else None,
            "rope": rope_composition(model, runs, res.paths) if len(res.paths) else None,
            "circuit_fresh": circuit.fresh_report(model, fresh, circuit.chosen(res.circuit))
            if fresh is not None and res.circuit is not None else None}
