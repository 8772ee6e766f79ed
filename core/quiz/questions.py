"""Predict-then-reveal questions: each answer is computed from the picked model's own numbers (the
same frames and dicts the pages draw), never typed in, so a question works on any model. When the
numbers give no clear answer (no induction head in a one-block model, two heads within noise of
each other) the Question has answer None and `why` says so instead of asking.

Heads are written as on screen, "block.head" counted from 1 (core.model.symbols.head_label); the
frames give them with 0-based layer and head and that label.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from core.causal import clarity
from core.causal.clarity import CLEAR_GAP
from core.model.symbols import head_label, long_head_label
from core.reading import CLEAR_SCORE
from core.reading.bootstrap import LEVEL


@dataclass
class Question:
    key: str  # stable id (the widget key on the page)
    prompt: str
    options: list[str]
    answer: str | None  # None: no clear answer for this model; `why` says why
    why: str  # the measured reason, shown after answering
    also: tuple[str, ...] = ()  # other options that count as right (a measurement that cannot tell them apart)


def is_right(q: Question, given: str | None) -> bool:
    return q.answer is not None and given is not None and (given == q.answer or given in q.also)


def no_answer(key: str, prompt: str, why: str) -> Question:
    return Question(key, prompt, [], None, why)


def top_two(values: dict[str, float]) -> tuple[str, float, float]:
    """(best key, its value, runner-up value) of finite values."""
    ranked = sorted(((v, k) for k, v in values.items() if v == v), reverse=True)
    best_v, best = ranked[0]
    return best, best_v, ranked[1][0] if len(ranked) > 1 else -math.inf


def previous_token_head(scores: pd.DataFrame, intervals: pd.DataFrame | None = None) -> Question:
    """scores: one row per head with label and prev_token (core.reading.analysis SequenceView.scores);
    intervals: SequenceView.intervals (prev_token_low, prev_token_high). With intervals the best head must
    clear the runner-up's interval with its own; without, by CLEAR_GAP."""
    prompt = "Which head is the previous-token head, the one that looks one position back?"
    if "prev_token" not in scores.columns or scores.empty:
        return no_answer("q_prev", prompt, "This view has no period scores (typed text): pick a sampled sequence.")
    vals = dict(zip(scores["label"], scores["prev_token"].astype(float)))
    best, v, second = top_two(vals)
    rows = scores.set_index("label")
    if intervals is not None and "prev_token_low" in intervals.columns:
        rows = rows.join(intervals.set_index("label")[["prev_token_low", "prev_token_high"]])
    if v < CLEAR_SCORE or not clarity.above_all({k: r for k, r in rows.iterrows()}, best, "prev_token"):
        return no_answer("q_prev", prompt, f"No single head stands out here (highest previous-token score {v:.2f}, "
                                       f"next {second:.2f}"
                                       + (f", within each other's {LEVEL:.0%} intervals" if intervals is not None
                                          else "")
                                       + "), so there is no clear answer for this model.")
    return Question("q_prev", prompt, list(vals), best,
                    f"Head {best} puts {v:.2f} of its attention on the previous position on average; the next "
                    f"highest head puts {second:.2f}. That is the line just below the diagonal of its pattern: it "
                    "writes 'the token before me' into each position, which an induction head's keys need.")


def induction_target(scores: pd.DataFrame, pattern_of, labels: list[str], period: int | None,
                     n_layers: int) -> Question:
    """Where does the strongest induction head attend at one query of the sequence on screen?
    pattern_of(layer0, head0) -> [T, T] numpy pattern of that sequence; labels: its token labels.
    The strongest head is ranked by induction_any (attention to the token after any earlier copy, as
    the home page ranks it) where the frame has it, else by induction (latest copy)."""
    prompt = "At the query below, where will the strongest induction head put most of its attention?"
    if n_layers < 2:
        return no_answer("q_ind", prompt, "This model has one block, so no head can read what another head wrote: "
                                      "there is no induction head and no induction target to predict.")
    col = "induction_any" if "induction_any" in scores.columns else "induction"
    if not period or col not in scores.columns:
        return no_answer("q_ind", prompt, "The induction target needs the period: pick a sampled task sequence.")
    row = scores.loc[scores[col].idxmax()]
    if float(row[col]) < CLEAR_SCORE:
        return no_answer("q_ind", prompt, f"No head attends to the induction target reliably (best score "
                                      f"{float(row[col]):.2f}), so there is no clear answer.")
    label, i = row["label"], min(period + period // 2, len(labels) - 1)
    attn = pattern_of(int(row["layer"]), int(row["head"]))[i]
    opts = {f"position {i - 1}: the previous token": i - 1,
            f"position {i + 1 - period}: the token after the earlier copy of this token": i + 1 - period,
            f"position {i - period}: the earlier copy of this token itself": i - period,
            "position 0: the first token": 0}
    best, v, second = top_two({k: float(attn[j]) for k, j in opts.items()})
    prompt = (f"Head {label} has the highest induction score ({col}). At query position {i} (token '{labels[i]}', "
              f"period {period}), where does it put most of its attention?")
    if v - second < CLEAR_GAP:
        return no_answer("q_ind", prompt, "Here the head splits its attention between these places, so there is no "
                                      "clear answer on this sequence.")
    return Question("q_ind", prompt, list(opts), best, f"Head {label} puts {v:.2f} of this row's attention at "
                    f"{best.split(':')[0]}; the next of these places gets {second:.2f}. An induction head finds "
                    "the earlier copy of the current token and looks one step past it, at the token that followed "
                    "it then, which is the best guess for what follows now.")


def top_copier(table: pd.DataFrame) -> Question:
    """table: core.reading.analysis.copying_table_view (label, head or "all", ov_diag_top1)."""
    prompt = "Which head's OV circuit copies most: for the most tokens, raises that same token's logit most?"
    heads = table[table["head"] != "all"]
    vals = dict(zip(heads["label"], heads["ov_diag_top1"].astype(float)))
    best, v, second = top_two(vals)
    if v - second < CLEAR_GAP:
        return no_answer("q_copy", prompt, f"Two heads copy about equally ({v:.2f} and {second:.2f}): no clear answer.")
    return Question("q_copy", prompt, list(vals), best,
                    f"Head {best}: the diagonal is on top in {v:.0%} of rows; the runner-up reaches {second:.0%}. "
                    "A copying head raises the logit of the very token it looks at, which is what the head that "
                    "moves the answer in an induction circuit must do.")


def ablation_compare(grid: pd.DataFrame) -> Question:
    """grid: core.reading.analysis.ablation_grid_view. Compares the head whose ablation hurts most with the
    head whose ablation hurts least, listed in label order so the answer is not always 'more'."""
    prompt = "Will ablating the first head below hurt the later-copy loss more or less than the second?"
    d = dict(zip(grid["label"], grid["loss_later_delta"].astype(float)))
    if len(d) < 2:
        return no_answer("q_abl", prompt, "This model has a single head: there is nothing to compare.")
    hi, lo = max(d, key=d.get), min(d, key=d.get)
    if d[hi] - d[lo] < CLEAR_GAP:
        return no_answer("q_abl", prompt,
                     "No head's ablation changes the loss by much more than another's: no clear answer.")
    a, b = sorted([hi, lo])
    prompt = f"Will zero-ablating head {a} raise the later-copy loss more or less than zero-ablating head {b}?"
    answer = "more" if d[a] > d[b] else "less"
    return Question("q_abl", prompt, ["more", "less"], answer,
                    f"Ablating {a} changes the later-copy loss by {d[a]:+.3f} nats, ablating {b} by {d[b]:+.3f}. "
                    f"Switching a head off costs as much as the look-up relies on it: of all heads, {hi}'s output "
                    f"matters most to the later copies and {lo}'s least.")


def biggest_path(labels: list[str], values: list[float], which: str = "this logit") -> Question:
    """Which path carries most of one logit (core.reading.paths.logit_contributions)? `which` names the logit in
    the prompt (its token and position: another position is another question, asked afresh)."""
    prompt = f"Which path contributes most to {which}?"
    vals = dict(zip(labels, values))
    best, v, second = top_two(vals)
    if v <= 0 or v - second < max(CLEAR_GAP, 0.1 * abs(v)):
        return no_answer("q_path", prompt, f"No path stands out for this prediction (largest {v:+.2f}, next "
                                       f"{second:+.2f}): pick another position.")
    return Question("q_path", prompt, list(vals), best, f"Path {best} adds {v:+.2f} to the centered logit; the "
                    f"next largest adds {second:+.2f}. With attention fixed, the logit is exactly the sum of these "
                    "paths (no MLP, no normalisation), so the largest bar is the route that carries this prediction.")


def k_composition_partner(k_scores, head: int) -> Question:
    """k_scores [block-1 heads, block-2 heads] (core.reading.composition.composition_matrix(model, "K"))."""
    prompt = f"Which block-1 head does head {head_label(1, head)}'s keys read most (K-composition)?"
    vals = {head_label(0, w): float(k_scores[w, head]) for w in range(k_scores.shape[0])}
    best, v, second = top_two(vals)
    if v < 1.2 * second:
        return no_answer("q_kcomp", prompt,
                     f"Two block-1 heads compose about equally ({v:.3f}, {second:.3f}): no clear answer.")
    return Question("q_kcomp", prompt, list(vals), best,
                    f"Head {best}'s K-composition score with {head_label(1, head)} is {v:.3f}; the runner-up's is "
                    f"{second:.3f}. The score measures how much of what a block-1 head writes the block-2 head's "
                    "keys can read, from the weights alone, with the rotary rotation left out (offset 0).")


RESTART_OPTIONS = ["from the first token of the new pattern", "from the second token of its second copy",
                   "never: it stays near chance"]


def restart_recovery(summary: dict, chance: float) -> Question:
    """summary: core.reading.restarts.restart_curve(...)["summary"]."""
    prompt = "After the sequence switches to a fresh pattern, from when does the model predict it right again?"
    first, known, rest = summary["first_copy"], summary["first_predictable"], summary["rest"]
    if first >= CLEAR_SCORE:
        answer = RESTART_OPTIONS[0]
    elif rest >= CLEAR_SCORE and known >= CLEAR_SCORE / 2:
        answer = RESTART_OPTIONS[1]
    elif rest < 3 * chance + 0.05:
        answer = RESTART_OPTIONS[2]
    else:
        return no_answer("q_restart", prompt,
                         f"Its accuracy after a restart is in between ({rest:.2f}): no clear answer.")
    reason = {RESTART_OPTIONS[0]: " A fresh pattern is random, so being right on its first copy means the model "
                                  "did not need to see it: check that the task is really random.",
              RESTART_OPTIONS[1]: " An induction head needs an earlier occurrence of the current token and the token "
                                  "that followed it; in a new pattern that first exists at its second copy's second "
                                  "token.",
              RESTART_OPTIONS[2]: " Without an induction circuit nothing reads the new pattern from the context."}
    return Question("q_restart", prompt, RESTART_OPTIONS, answer,
                    f"Accuracy in the new pattern's first copy {first:.2f}, on the first token it could know "
                    f"{known:.2f}, from there on {rest:.2f} (chance {chance:.3f})." + reason[answer])


SWAP_OPTIONS = ["it stays as high as on fresh sequences", "it drops to about chance"]


def swap_effect(check: dict, chance: float) -> Question:
    """check: core.training.icl.in_context_check(...)."""
    prompt = "Swap each sequence's first copy for another pattern. What happens to second-copy accuracy?"
    fresh, swapped = check["fresh"]["acc_second"], check["swapped"]["acc_second"]
    if fresh < CLEAR_SCORE:
        return no_answer("q_swap", prompt, f"This model gets only {fresh:.2f} of second copies right even on intact "
                                       "sequences, so there is little to lose: no clear answer.")
    answer = SWAP_OPTIONS[1] if swapped < 3 * chance + 0.05 else SWAP_OPTIONS[0] if swapped > fresh - 0.1 else None
    if answer is None:
        return no_answer("q_swap", prompt, f"It falls part of the way ({fresh:.2f} to {swapped:.2f}): no clear answer.")
    reason = (" The model reads the second copy off the first one in its context; swap the first copy and there "
              "is nothing right to copy, however familiar the tokens." if answer == SWAP_OPTIONS[1] else
              " The second copy does not depend on the first being in the context, so this model is not reading "
              "it from there.")
    return Question("q_swap", prompt, SWAP_OPTIONS, answer,
                    f"Second-copy accuracy {fresh:.3f} on fresh sequences, {swapped:.3f} with the first copy swapped "
                    f"(chance {chance:.3f})." + reason)


def top_detector(table: pd.DataFrame, archetype: str, labels: dict[str, str]) -> Question:
    """table: core.archetypes.catalogue.detector_table; labels: detector -> display name."""
    prompt = f"Which detector gives the {labels.get(archetype, archetype)} pattern its highest score on this prompt?"
    rows = table[table["archetype"] == archetype]
    vals = {labels.get(d, d): float(s) for d, s in zip(rows["detector"], rows["score"])}
    if not any(v == v for v in vals.values()):
        return no_answer("q_det", prompt, "No detector finds anything on this prompt.")
    best, v, second = top_two(vals)
    if v - second < CLEAR_GAP:
        return no_answer("q_det", prompt,
                         f"Two detectors tie ({v:.2f} and {second:.2f}) on this prompt: no clear answer.")
    return Question("q_det", prompt, list(vals), best,
                    f"The {best} detector scores it {v:.2f}; the next one {second:.2f}. Each detector measures "
                    "the share of attention that lands where its archetype would look, so the highest names where "
                    "this pattern looks.")


def head_archetype(best: pd.DataFrame, layer: int, head: int, labels: dict[str, str]) -> Question:
    """best: core.archetypes.head_matches.best_matches; asks about one head (0-based layer, head)."""
    prompt = f"Which archetype does {long_head_label(layer, head)} fit best on this prompt?"
    row = best[(best["layer"] == layer) & (best["head"] == head)]
    if row.empty or not bool(row.iloc[0]["matches"]):
        return no_answer("q_arch", prompt, "This head fits no archetype clearly on this prompt: no clear answer.")
    r = row.iloc[0]
    options = list(dict.fromkeys(labels.values()))
    return Question("q_arch", prompt, options, labels[r["best"]],
                    f"Its {labels[r['best']]} score is {r['score']:.2f}; a uniform head scores "
                    f"{r['uniform']:.2f} there. A head fits an archetype when it puts clearly more attention where "
                    "that archetype looks than a head spreading its attention evenly would.")



LOOKUP_OPTIONS = ["far below it (more than 2 nats lower): it reads the token from the earlier copy",
                  "somewhat below it (0.2 to 2 nats lower)", "about the same (within 0.2 nats)", "above it"]
LOOKUP_BANDS = (2.0, 0.2)  # nats: the borders between the first three options
LOOKUP_MARGIN = 0.05  # nats: a difference this close to a border gets no question


def fixed_distance_words(verdict: dict | None) -> str:
    """What the period-shift probe adds to a reading of attention mass or of the later-copy loss, when it finds
    that the model copies from a fixed distance back (core.reading.probes.fixed_distance_verdict); "" otherwise."""
    if not verdict or not verdict.get("fixed"):
        return ""
    return (f" But the period-shift probe finds later-copy accuracy {verdict['acc_trained']:.2f} at the training "
            f"period {verdict['trained']} and {verdict['acc_shifted']:.2f} at period {verdict['shifted']}: this model "
            "copies from a fixed distance back, it does not look the token up.")


def later_vs_first(metrics: dict, verdict: dict | None = None) -> Question:
    """metrics: the picked model's copy metrics (core.training.overview). Later-copy loss against first-copy
    loss: more than 2 nats lower "far below" (it reads the token from the earlier copy: a model that looks it
    up gets near 0 on later copies, and so does one that copies from a fixed distance at its one period),
    0.2 to 2 nats lower "somewhat below" (the context helps without a look-up: raising the logits of every
    token seen earlier already helps, since a later copy's right token is always among them), within 0.2
    "about the same", more than 0.2 higher "above". No clear answer within LOOKUP_MARGIN of a border.
    verdict: the period-shift probe's (fixed_distance_words), said in the answer."""
    prompt = "Compared with its loss on the first copy, where will this model's loss on the later copies be?"
    first, later = metrics.get("loss_first_copy"), metrics.get("loss_later_copies")
    if first is None or later is None or first != first or later != later:
        return no_answer("q_lookup", prompt, "This task has no first-copy targets (period 1): nothing to compare.")
    gap = first - later
    far, near = LOOKUP_BANDS
    why = f"First-copy loss {first:.2f} nats, later-copy loss {later:.2f} ({-gap:+.2f})."
    if any(abs(abs(gap) - b) < LOOKUP_MARGIN for b in LOOKUP_BANDS):
        return no_answer("q_lookup", prompt, why + " That sits at the border of two options: no clear answer.")
    answer = (LOOKUP_OPTIONS[0] if gap > far else LOOKUP_OPTIONS[1] if gap > near
              else LOOKUP_OPTIONS[2] if gap >= -near else LOOKUP_OPTIONS[3])
    if answer == LOOKUP_OPTIONS[1]:
        why += (f" Lower by {gap:.2f} nats, but far from the near-zero loss of a model that looks the right token up "
                "in the earlier copy. A model can gain this much without a look-up: raising the logits of every "
                "token seen earlier in the sequence helps on a later copy, whose right token is always among them "
                "(on the first copy it is often not).")
    if answer == LOOKUP_OPTIONS[0]:
        why += (" A model that looks the right token up in the earlier copy gets near 0 there."
                + fixed_distance_words(verdict))
    if answer == LOOKUP_OPTIONS[2]:
        why += " The earlier copy does not help this model: it predicts later copies no better than first ones."
    if answer == LOOKUP_OPTIONS[3]:
        why += (" The context hurts this model: what it learned about earlier tokens misleads it on the later "
                "copies.")
    return Question("q_lookup", prompt, LOOKUP_OPTIONS, answer, why)


COUNT_OPTIONS = ["none", "1", "2", "3", "4 or more"]


def induction_head_count(heads: pd.DataFrame, verdict: dict | None = None) -> Question:
    """heads: core.training.overview's table (label, layer, head, induction_any). How many heads put at least
    CLEAR_SCORE of their attention on the token after an earlier copy of the current one? No clear
    answer when a head is within CLEAR_GAP of that line. verdict: the period-shift probe's; where it finds a
    fixed distance, the answer says that these scores are attention mass only (fixed_distance_words)."""
    prompt = (f"How many of this model's heads put at least {CLEAR_SCORE:g} of their attention on the token after "
              "an earlier copy of the current one?")
    if heads.empty or "induction_any" not in heads.columns:
        return no_answer("q_count", prompt, "This model has no heads: none can, and there is nothing to count.")
    vals = dict(zip(heads["label"], heads["induction_any"].astype(float)))
    near = [k for k, v in vals.items() if abs(v - CLEAR_SCORE) < CLEAR_GAP]
    listed = ", ".join(f"{k} {v:.2f}" for k, v in vals.items())
    if near:
        return no_answer("q_count", prompt, f"Head {near[0]} sits at the line ({vals[near[0]]:.2f}): no clear "
                                            f"answer for this model. Scores: {listed}.")
    n = sum(v >= CLEAR_SCORE for v in vals.values())
    caveat = ("" if not fixed_distance_words(verdict) else " These count attention mass one period back, which a "
              "fixed offset puts there too, so they do not make a head an induction head here."
              + fixed_distance_words(verdict))
    return Question("q_count", prompt, COUNT_OPTIONS, COUNT_OPTIONS[min(n, 4)], f"Induction scores (any earlier "
                    f"copy): {listed}, so {n} at or above {CLEAR_SCORE:g}. The token after an earlier copy of the "
                    "current one is where the next token can be read, so heads that look there are the "
                    "candidates for induction heads." + caveat)


SLIP_OPTIONS = ["it barely changes (within 0.1)", "it falls by more than half", "it rises"]


def induction_slip(scores: pd.DataFrame, n_layers: int) -> Question:
    """The Exercises page's question: the slip the induction-score check names ("off by one position"),
    A[i, i - L] (the earlier copy itself, the duplicate score) read instead of A[i, i + 1 - L] (the token after
    it, the induction score), on the strongest induction head. scores: a SequenceView's scores (label,
    induction, duplicate)."""
    prompt = ("A common slip in `induction_score`: reading A[i, i − L], the earlier copy of the current token, "
              "instead of A[i, i + 1 − L], the token after it. On the picked model's strongest induction head, "
              "what does the slip do to the score?")
    if n_layers < 2 or scores.empty or not {"induction", "duplicate"} <= set(scores.columns):
        return no_answer("q_slip", prompt, "This model has no induction head (it needs two blocks), so there is no "
                                           "score for the slip to spoil.")
    row = scores.loc[scores["induction"].astype(float).idxmax()]
    right, slipped = float(row["induction"]), float(row["duplicate"])
    if right < CLEAR_SCORE:
        return no_answer("q_slip", prompt, f"No head is a clear induction head here (best induction score "
                                           f"{right:.2f}): no clear answer.")
    change = slipped - right
    answer = (SLIP_OPTIONS[0] if abs(change) <= 0.1 else SLIP_OPTIONS[1] if slipped < right / 2
              else SLIP_OPTIONS[2] if change > 0.1 else None)
    why = f"Head {row['label']}: induction score {right:.2f}, the slipped cell A[i, i − L] gets {slipped:.2f}."
    if answer is None:
        return no_answer("q_slip", prompt, why + " It falls, but by less than half: no clear answer.")
    return Question("q_slip", prompt, SLIP_OPTIONS, answer, why + (
        " An induction head looks one step past the earlier copy, so one position off misses most of its attention; "
        "the check's planted models catch it the same way." if answer == SLIP_OPTIONS[1] else
        " This head attends to the earlier copy about as much as to the token after it, so the slip hides here; "
        "the check's planted models still catch it."))


def repeated_symbols(pattern: list[int], rows: list[dict], names) -> dict | None:
    """Whether a typed pattern is ambiguous for a reader of one token: symbols that occur more than once in it
    and are followed by different symbols (in 'abcaXY', 'a' by 'b' and by 'X'), and how the model did on the
    knowable targets after them (rows: core.training.icl.predict_each, one per target position with correct
    and copy; knowable: from the second copy's second token on). names(token) -> its symbol. None when no
    symbol of the pattern is followed by two different ones."""
    L = len(pattern)
    follow: dict[int, set[int]] = {}
    for i, t in enumerate(pattern):
        follow.setdefault(t, set()).add(pattern[(i + 1) % L])
    ambiguous = {t for t, nxt in follow.items() if len(nxt) > 1}
    if not ambiguous:
        return None
    after = [r for r in rows if r.get("copy") in ("second", "later") and r["position"] > L  # knowable targets
             and pattern[(r["position"] - 1) % L] in ambiguous]
    return {"symbols": [names(t) for t in sorted(ambiguous, key=pattern.index)],
            "followers": {names(t): sorted(names(n) for n in follow[t]) for t in sorted(ambiguous, key=pattern.index)},
            "n": len(after), "right": sum(bool(r["correct"]) for r in after)}
