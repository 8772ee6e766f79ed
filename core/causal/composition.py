"""Weight-based K-composition (core.reading.composition, Elhage et al., 2021) beside path patching of the
same key paths (core.causal.path_patching), from block 1 into each block-2 head.

Why they can disagree under RoPE: a key at position j is rotated by j and a query at i by i, so the score
reads x_i W_Q R_(j-i) W_K^T x_j^T. The weight-only product W_OV^w W_K W_Q^T of the K-composition score leaves
the rotation out: it scores a writer as if every key sat at the query's own position, and so cannot tell a
previous-token head (whose write matters one position back) from a self-attending one. Path patching runs
the model, rotation included, and measures what the key path does to M.
"""
from __future__ import annotations

import pandas as pd

from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM
from core.reading.composition import composition_matrix


def composition_vs_paths(model: TinyCharLM, paths: pd.DataFrame) -> pd.DataFrame:
    """One row per block-1 sender and block-2 receiver: sender, receiver (labels), k_score (weights), k_lost
    (1 - the noising effect of the sender's key path into that receiver: the share of M lost), testable.
    paths: views.Experiments.paths (path_patching.path_patch_table with sender/receiver labels).
    ValueError for fewer than two blocks or a paths frame without the key noising rows."""
    if model.cfg.n_layers < 2:
        raise ValueError("Composition needs two blocks: this model has fewer.")
    k = paths[(paths["path"] == "k") & (paths["direction"] == "noising") & (paths["receiver_layer"] == 1)
              & (paths["receiver_head"] >= 0)] if len(paths) else paths
    if not len(k):
        raise ValueError("paths has no key-path noising rows into block 2 (use views.Experiments.paths).")
    scores = composition_matrix(model, "K", 0, 1)
    rows = [{"sender": head_label(0, int(r.sender_head)), "receiver": head_label(1, int(r.receiver_head)),
             "k_score": float(scores[int(r.sender_head), int(r.receiver_head)]), "k_lost": 1 - float(r.patch_effect),
             "testable": bool(r.testable)} for r in k.itertuples()]
    return pd.DataFrame(rows, columns=["sender", "receiver", "k_score", "k_lost", "testable"])


def top_senders(frame: pd.DataFrame) -> pd.DataFrame:
    """Per receiver: the sender with the highest K-composition score and the one whose key path is most
    needed (rows receiver, by_weights, by_patching, agree)."""
    rows = []
    for rec, sub in frame.groupby("receiver", sort=True):
        w = sub.loc[sub["k_score"].idxmax(), "sender"]
        p = sub.loc[sub["k_lost"].idxmax(), "sender"]
        rows.append({"receiver": rec, "by_weights": w, "by_patching": p, "agree": w == p})
    return pd.DataFrame(rows, columns=["receiver", "by_weights", "by_patching", "agree"])
