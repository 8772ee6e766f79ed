"""Group an induction head's attention-score split (core.reading.score_terms.mean_induction_score_terms) by what
each side reads, using the measured roles of the earlier block's heads.

The split's rows are paths into the query, its columns paths into the key: "direct" (the raw token
embedding), "1.h" (what block-1 head h wrote at that position), "b_Q"/"b_K" (biases). A block-1
head's role is read from its attention on sampled sequences (core.reading.heads): "self" when it attends to
its own position (self >= ROLE_SHARE: its output is a rewrite of the current token), "previous" when
it attends to the previous position (prev_token >= ROLE_SHARE), otherwise "other".

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.model.lazy import no_grad
from core.model.symbols import head_label
from core.model.task import TaskConfig, sample_batch

if TYPE_CHECKING:
    from core.model.tinycharlm import TinyCharLM

ROLE_SHARE = 0.5
GROUPS = ("token × token", "raw-token query × head-written key", "self-head query × prev-head key",
          "prev-head query × other-head key", "rest")
GROUP_HELP = {
    GROUPS[0]: "The raw token embedding on both sides.",
    GROUPS[1]: "The query is the raw token; the key is what a block-1 head wrote there (K-composition alone).",
    GROUPS[2]: "The query is the current token as a self-attending block-1 head rewrote it (Q-composition); the key "
               "is the previous token a previous-token head wrote there (K-composition).",
    GROUPS[3]: "The query is the query's previous token (from a previous-token head); the key is what another "
               "block-1 head wrote there: a match on two tokens instead of one.",
    GROUPS[4]: "Every other pair, biases included.",
}


@no_grad
def head_roles(model: TinyCharLM, task: TaskConfig, layer: int = 0) -> dict[str, str]:
    """{"l.h" label (1-based): "self" | "previous" | "other"} for the heads of `layer`, on 32 sequences."""
    import torch

    from core.reading.heads import head_scores

    tokens, periods = sample_batch(task, 32, model.cfg.vocab_size, generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens, per_head=False)
    s = head_scores(cache["pattern"][layer], periods)
    roles = {}
    for h in range(model.cfg.n_heads):
        own, prev = float(s["self"][h]), float(s["prev_token"][h])
        roles[head_label(layer, h)] = ("self" if own >= ROLE_SHARE and own >= prev else
                                         "previous" if prev >= ROLE_SHARE else "other")
    return roles


def score_groups(result: dict, roles: dict[str, str] | None = None) -> dict[str, float]:
    """Sum the (query path x key path) terms of `result` (q_labels, k_labels, terms [Pq, Pk]) into
    GROUPS; they add up to result["total"]. roles: head_roles of the earlier block (None: every head
    "other", so the two role groups stay 0)."""
    roles = roles or {}
    terms = result["terms"]
    out = dict.fromkeys(GROUPS, 0.0)
    for i, q in enumerate(result["q_labels"]):
        for j, k in enumerate(result["k_labels"]):
            v = float(terms[i, j])
            k_head = k in roles or (k != "direct" and not k.startswith("b_"))
            if q == "direct" and k == "direct":
                out[GROUPS[0]] += v
            elif q == "direct" and k_head:
                out[GROUPS[1]] += v
            elif roles.get(q) == "self" and roles.get(k) == "previous":
                out[GROUPS[2]] += v
            elif roles.get(q) == "previous" and k_head and k != q:
                out[GROUPS[3]] += v
            else:
                out[GROUPS[4]] += v
    return out
