"""What the Causal experiments page may say in words, decided from the numbers it just measured
(core.causal.experiments.Experiments). An interpretive sentence is shown only when the runs differ enough
for ratios to mean something and the effect it reads is clearly beyond its noise, by the rules of
core.causal.clarity, which the page's questions (core.quiz.causal) use too. Otherwise each function
returns None and the page says that this model gives no clear answer. Heads are written as
core.model.symbols labels them ("1.4").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from core.causal import clarity
from core.causal.clarity import MIN_GAP, NEEDED  # noqa: F401  (the page reads them here)
from core.reading.bootstrap import LEVEL

if TYPE_CHECKING:
    from core.causal.experiments import Experiments

LOOKS_BACK = 0.5  # a block-1 head "looks d positions back" with at least this much attention at offset d

OFFSET_WORDS = {0: "on its own position", 1: "one position back", 2: "two positions back", 3: "three positions back"}


def key_paths(res: Experiments) -> pd.DataFrame:
    """Noising of each block-1 sender's key path into all of block 2 (rows of res.paths)."""
    p = res.paths
    if p is None or not len(p):
        return p
    return p[(p["path"] == "k") & (p["direction"] == "noising") & (p["receiver_head"] < 0)]


def most_needed_key_path(res: Experiments) -> pd.Series | None:
    """The sender whose key path into block 2 is most needed, when that is clear (clarity.most_needed:
    the gap is large enough, its noising interval ends below NEEDED and below every other sender's)."""
    return clarity.most_needed(key_paths(res), res.gap)


def key_composition_sentence(res: Experiments) -> str | None:
    worst = most_needed_key_path(res)
    if worst is None:
        return None
    return (f"On this model the most needed key path into all of block 2 comes from head {worst['sender']}: noising "
            f"it leaves an effect of {worst['patch_effect']:.2f} ({LEVEL:.0%} interval {worst['effect_low']:.2f} to "
            f"{worst['effect_high']:.2f} over the sequences). This is K-composition shown by an intervention, next to "
            "the weight-based composition scores of *Circuits & ablations*.")


def longer_match_sentence(res: Experiments) -> str | None:
    """A block-1 head that looks two or more positions back and whose key path is clearly needed: the
    induction heads' match then uses more than the one previous token."""
    offsets, k = res.offsets, key_paths(res)
    if offsets is None or k is None or not len(k) or not clarity.clear_gap(res.gap):
        return None
    top = offsets[offsets["top"]].set_index("sender")
    parts = []
    for r in k.itertuples():
        if r.sender not in top.index:
            continue
        d, mass = int(top.loc[r.sender, "offset"]), float(top.loc[r.sender, "mass"])
        if d >= 2 and mass >= LOOKS_BACK and r.effect_high < NEEDED:
            parts.append((r.sender, d, mass, r))
    if not parts:
        return None
    said = "; ".join(f"head {s} puts {m:.2f} of its attention {OFFSET_WORDS.get(d, f'{d} positions back')}, and "
                     f"noising its key path into block 2 leaves {r.patch_effect:.2f} ({r.effect_low:.2f} to "
                     f"{r.effect_high:.2f})" for s, d, m, r in parts)
    return (f"The match uses more than the one previous token: {said}. So a key also carries the token two back, "
            "and the induction heads need it.")


def untestable_paths(res: Experiments) -> dict[str, list[str]]:
    """{path: [senders]} of the block-1 senders whose output does not differ between the two runs where
    that path reads it (core.causal.path_patching.sender_changes): those rows cannot test anything."""
    p = res.paths
    if p is None or not len(p):
        return {}
    out = {}
    for path in ("q", "k", "v"):
        sub = p[(p["path"] == path) & ~p["testable"].astype(bool)]
        if len(sub):
            out[path] = list(dict.fromkeys(sub["sender"]))
    return out


def largest_denoising(res: Experiments) -> pd.Series | None:
    """The denoised path (into all of block 2) with the largest effect, and the most negative one."""
    p = res.paths
    if p is None or not len(p):
        return None
    d = p[(p["direction"] == "denoising") & (p["receiver_head"] < 0) & p["testable"].astype(bool)]
    return d if len(d) else None


ADDS_UP = 1e-4  # a head's per-position cells "add up" to its section-1 effect within this (float32 rounding)


def position_sums(res: Experiments) -> pd.DataFrame | None:
    """Each head's one-position cells (section 3) summed over positions, beside its all-positions effect
    (section 1). Rows: label, layer, head, summed, whole, adds_up (|summed - whole| <= ADDS_UP). A last-block
    head's write at position p reaches only p's logits, so M's change is the sum of its per-position changes;
    an earlier head's write is read by later heads at several positions at once, which is not linear in them.
    None without the position sweeps."""
    if res.head_positions is None:
        return None
    df = res.heads[["label", "layer", "head", "patch_effect"]].rename(columns={"patch_effect": "whole"}).copy()
    by_label = dict(zip(res.head_rows, res.head_positions.sum(1)))
    df["summed"] = [float(by_label[lab]) for lab in df["label"]]
    df["adds_up"] = (df["summed"] - df["whole"]).abs() <= ADDS_UP
    return df.reset_index(drop=True)


def _heads(labels) -> str:
    labels = list(labels)
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def position_sum_sentence(res: Experiments) -> str | None:
    """What the per-position cells add up to, said from position_sums (None without the sweeps or a gap)."""
    df = position_sums(res)
    if df is None or not df["whole"].notna().all():
        return None
    last = df[df["layer"] == df["layer"].max()]
    earlier = df[df["layer"] < df["layer"].max()]
    parts = []
    if last["adds_up"].all():
        parts.append(f"For the last-block heads ({_heads(last['label'])}) a row's cells add up to the head's "
                     "effect in section 1: a last-block head's write at one position reaches only that position's "
                     "logits, and M is a mean over positions.")
    off = earlier[~earlier["adds_up"]]
    if len(off):
        worst = off.loc[(off["summed"] - off["whole"]).abs().idxmax()]
        parts.append(f"For earlier-block heads they need not: a later head reads such a write at several positions "
                     f"at once, and the model is not linear in them (head {worst['label']}: the cells sum to "
                     f"{worst['summed']:.3f}, section 1 gives {worst['whole']:.3f}).")
    elif len(earlier):
        parts.append("The earlier-block heads' rows add up too here.")
    return " ".join(parts) or None


def attribution_sentence(res: Experiments) -> str | None:
    """Attribution patching against the exact sweep: correlation, the largest difference beside the largest
    exact cell, the heads whose summed estimate has the wrong sign, and the scale of the others."""
    att = res.attribution
    if att is None or not clarity.clear_gap(res.gap):
        return None
    s = att["sums"]
    wrong = s[~s["same_sign"]]
    right = s[s["same_sign"] & (s["exact_sum"].abs() > ADDS_UP)]
    out = (f"Against the exact values above: correlation {att['corr']:.2f} over every cell, largest difference "
           f"{att['max_abs_diff']:.3f} (the largest exact cell is {att['max_abs_exact']:.3f}). Summed over "
           "positions, per head: ")
    if len(wrong):
        out += ("the estimate has the wrong sign for " + "; ".join(
            f"{r.label} ({r.estimate_sum:+.3f} against an exact {r.exact_sum:+.3f})" for r in wrong.itertuples())
            + ". ")
    else:
        out += "the estimate has the right sign for every head. "
    if len(right):
        lo, hi = right["scale"].min(), right["scale"].max()
        out += (f"Where the sign is right, the estimate is {lo:.2f} to {hi:.2f} times the exact sum"
                + (" (too large everywhere)." if lo > 1 else " (too small everywhere)." if hi < 1 else "."))
    return out + (" A high correlation alone does not say that the estimate has the right sign or size.")


VALUES_ONLY = 0.02  # a head acts "only through values" when its q and k paths into the next block move M less


def first_order_sentence(res: Experiments) -> str:
    """Where plain attribution's linearisation costs most: the generic statement, then, measured, the heads that
    act on block 2 only through its values (their query and key paths, noised or denoised, change M by under
    VALUES_ONLY of the gap) and how far the estimate still misses their exact sum, so the error there is M's own
    log-softmax, not another head's attention."""
    out = ("The estimate linearises two things that are far from linear: a later head's softmax over keys (a changed "
           "key or query moves it) and M itself, a log-softmax over the vocabulary.")
    att, paths = res.attribution, res.paths
    if att is None or paths is None or not len(paths) or not clarity.clear_gap(res.gap):
        return out
    into = paths[(paths["receiver_head"] < 0) & paths["path"].isin(["q", "k"])]
    if not len(into):
        return out
    moved = {}
    for sender, g in into.groupby("sender"):
        change = [abs(1 - e) if d == "noising" else abs(e) for d, e in zip(g["direction"], g["patch_effect"])]
        moved[sender] = max(change)
    s = att["sums"].set_index("label")
    values_only = [h for h, m in moved.items() if m < VALUES_ONLY and h in s.index and s.loc[h, "same_sign"]
                   and abs(s.loc[h, "exact_sum"]) > ADDS_UP]
    if not values_only:
        return out
    scales = ", ".join(f"{s.loc[h, 'scale']:.2f} for {h}" for h in values_only)
    last = s[(s["layer"] == s["layer"].max()) & s["same_sign"] & (s["exact_sum"].abs() > ADDS_UP)]["scale"]
    tail = (f"; the last block's heads, with no attention after them at all, get {last.min():.2f} to "
            f"{last.max():.2f} times theirs" if len(last) else "")
    return out + (f" {_heads(values_only)} act on block 2 only through its values (their query and key paths, noised "
                  f"or denoised, change M by at most {max(moved[h] for h in values_only):.3f} of the gap, so what "
                  f"they do to its attention hardly matters), and still the estimate is {scales} times their exact "
                  f"sum{tail}: here the linearisation that costs most is M's own log-softmax.")


def checks_sentence(res: Experiments, last_block: str) -> str:
    """The two sanity checks of section 1, with what each must give under this corruption."""
    out = (f"Patching the whole stream entering {last_block} gives {res.resid_last:.4f}: it must be 1 (the run "
           f"above that point is then the clean run). Patching every head at once gives {res.all_heads:.4f}")
    if res.corruption == "first-copy":
        return out + (": it must be 1 too, since the token embeddings at the scored positions are the same in both "
                      "runs. Patching nothing is 0 by definition.")
    return out + (": under resample each scored position's own token embedding stays corrupted along its direct "
                  "path to the logits, so this can fall a little short of 1. Patching nothing is 0 by definition.")


def interval_unit(res: Experiments) -> str:
    """What the bootstrap intervals resample: sequences, or for a typed text its corruptions."""
    return f"the {res.n_seqs} corruptions of your sequence" if res.typed else f"the {res.n_seqs} sequences"


def direct_cell(row) -> str:
    """One cell of the page's 'kept when only the direct path is noised' column."""
    if not bool(row.get("direct_testable", True)):
        return "untestable"
    return f"{row['direct_effect']:.2f} [{row['direct_low']:.2f}, {row['direct_high']:.2f}]"


def mechanism_sentence(mech: pd.DataFrame) -> str | None:
    """Which paths of experiments.mechanism_over_training are needed (noising interval ending below NEEDED) at the
    first step whose gap is at least MIN_GAP and at the last, and from which step each path needed at the end
    has been needed. None when no step has the gap."""
    ok = mech[mech["gap"] >= MIN_GAP] if mech is not None and len(mech) else None
    if ok is None or not len(ok):
        return None
    first, last = int(ok["step"].min()), int(ok["step"].max())
    names = {"q": "query", "k": "key", "v": "value"}
    needed = ok[ok["effect_high"] < NEEDED]

    def at(step):
        return {(r.sender, r.path) for r in needed[needed["step"] == step].itertuples()}

    def said(pairs):
        return ", ".join(f"{names[p]} path of {s}" for s, p in sorted(pairs, key=lambda x: (x[1], x[0])))

    start, end = at(first), at(last)
    since = {pair: int(needed[(needed["sender"] == pair[0]) & (needed["path"] == pair[1])]["step"].min())
             for pair in end}
    out = (f"At step {first}, the first with a gap of at least {MIN_GAP:g} nats, the needed paths are: "
           f"{said(start) or 'none'}. At step {last}: {said(end) or 'none'}")
    later = sorted((p for p in end if p not in start), key=since.get)
    if later:
        out += " (" + "; ".join(f"the {names[p]} path of {s} from step {since[(s, p)]}" for s, p in later) + ")"
    gone = start - end
    return out + "." + (f" No longer needed at the end: {said(gone)}." if gone else "")


def atp_star_sentence(res: Experiments) -> str | None:
    """AtP* (its QK fix) against plain attribution: which heads' summed sign each gets wrong, from the sums."""
    att = res.attribution
    if att is None or "star_sum" not in att["sums"] or not clarity.clear_gap(res.gap):
        return None
    s = att["sums"]
    plain, star = list(s.loc[~s["same_sign"], "label"]), list(s.loc[~s["star_same_sign"], "label"])
    fixed = [h for h in plain if h not in star]
    out = ("**AtP*** (Kramár et al., 2024) recomputes exactly the softmax a patched query or key feeds (its QK fix). "
           "The lab extends that fix to a head's whole output: for each sender's change it recomputes the attention "
           "of every later block and linearises only the rest (the extension is the lab's, not the paper's). "
           "Summed over positions, plain attribution gets the "
           f"sign wrong for {_heads(plain) if plain else 'no head'}, AtP* for {_heads(star) if star else 'no head'}")
    figures = "; ".join(f"{r.label} exact {r.exact_sum:+.3f}, plain {r.estimate_sum:+.3f}, AtP* {r.star_sum:+.3f}"
                        for r in s[s["label"].isin(plain + star)].itertuples())
    if figures:
        where = (f"{interval_unit(res)}" + (f" of period {res.period}" if res.period else "")
                 + f", {res.corruption} corruption")
        out += f" (summed, on {where}: {figures})"
    if fixed:
        return out + f"; the QK fix corrects {_heads(fixed)}."
    if plain and star:
        return out + (": here the QK fix does not help. What it leaves linear comes after the pattern: the term "
                      "where a later head's pattern change meets the change in the values it reads (ΔA·ΔV), which "
                      "the estimate drops by construction, and M itself, a log-probability, far from linear in what "
                      "the head then copies.")
    return out + "."


def metric_sentence(res: Experiments) -> str | None:
    """How the three metrics rank the heads: whether the top head agrees, and whether the last block's
    single-head logit-difference effects add up where the log-probability ones do not."""
    df = res.by_metric
    if df is None or not len(df) or not clarity.clear_gap(res.gap):
        return None
    eff = df.pivot(index="label", columns="metric", values="patch_effect")
    tops = {m: str(eff[m].idxmax()) for m in eff.columns if eff[m].notna().any()}
    names = {"logprob": "log-probability", "logit_diff": "logit difference", "prob": "probability"}
    same = len(set(tops.values())) == 1
    out = ("The largest single-head effect is head " + next(iter(tops.values())) + " under all three metrics. "
           if same else "The metrics disagree on the top head: " + "; ".join(
               f"{names[m]} {h}" for m, h in tops.items()) + ". ")
    return out + ("Each metric's effects are normalised by its own gap, so their sizes differ; prefer the logit "
                  "difference when comparing heads that write straight to the logits (it is linear in the final "
                  "stream, so their effects add up), and read the probability only with care (it saturates).")


def top_senders(frame: pd.DataFrame, score: str = "k_score") -> pd.DataFrame:
    """Per receiver: the sender with the highest composition `score` (k_score, or k_rope) and the one whose key
    path is most needed (rows receiver, by_weights, by_patching, agree)."""
    rows = []
    for rec, sub in frame.groupby("receiver", sort=True):
        w = sub.loc[sub[score].idxmax(), "sender"]
        p = sub.loc[sub["k_lost"].idxmax(), "sender"]
        rows.append({"receiver": rec, "by_weights": w, "by_patching": p, "agree": w == p})
    return pd.DataFrame(rows, columns=["receiver", "by_weights", "by_patching", "agree"])


def composition_sentence(frame: pd.DataFrame | None, gap: float) -> str | None:
    """Weights against path patching, per block-2 receiver (top_senders)."""
    if frame is None or not len(frame) or not clarity.clear_gap(gap):
        return None
    top = top_senders(frame)
    agree = top[top["agree"]]
    differ = top[~top["agree"]]
    out = f"The two agree on the most important key writer for {len(agree)} of {len(top)} block-2 heads."
    if len(differ):
        out += " They differ for " + "; ".join(
            f"{r.receiver} (weights: {r.by_weights}, patching: {r.by_patching})" for r in differ.itertuples()) + "."
    return out
