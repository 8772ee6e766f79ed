"""What the Causal page may say of the researcher's checks (core.causal.checks), decided from the numbers just
measured, by the rules of core.causal.readings: a sentence only when the runs differ enough
(clarity.clear_gap), else None. Heads are labelled as core.model.symbols labels them ("1.4").
"""
from __future__ import annotations

import pandas as pd

from core.causal import clarity
from core.causal.readings import top_senders
from core.model.symbols import block_label

CANCELS = 0.1  # a head's direct path "carries about nothing" when its estimate is below this share of the rest


def signed(x: float) -> str:
    """x to three places with its sign, 0 as +0.000 (never -0.000)."""
    out = f"{x:+.3f}"
    return "+0.000" if out == "-0.000" else out


def _heads(labels) -> str:
    labels = list(labels)
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def positions_sentence(positions: pd.DataFrame, whole: pd.DataFrame, period: int | None, gap: float,
                       corruption: str) -> str | None:
    """Where the most needed key path acts (checks.path_positions and whole_paths): by receiver position
    its cells add up to the whole path, by sender position how much of it sits at the first copy, and what the
    mean reference changes; under first-copy, the query path the mean reference finds most needed."""
    if positions is None or not len(positions) or not clarity.clear_gap(gap):
        return None
    w = whole.set_index(["reference", "path", "sender"])
    k = whole[(whole["reference"] == "corrupted") & (whole["path"] == "k")]
    top = k.loc[k["lost"].idxmax()]
    s = top["sender"]
    out = (f"Noising {s}'s key path into all of block 2 loses {top['lost']:.3f} of M(clean) − M(corrupted), and "
           "one receiver position at a time the cells add up to exactly that: block 2 is the last block, so its "
           "output at one position reaches only that position's logits. One sender position at a time they sum "
           f"to {top['sender_sum']:.3f} instead: a key is read by every later query through a softmax.")
    if period:
        cells = positions[(positions["reference"] == "corrupted") & (positions["by"] == "sender")
                          & (positions["path"] == "k") & (positions["sender"] == s)]
        lost = -cells["change"].to_numpy()
        if lost.sum() > 0:
            out += (f" {lost[:period].sum() / lost.sum():.0%} of those cells' loss sits at the first copy's "
                    f"positions 0 … {period - 1}, where the induction heads find the token to copy.")
    mean = w.loc[("mean", "k", s), "lost"]
    out += (f" With the mean over the corrupted runs as the reference (Wang et al., 2022) the same path loses "
            f"{mean:.3f}.")
    if corruption == "first-copy":
        q = whole[(whole["reference"] == "mean") & (whole["path"] == "q")]
        qt = q.loc[q["lost"].idxmax()]
        out += (" Under this corruption each sequence's own corrupted run leaves the second copy's tokens as they "
                "were, so the query rows can test little; the mean differs there, and with it the most needed query "
                "path is "
                f"{qt['sender']}'s ({qt['lost']:.3f} lost; with the corrupted runs "
                f"{signed(w.loc[('corrupted', 'q', qt['sender']), 'lost'])}).")
    return out


def graddrop_sentence(table: pd.DataFrame, gap: float) -> str | None:
    """GradDrop (checks.graddrop) for each block-1 head whose AtP* sum has the wrong sign: whether its direct
    path and its path through the later blocks cancel, which is what GradDrop can uncover."""
    if table is None or not len(table) or not clarity.clear_gap(gap):
        return None
    last = int(table["layer"].max())
    if last != 1:
        return None  # dropping the last block leaves only the direct path of a block-1 head in 2-block models
    dropped = f"dropped_layer{last}"
    early = table[table["layer"] < last]
    wrong = early[(early["star_sum"] > 0) != (early["exact_sum"] > 0)]
    out = ("**GradDrop** (Kramár et al., 2024), AtP*'s second fix, repeats the estimate once per block with the "
           "backward pass through that block dropped and ranks heads by the summed absolute values (divided by the "
           "number of blocks − 1). It is meant for cancellation: a head whose paths to M have opposite signs gets a "
           "small estimate however large each path is. Its score ranks heads and has no sign, so it cannot correct "
           "a sign, and it estimates no patch effect: a head at or above every dropped block counts its estimate "
           "once per block. ")
    if not len(wrong):
        return out + "Here AtP* has the sign of every earlier-block head's sum right."
    parts = []
    for r in wrong.itertuples():
        direct, through = getattr(r, dropped), r.star_sum - getattr(r, dropped)
        if abs(direct) < CANCELS * abs(through):
            parts.append(f"{r.label}: exact {signed(r.exact_sum)}, AtP* {signed(r.star_sum)}; with "
                         f"{block_label(last)}'s gradient dropped only its direct path is left, estimated "
                         f"{signed(direct)} "
                         f"(exactly {signed(r.direct_exact)}), so nothing cancels: GradDrop's score is "
                         f"{r.graddrop:.3f}, AtP*'s sum {signed(r.star_sum)}")
        elif (direct > 0) != (through > 0):
            parts.append(f"{r.label}: its direct path ({signed(direct)}) and its path through {block_label(last)} "
                         f"({signed(through)}) cancel; GradDrop ranks it with a score of {r.graddrop:.3f}")
        else:
            parts.append(f"{r.label}: its direct path ({signed(direct)}) and its path through {block_label(last)} "
                         f"({signed(through)}) have the same sign, so nothing cancels")
    said = "; ".join(parts)
    return out + (f"Where AtP*'s sign is wrong — {said}. The error sits inside the path through the later block "
                  "(what M, a log-probability, does with what the changed pattern copies), which no dropped "
                  "gradient removes.")


def _range(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"{lo:.3f}–{hi:.3f}"


def _separates(frame: pd.DataFrame, score: str, back: list[str], self_: list[str]) -> bool:
    """Every look-back writer scores above every self-attending one, for every receiver."""
    for _, sub in frame.groupby("receiver"):
        s = sub.set_index("sender")[score]
        if s[back].min() <= s[self_].max():
            return False
    return True


def rope_sentence(frame: pd.DataFrame, offsets: pd.DataFrame | None, gap: float) -> str | None:
    """The RoPE-aware score (checks.rope_composition) against the plain one and key-path patching: how often
    each names the most needed key writer, and whether it separates the block-1 heads that look back (top
    offset >= 1 in experiments.block1_offsets) from those that attend to their own position."""
    if frame is None or not len(frame) or "k_rope" not in frame or not clarity.clear_gap(gap):
        return None
    plain, rope = top_senders(frame, "k_score"), top_senders(frame, "k_rope")
    d = sorted(set(frame["receiver_offset"]))
    out = (f"Turned by the offsets the block-2 heads attend at (most attended: {_heads([str(x) for x in d])}), the "
           f"score names the most needed key writer for {int(rope['agree'].sum())} of {len(rope)} block-2 heads, "
           f"as key-path patching finds it; the plain score for {int(plain['agree'].sum())} of {len(plain)}.")
    if offsets is None:
        return out
    top = offsets[offsets["top"]].set_index("sender")["offset"]
    back, self_ = [s for s in top.index if top[s] >= 1], [s for s in top.index if top[s] == 0]
    if not back or not self_:
        return out
    by = frame.groupby("sender")
    rng = {s: (_range(by.get_group(s)["k_score"]), _range(by.get_group(s)["k_rope"])) for s in back + self_}
    sep = {score: _separates(frame, score, back, self_) for score in ("k_score", "k_rope")}
    verdict = {(True, True): "Both scores separate", (False, True): "Only the RoPE-aware score separates",
               (True, False): "Only the plain score separates", (False, False): "Neither score separates"}[
        (sep["k_score"], sep["k_rope"])]
    return out + (f" {verdict} the heads that look back ({_heads(back)}) from those that attend to their own "
                  f"position ({_heads(self_)}) for every receiver: plain " + ", ".join(
                      f"{s} {rng[s][0]}" for s in back + self_) + "; RoPE-aware " + ", ".join(
                      f"{s} {rng[s][1]}" for s in back + self_) + ".")


def circuit_sentence(circ: dict | None, gap: float, corruption: str) -> str | None:
    """What the reference changes (core.causal.circuit.page_circuit's "other"): the circuit the corrupted-run
    reference chooses and scores, against the mean's; under first-copy, why the query paths differ. None without
    a circuit or with too small a gap."""
    if circ is None or "other" not in circ or not clarity.clear_gap(gap):
        return None
    other = circ["other"]
    only_mean = [e for e in circ["elements"] if e not in other["elements"]]
    only_other = [e for e in other["elements"] if e not in circ["elements"]]
    out = (f"With each sequence's own corrupted run as the reference instead, for choosing and scoring alike, the "
           f"circuit is {', '.join(other['elements']) or 'empty'} and keeps {other['recovered']:.0%} of its own span "
           f"(M {other['f_circuit']:.2f} against {other['f_model']:.2f} nats, {other['f_none']:.2f} with everything "
           f"ablated to the corrupted runs).")
    if not any(not e.startswith("1.") for e in other["elements"]):
        out += (" No block-2 head is clearly needed alone under that reference, so nothing of that circuit reaches "
                "the logits.")
    if only_mean or only_other:
        out += " The two references disagree on " + _heads(only_mean + only_other) + "."
    else:
        out += " The two references choose the same elements."
    queries = [e for e in only_mean if e.endswith("→ q")]
    if corruption == "first-copy" and queries:
        out += (" Under first-copy the corrupted runs keep each second copy as it was, so a sequence's own corrupted "
                f"run leaves the query paths untouched: only the mean reference can find {_heads(queries)} needed.")
    return out


def minimality_sentence(circ: dict | None) -> str | None:
    """What a minimality near 0 or below says in this circuit (core.causal.circuit.page_circuit): the rule "not
    needed in the circuit" holds only for a circuit that keeps most of the span; each such element's cost knocked
    out of the whole model alone, beside it. None without a circuit or without such an element."""
    if circ is None or "knockouts" not in circ:
        return None
    rows = circ["rows"]
    each = rows[rows["element"].notna()]
    low = each[each["minimality"] <= 0.0]
    if not len(low):
        return None
    cost = circ["knockouts"].set_index("label")
    parts = [f"{r.label}: minimality {signed(r.minimality)} nats, yet knocked out of the whole model alone it costs "
             f"{cost.loc[r.label, 'lost_nats']:.2f} nats ({1 - cost.loc[r.label, 'kept']:.0%} of the span)"
             for r in low.itertuples()]
    most = cost["lost_nats"].idxmax()
    rank = f", the most of all {len(cost)} elements" if most in set(low["label"]) else ""
    return ("Minimality near 0 or below reads \"not needed in the circuit\" only for a circuit that does the model's "
            f"job; this one keeps {circ['recovered']:.0%} of the span, so a small loss without an element may mean "
            "the rest of the circuit already falls short, not that the element does nothing. "
            + "; ".join(parts) + rank + ".")


def fresh_sentence(circ: dict | None, fresh: dict | None, n_seqs: int) -> str | None:
    """The circuit scored again on sequences it was not chosen on (core.causal.circuit.fresh_report) beside its
    score on the n_seqs sequences it was chosen on. None without either."""
    if circ is None or fresh is None:
        return None
    return (f"Chosen and scored on the same {n_seqs} sequences, the circuit keeps {circ['recovered']:.0%} of the "
            f"span; scored again on {fresh['n_seqs']} fresh sequences drawn with another seed, which it was not "
            f"chosen on, it keeps {fresh['recovered']:.0%} "
            f"(M {fresh['f_circuit']:.2f} against {fresh['f_model']:.2f} nats, {fresh['f_none']:.2f} with "
            "everything at its mean).")
