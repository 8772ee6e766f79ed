"""Predict-then-reveal questions about the causal experiments (core.causal.views's frames), answered from
the experiment on screen; core.quiz.questions has the Question type and the rules for a clear answer."""
from __future__ import annotations

import pandas as pd

from core.quiz.questions import CLEAR_GAP, Question, no_answer, top_two


def patched_heads(heads: pd.DataFrame) -> Question:
    """The section-1 question: which block carries the answer in a deeper model, which head in a
    one-block model."""
    return best_patched_head(heads) if heads.empty or heads["block"].max() < 2 else best_patched_block(heads)


def best_patched_block(heads: pd.DataFrame) -> Question:
    """heads: per-head patch effects (block, head from 1, patch_effect). Which block's best head,
    patched alone, brings back most of M?"""
    prompt = (
        "In which block is the head whose clean output, patched alone into the corrupted run, brings back most of M?")
    vals = {f"block {int(b)}": float(g["patch_effect"].max()) for b, g in heads.groupby("block")}
    best, v, second = top_two(vals)
    if v - second < CLEAR_GAP:
        return no_answer("q_patch_block", prompt, f"The best heads of two blocks restore about as much ({v:.2f} and "
                                                  f"{second:.2f}): no clear answer on these sequences.")
    return Question("q_patch_block", prompt, list(vals), best,
                    f"The best head of {best} restores {v:.2f} of the gap; the best head of any other block "
                    f"{second:.2f}.")


def best_patched_head(heads: pd.DataFrame) -> Question:
    """heads: core.causal.views's per-head patch effects (block, head from 1, patch_effect)."""
    prompt = "Which head, its clean output patched alone into the corrupted run, brings back most of M?"
    vals = {f"{int(r.block)}.{int(r.head)}": float(r.patch_effect) for r in heads.itertuples()}
    if len(vals) < 2 or not any(v == v for v in vals.values()):
        return no_answer("q_patch", prompt, "This model has fewer than two heads to compare, or no patch effect is "
                                        "defined: no question here.")
    best, v, second = top_two(vals)
    if v < 0.1 or v - second < CLEAR_GAP:
        return no_answer("q_patch", prompt, f"No single head stands out (largest effect {v:.2f}, next {second:.2f}): "
                                        "no clear answer on these sequences.")
    return Question("q_patch", prompt, list(vals), best,
                    f"Patching head {best} alone restores {v:.2f} of the gap; the next best head "
                    f"restores {second:.2f}.")


def needed_key_path(paths: pd.DataFrame) -> Question:
    """paths: core.causal.path_patching's frame (sender, path, direction, receiver_head < 0 for all of the
    last block, patch_effect). Which sender's key path into the whole last block is most needed?"""
    prompt = "Noising which block-1 head's output, only where the last block's heads read it as keys, hurts most?"
    sub = paths[(paths["path"] == "k") & (paths["direction"] == "noising") & (paths["receiver_head"] < 0)]
    vals = {str(r.sender): float(r.patch_effect) for r in sub.itertuples()}
    if len(vals) < 2:
        return no_answer("q_kpath", prompt, "Path patching needs two blocks: no question for this model.")
    worst, v, second = top_two({k: -x for k, x in vals.items()})  # lowest effect = most needed
    if -second - -v < CLEAR_GAP:
        return no_answer("q_kpath", prompt, f"Two senders' key paths matter about equally ({-v:.2f}, {-second:.2f}): "
                                        "no clear answer.")
    return Question("q_kpath", prompt, list(vals), worst,
                    f"Noising head {worst}'s key path leaves an effect of {-v:.2f} (1 = nothing lost, 0 = all of the "
                    f"clean performance gone); the next most needed leaves {-second:.2f}.")


def lens_stage(by_copy: pd.DataFrame, copy: str = "second") -> Question:
    """by_copy: core.causal.logit_lens.lens_by_copy. After which stage is the right token's mean
    probability on `copy` targets first above one half?"""
    rows = by_copy[by_copy["copy"] == copy].sort_values("stage")
    stages, probs = list(rows["stage_label"]), [float(p) for p in rows["prob"]]
    prompt = (f"Read through the unembedding, after which stage does the right token of the {copy} copy first get a "
              "mean probability above one half?")
    options = stages + ["at no stage"]
    if not probs or any(abs(p - 0.5) < CLEAR_GAP for p in probs if p == p):
        return no_answer("q_lens", prompt, "At some stage the mean probability is within "
                                           f"{CLEAR_GAP:g} of one half: no clear answer.")
    above = [s for s, p in zip(stages, probs) if p > 0.5]
    answer = above[0] if above else options[-1]
    listed = ", ".join(f"{s} {p:.2f}" for s, p in zip(stages, probs))
    return Question("q_lens", prompt, options, answer, f"Mean probability of the right token by stage: {listed}.")
