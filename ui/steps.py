"""The "training step" control: look at the picked model as it was at a snapshot of its training
(checkpoint format version 2, core.model.snapshots). Shared by the Attention and Circuits pages."""
from __future__ import annotations

import streamlit as st

from ui.state import LabModel, require_heads, require_model


def final_step(entry: LabModel) -> int | None:
    """The step of the file's top-level weights (None when the file does not say)."""
    done = (entry.info.get("train") or {}).get("steps_done")
    return done if isinstance(done, int) else None


FINAL = -1  # the slider's value for the final (top-level) weights

def step_options(entry: LabModel) -> list[int]:
    """The snapshot steps, then FINAL for the top-level weights."""
    return [s["step"] for s in entry.info.get("snapshots") or []] + [FINAL]


def own_step(entry: LabModel, key: str) -> int | None:
    """Give the slider `key`_step to `entry`: a step picked on another model (another run, other snapshots)
    does not carry over, the slider starts at FINAL. Returns the step left behind on the other model (None
    when there was none, or the model is the same), so the page can say why the slider moved."""
    owner, slider = f"{key}_step_model", f"{key}_step"
    if st.session_state.get(owner) == entry.key and slider in st.session_state:
        return None
    before = st.session_state.get(slider) if st.session_state.get(owner) not in (None, entry.key) else None
    st.session_state[owner] = entry.key
    st.session_state[slider] = FINAL
    return before if before not in (None, FINAL) else None


def step_control(entry: LabModel, key: str) -> LabModel:
    """A slider over the picked model's snapshots (nothing when it has none). Returns `entry` at the
    final step, or a LabModel of the snapshot's weights whose key names the step, so every cached
    computation on the page belongs to that step."""
    left_behind = own_step(entry, key)
    snaps = entry.info.get("snapshots") or []
    if not snaps:
        return entry
    final = final_step(entry)
    label = lambda s: str(s) if s != FINAL else (f"{final} (final)" if final is not None else "final")  # noqa: E731
    col, note = st.columns([2, 3])
    pick = col.select_slider("Training step", step_options(entry), key=f"{key}_step",
                             format_func=label, help="The weights as they were at this step of the training. "
                             "The file keeps a snapshot every 10 steps around the drop and fewer elsewhere.")
    if pick == FINAL:
        note.caption((f"**Training step:** step {left_behind} was picked on the model you looked at before; this "
                      "one starts at its finished weights. " if left_behind is not None else
                      "**Training step:** the finished model. ")
                     + f"Move the slider to see the same page at one of {len(snaps)} earlier snapshots of its "
                       "training.")
        return entry
    note.caption(f"**Training step {pick}:** every pattern, score and number on this page is computed from "
                 "the weights at that step (stored as float16), not from the finished model.")
    return entry.at_step(pick)


NO_HEADS = {  # key prefix of a page about heads -> what it says of a 0-block model
    "att": "This model has **no attention blocks**, so there are no heads and no patterns to show. Its guess "
           "for the next token depends on the current token alone, through the embedding's Gram matrix W_E "
           "W_Eᵀ. The depth page shows what that can and cannot learn.",
    "cir": "This model has **no attention blocks**, so it has no heads, no QK or OV circuits and nothing to "
           "ablate. All it has is the direct path: logits W_E[x] W_Eᵀ, a Gram matrix of the embeddings. The "
           "depth page takes that apart.",
}


def heads_at_step(prefix: str) -> LabModel:
    """The picked model of a page about heads, at the step its slider (key prefix `prefix`) picks. Stops the
    page with a message when there is no model, and with NO_HEADS[prefix] for a 0-block model."""
    entry = require_model()
    require_heads(entry, NO_HEADS[prefix])
    return step_control(entry, prefix)
