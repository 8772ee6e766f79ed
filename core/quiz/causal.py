"""Predict-then-reveal questions about the causal experiments (core.causal.experiments's frames), answered from
the experiment on screen. When an answer is clear is decided by core.causal.clarity, as for the page's
sentences (core.causal.readings); core.quiz.questions has the Question type."""
from __future__ import annotations

import pandas as pd

from core.causal import clarity
from core.causal.clarity import CLEAR_GAP, MIN_GAP
from core.model.symbols import block_label
from core.quiz.questions import Question, no_answer, top_two
from core.reading.bootstrap import LEVEL


def _small_gap(key: str, prompt: str, gap: float | None) -> Question | None:
    """No question when the two runs differ by less than MIN_GAP nats: every patch effect is then a
    ratio of small differences (core.causal.readings)."""
    if not clarity.clear_gap(gap):
        return no_answer(key, prompt, f"M(clean) − M(corrupted) is only {gap:.2f} nats here (a clear answer needs at "
                                      f"least {MIN_GAP:g}): this model gives no clear answer on these sequences.")
    return None


def patched_heads(heads: pd.DataFrame, gap: float | None = None) -> Question:
    """The section-1 question: which block carries the answer in a deeper model, which head in a
    one-block model. gap = M(clean) - M(corrupted): no question below MIN_GAP."""
    return (best_patched_head(heads, gap) if heads.empty or heads["layer"].max() < 1
            else best_patched_block(heads, gap))


def best_patched_block(heads: pd.DataFrame, gap: float | None = None) -> Question:
    """heads: per-head patch effects (label, layer, head, patch_effect, effect_low, effect_high). Which
    block's best head, patched alone, brings back most of M? Clear only when that head's interval lies
    above every other block's best head's interval."""
    prompt = (
        "In which block is the head whose clean output, patched alone into the corrupted run, brings back most of M?")
    small = _small_gap("q_patch_block", prompt, gap)
    if small:
        return small
    tops = {block_label(l): g.loc[g["patch_effect"].idxmax()] for l, g in heads.groupby("layer")
            if g["patch_effect"].notna().any()}
    vals = {k: float(r["patch_effect"]) for k, r in tops.items()}
    best, v, second = top_two(vals)
    if len(tops) < 2 or not clarity.above_all(tops, best):
        return no_answer("q_patch_block", prompt, f"The best heads of two blocks restore about as much ({v:.2f} and "
                                                  f"{second:.2f}; their {LEVEL:.0%} intervals over the sequences "
                                                  "overlap): no clear answer on these sequences.")
    return Question("q_patch_block", prompt, list(vals), best,
                    f"The best head of {best} restores {v:.2f} of the gap; the best head of any other block "
                    f"{second:.2f}.")


def best_patched_head(heads: pd.DataFrame, gap: float | None = None) -> Question:
    """heads: core.causal.experiments's per-head patch effects (label, layer, head, patch_effect, and its
    interval effect_low, effect_high)."""
    prompt = "Which head, its clean output patched alone into the corrupted run, brings back most of M?"
    vals = dict(zip(heads["label"], heads["patch_effect"].astype(float)))
    if len(vals) < 2 or not any(v == v for v in vals.values()):
        return no_answer("q_patch", prompt, "This model has fewer than two heads to compare, or no patch effect is "
                                        "defined: no question here.")
    small = _small_gap("q_patch", prompt, gap)
    if small:
        return small
    best, v, second = top_two(vals)
    rows = {r["label"]: r for _, r in heads.iterrows()}
    if v < 0.1 or not clarity.above_all(rows, best):
        return no_answer("q_patch", prompt, f"No single head stands out (largest effect {v:.2f}, next {second:.2f}, "
                                        f"within each other's {LEVEL:.0%} intervals or below 0.1): "
                                        "no clear answer on these sequences.")
    return Question("q_patch", prompt, list(vals), best,
                    f"Patching head {best} alone restores {v:.2f} of the gap; the next best head "
                    f"restores {second:.2f}.")


def needed_key_path(paths: pd.DataFrame, gap: float | None = None) -> Question:
    """paths: core.causal.experiments's path frame (sender, path, direction, receiver_head < 0 for all of
    block 2, patch_effect, effect_low, effect_high). Which sender's key path into the whole of block 2 is
    most needed? Clear only as core.causal.clarity.most_needed decides (the page's sentence uses it too)."""
    prompt = "Noising which block-1 head's output, only where the block-2 heads read it as keys, hurts most?"
    sub = paths[(paths["path"] == "k") & (paths["direction"] == "noising") & (paths["receiver_head"] < 0)]
    vals = {str(r.sender): float(r.patch_effect) for r in sub.itertuples()}
    if len(vals) < 2:
        return no_answer("q_kpath", prompt, "Path patching needs two blocks: no question for this model.")
    small = _small_gap("q_kpath", prompt, gap)
    if small:
        return small
    worst, v, second = top_two({k: -x for k, x in vals.items()})  # lowest effect = most needed
    if clarity.most_needed(sub, gap) is None:
        return no_answer("q_kpath", prompt, f"No sender's key path is clearly the most needed ({-v:.2f}, next "
                                        f"{-second:.2f}: the {LEVEL:.0%} intervals overlap, or noising it leaves more "
                                        f"than {clarity.NEEDED:g}): no clear answer.")
    return Question("q_kpath", prompt, list(vals), worst,
                    f"Noising head {worst}'s key path leaves an effect of {-v:.2f} (1 = nothing lost, 0 = all of the "
                    f"clean performance gone); the next most needed leaves {-second:.2f}.")


def lens_stage(by_copy: pd.DataFrame, gap: float | None = None) -> Question:
    """by_copy: core.causal.logit_lens.lens_by_copy. After which stage is the right token's mean
    probability on second-copy targets first above one half?"""
    rows = by_copy[by_copy["copy"] == "second"].sort_values("stage")
    stages, probs = list(rows["stage_label"]), [float(p) for p in rows["prob"]]
    prompt = ("Read through the unembedding, after which stage does the right token of the second copy first get a "
              "mean probability above one half?")
    options = stages + ["at no stage"]
    small = _small_gap("q_lens", prompt, gap)
    if small:
        return small
    if not probs or any(abs(p - 0.5) < CLEAR_GAP for p in probs if p == p):
        return no_answer("q_lens", prompt, "At some stage the mean probability is within "
                                           f"{CLEAR_GAP:g} of one half: no clear answer.")
    above = [s for s, p in zip(stages, probs) if p > 0.5]
    answer = above[0] if above else options[-1]
    listed = ", ".join(f"{s} {p:.2f}" for s, p in zip(stages, probs))
    return Question("q_lens", prompt, options, answer, f"Mean probability of the right token by stage: {listed}.")
