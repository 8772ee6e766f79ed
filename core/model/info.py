"""A checkpoint's info without its weights: what a page reads of a model it has not loaded. Torch-free, so a
server that only reads shipped views, or only watches a training end, never imports torch for it."""
from __future__ import annotations


def info_view(full_info: dict) -> dict:
    """core.model.checkpoints.read_checkpoint's info, all of it except each snapshot's weights (its step stays)."""
    return {**full_info, "snapshots": [{"step": s["step"]} for s in full_info.get("snapshots") or []]}
