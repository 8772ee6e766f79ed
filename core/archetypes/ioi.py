"""The indirect-object-identification (IOI) circuit of GPT-2 small (Wang et al. 2022), as data.

GPT-2 small is *not* run in this lab. The head ids below are the paper's published findings
("Interpretability in the Wild", Wang et al. 2022, arXiv:2211.00593), in the grouping that the
follow-up code bases use as the reference circuit: checked against the `IOI_CIRCUIT` table of the
ACDC repository (ArthurConmy/Automatic-Circuit-Discovery, acdc/ioi/utils.py) and its copy in
auto-circuit's IOI ground truth, which also list the connections between the groups (which input
of the receiving heads, at which token position). Heads are "layer.head", both 0-based, as in the
paper. The role and evidence texts are our own summaries.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core.archetypes.catalogue import name_positions

IOI_PROMPT = "When John and Mary went to the store, John gave a drink to"


@dataclass(frozen=True)
class HeadGroup:
    key: str
    label: str
    heads: tuple[tuple[int, int], ...]
    query: str  # the position the heads act at (see ioi_positions)
    reads: str  # the position they mostly attend to
    role: str
    evidence: str


GROUPS: tuple[HeadGroup, ...] = (
    HeadGroup(
        "previous_token", "previous-token", ((2, 2), (4, 11)), "S1+1", "S1",
        "Copy the first mention of the subject (S1) into the next position, so that position carries "
        "'the token before me was John'.",
        "Patching the path from these heads into the induction heads' keys at S1+1 hurt the circuit: "
        "the induction heads find S1+1 through what these heads wrote."),
    HeadGroup(
        "duplicate_token", "duplicate-token", ((0, 1), (0, 10), (3, 0)), "S2", "S1",
        "At the second mention of the subject (S2), attend back to its first mention and write "
        "'this token has appeared before'.",
        "Patching their output on the path into the S-inhibition heads (keys and values at S2) lowered "
        "the IO-over-S logit difference; their attention from S2 goes to S1."),
    HeadGroup(
        "induction", "induction", ((5, 5), (5, 8), (5, 9), (6, 9)), "S2", "S1+1",
        "A second route to the same signal: at S2, attend to the token after the earlier John (S1+1), "
        "again marking S as repeated.",
        "Same test as the duplicate-token heads (path into the S-inhibition heads at S2); their attention "
        "and their dependence on the previous-token heads match the induction mechanism."),
    HeadGroup(
        "s_inhibition", "S-inhibition", ((7, 3), (7, 9), (8, 6), (8, 10)), "END", "S2",
        "At the final position, read the 'S is repeated' signal and pass it on, so the name movers' "
        "queries steer away from the subject.",
        "Patching the path from these heads into the name movers' queries at END changed which name the "
        "name movers attended to: without their signal the name movers attend less to IO and more to S."),
    HeadGroup(
        "name_mover", "name-mover", ((9, 9), (9, 6), (10, 0)), "END", "IO",
        "At the final position, attend to the name that has not been repeated (the indirect object, IO) "
        "and copy it into the output, raising its logit.",
        "Patching the direct path from each head to the logits showed the largest direct effects on the "
        "IO-over-S logit difference; their OV circuits copy names and they attend to IO."),
    HeadGroup(
        "negative_name_mover", "negative name-mover", ((10, 7), (11, 10)), "END", "IO",
        "Attend to IO like the name movers but write against it, lowering the IO logit; the paper reads "
        "this as a hedge against over-confident answers.",
        "The same direct-path patching found these two heads with effects of the opposite sign; their OV "
        "circuits copy names negatively."),
    HeadGroup(
        "backup_name_mover", "backup name-mover",
        ((10, 10), (10, 6), (10, 2), (10, 1), (11, 2), (9, 7), (9, 0), (11, 9)), "END", "IO",
        "Mostly quiet on the clean prompt; when the name movers are knocked out, they start attending to "
        "IO and take over much of the lost work.",
        "Found only by ablating the name movers and patching again: their direct effect grows to "
        "compensate, which a single clean-run measurement would have missed."),
)

# (from group, to group, which input of the receivers, at which position), per the reference circuit
EDGES: tuple[tuple[str, str, str], ...] = (
    ("previous_token", "induction", "keys at S1+1"),
    ("duplicate_token", "s_inhibition", "keys/values at S2"),
    ("induction", "s_inhibition", "keys/values at S2"),
    ("s_inhibition", "name_mover", "queries at END"),
    ("s_inhibition", "negative_name_mover", "queries at END"),
    ("s_inhibition", "backup_name_mover", "queries at END"),
    ("name_mover", "logits", "output at END"),
    ("negative_name_mover", "logits", "output at END"),
    ("backup_name_mover", "logits", "output at END"),
)
LOGITS_X = 12  # GPT-2 small has layers 0..11; the logits sit one step after the last


def group_by_key() -> dict[str, HeadGroup]:
    return {g.key: g for g in GROUPS}


def heads_frame() -> pd.DataFrame:
    """One row per head: group, layer, head, id "l.h", and the lane/offset used to draw it."""
    rows = []
    for lane, g in enumerate(GROUPS):
        per_layer: dict[int, list[int]] = {}
        for layer, head in g.heads:
            per_layer.setdefault(layer, []).append(head)
        for layer, heads in per_layer.items():
            for k, head in enumerate(heads):
                rows.append({"group": g.label, "key": g.key, "lane": lane, "layer": layer, "head": head,
                             "id": f"{layer}.{head}", "y": lane + (k - (len(heads) - 1) / 2) * 0.24,
                             "role": g.role})
    return pd.DataFrame(rows)


def edges_frame() -> pd.DataFrame:
    """One row per group-to-group connection: from (last layer of source) to (first layer of receiver)."""
    groups = group_by_key()
    lane = {g.key: i for i, g in enumerate(GROUPS)}
    lane["logits"] = lane["name_mover"]
    rows = []
    for src, dst, via in EDGES:
        x0 = max(layer for layer, _ in groups[src].heads)
        x1 = LOGITS_X if dst == "logits" else min(layer for layer, _ in groups[dst].heads)
        # start right of the source's labels, stop just before the receiver's dots
        rows.append({"source": groups[src].label, "target": "logits" if dst == "logits" else groups[dst].label,
                     "via": via, "x": x0 + 0.5, "x2": x1 - 0.15, "y": lane[src], "y2": lane[dst]})
    return pd.DataFrame(rows)


def ioi_positions(tokens: list[str]) -> dict[str, int] | None:
    """Positions IO, S1, S1+1, S2, END in a word-tokenised IOI-shaped prompt (one name once, one twice),
    or None if the prompt does not have that shape."""
    names = name_positions(tokens)
    by_name: dict[str, list[int]] = {}
    for i in names:
        by_name.setdefault(tokens[i], []).append(i)
    once = [p[0] for p in by_name.values() if len(p) == 1]
    twice = [p for p in by_name.values() if len(p) == 2]
    if len(once) != 1 or len(twice) != 1 or twice[0][1] == len(tokens) - 1:
        return None
    s1, s2 = twice[0]
    return {"IO": once[0], "S1": s1, "S1+1": s1 + 1, "S2": s2, "END": len(tokens) - 1}


def roles_on_prompt(tokens: list[str]) -> pd.DataFrame | None:
    """For an IOI-shaped prompt: each group's query token and the token it attends to."""
    pos = ioi_positions(tokens)
    if pos is None:
        return None
    return pd.DataFrame([{
        "group": g.label, "acts at": f"{g.query} = {pos[g.query]} '{tokens[pos[g.query]]}'",
        "attends to": f"{g.reads} = {pos[g.reads]} '{tokens[pos[g.reads]]}'"} for g in GROUPS])
