"""Readings of a model trained on the Markov-chain task (core.model.markov): its attention patterns on
sequences of fresh chains, the head scores that fit the task, and which heads count transitions.

A statistical induction head (Edelman et al. 2024) is two heads: a block-1 head that attends to the
previous position (so each position's stream holds its previous token), feeding a block-2 head that
attends to the keys whose previous token is the current token (the tokens that followed earlier
occurrences of it, which the bigram strategy counts: "successor" below). `transition_heads` names them
from the scores, against what a head that spreads its attention evenly would score. In a model with smeared
keys (Olsson et al. 2022; core.model.tinycharlm.smear_keys) a head's key at j mixes in the key at j - 1 by
its weight sigma(a_h): a head whose key is mostly its previous position's matches on the previous token
itself, the part a block-1 previous-token head plays, so one block can hold the whole circuit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.model import markov
from core.model.markov import MarkovTask
from core.model.symbols import head_label
from core.model.tinycharlm import TinyCharLM
from core.reading.views import MarkovView

SCORE_SEQS = 16  # sequences the head scores and KLs average over (the first is the one shown)
PREV_MIN = 0.5  # a previous-token head puts at least half its attention on the previous position
SUCCESSOR_MARGIN = 2.0  # a successor head scores at least twice what even attention scores


def check_model(model: TinyCharLM, task: MarkovTask) -> None:
    """ValueError saying what is wrong when this model cannot be read on this task's sequences."""
    task.validate(model.cfg.vocab_size)
    if model.cfg.n_layers == 0:
        raise ValueError("This model has no attention blocks: there are no heads to read.")


def sample(task: MarkovTask, n_seqs: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n_seqs sequences, each from its own fresh chain, seeded: (tokens [B, T], tables)."""
    if n_seqs < 1:
        raise ValueError(f"n_seqs must be at least 1, got {n_seqs}.")
    return markov.sample_markov(task, n_seqs, torch.Generator().manual_seed(int(seed)))


def even_successor(tokens: torch.Tensor) -> float:
    """The successor score of a head that attends evenly to every key j <= i: the mean share of qualifying
    keys (x_{j-1} = x_i) over the queries that have one (the baseline a successor head must beat)."""
    from core.reading.detectors import detector_mask

    mask = detector_mask("induction", tokens).double()  # [B, T, T]
    T = tokens.shape[1]
    share = mask.sum(-1) / torch.arange(1, T + 1, dtype=torch.float64)
    rows = mask.sum(-1) > 0
    return float(share[rows].mean()) if rows.any() else float("nan")


_EVEN: dict[str, float] = {}


def even_share(task: MarkovTask) -> float:
    """even_successor on the task's evaluation batch (core.training.trainer.eval_batch, the batch the Train page's
    head scores are logged on): what a head that attends evenly scores there. It is 1/k only for independent,
    uniform tokens; Dirichlet rows are uneven, so a token is followed by itself or by its likely successor more
    often and more keys qualify."""
    from core.training.trainer import eval_batch

    key = repr(task)
    if key not in _EVEN:
        _EVEN[key] = even_successor(eval_batch(task, task.n_states)[0])
    return _EVEN[key]


def smear_weights(model: TinyCharLM) -> dict[str, float]:
    """{head label: sigma(a_h)}, the weight each head's key gives its own position (1 - sigma(a_h) the previous
    position's), for a model with smeared keys; {} for a plain one."""
    if not model.cfg.smeared_keys:
        return {}
    return {head_label(l, h): float(torch.sigmoid(block.smear[h].detach().double()))
            for l, block in enumerate(model.blocks) for h in range(model.cfg.n_heads)}


def _smeared_heads(scores: pd.DataFrame, even: float, smear: dict[str, float]) -> tuple[list[str], list[str], str]:
    """transition_heads for a model with smeared keys: heads whose key is mostly the previous position's (1 -
    sigma(a_h) >= PREV_MIN), the successor heads among them, and the sentence."""
    keyed = sorted((label for label, s in smear.items() if 1 - s >= PREV_MIN), key=smear.get)
    margin = SUCCESSOR_MARGIN * even
    succ = scores[scores["label"].isin(keyed) & (scores["successor"] >= margin)]
    succ_l = list(succ.sort_values("successor", ascending=False)["label"])

    def heads(labels):
        return ("head " if len(labels) == 1 else "heads ") + ", ".join(labels)

    if succ_l:
        many = len(succ_l) > 1
        score = ", ".join(f"{float(scores.set_index('label')['successor'][lab]):.2f}" for lab in succ_l)
        own = ", ".join(f"{smear[lab]:.2f}" for lab in succ_l)
        return keyed, succ_l, (
            f"{heads(succ_l).capitalize()} attend{'' if many else 's'} to the tokens that followed the current one "
            f"(successor {score} ≥ {SUCCESSOR_MARGIN:g} × {even:.2f}, even attention's score) with no "
            f"previous-token head before {'them' if many else 'it'}: {'their keys are' if many else 'its key is'} "
            f"smeared, σ(a) = {own} of {'each' if many else 'it'} from its own position and "
            "the rest from the previous one, so the smear carries the previous token into the key, the part a "
            "block-1 previous-token head plays in two blocks.")
    if not keyed:
        most = min(smear, key=smear.get)
        return [], [], ("No head counts transitions here: no head's smeared key is mostly its previous position's "
                        f"(σ(a) ≤ {1 - PREV_MIN:g}; the least, head {most}, has σ(a) = {smear[most]:.2f}).")
    best = scores[scores["label"].isin(keyed)].sort_values("successor", ascending=False).iloc[0]
    weights = " and ".join(f"{lab} (σ(a) = {smear[lab]:.2f})" for lab in keyed)
    gap = margin - float(best["successor"])
    return keyed, [], (
        f"No head clears the successor bar here, head {best['label']} missing it by {gap:.3f}: the smeared keys of "
        f"head{'s' if len(keyed) > 1 else ''} {weights} are mostly the previous position's (head {best['label']}'s "
        f"{1 - smear[best['label']]:.0%}), and head {best['label']} scores {best['successor']:.3f} on successor "
        f"against the bar of {SUCCESSOR_MARGIN:g} × {even:.3f} = {margin:.3f} (even attention's score, doubled). A "
        "score this near the bar says little either way.")


def transition_heads(scores: pd.DataFrame, even: float,
                     smear: dict[str, float] | None = None) -> tuple[list[str], list[str], str]:
    """(previous-token heads of block 1, successor heads above block 1, the sentence saying which heads
    count transitions) from head scores (label, layer, head, prev_token, successor). With `smear`
    ({label: sigma(a_h)}, smear_weights) the model's keys are smeared: the first list is then the heads whose
    key is mostly the previous position's, the second the successor heads among them (any block)."""
    if smear:
        keyed, succ_l, sentence = _smeared_heads(scores, even, smear)
        if succ_l or scores["layer"].max() < 1:
            return keyed, succ_l, sentence
    prev = scores[(scores["layer"] == 0) & (scores["prev_token"] >= PREV_MIN)]
    succ = scores[(scores["layer"] >= 1) & (scores["successor"] >= SUCCESSOR_MARGIN * even)]
    prev_l = list(prev.sort_values("prev_token", ascending=False)["label"])
    succ_l = list(succ.sort_values("successor", ascending=False)["label"])
    n_layers = int(scores["layer"].max()) + 1 if len(scores) else 0
    if n_layers < 2:
        best = scores.loc[scores["successor"].idxmax()] if len(scores) else None
        told = (f" (its best successor score, head {best['label']}, is {best['successor']:.2f} against {even:.2f} "
                "for even attention)." if best is not None else ".")
        return prev_l, [], ("One block with plain keys cannot count transitions: no earlier head can copy the "
                            "previous token into a key for it to match on" + told)
    if prev_l and succ_l:
        ps, ss = "s" if len(prev_l) > 1 else "", "s" if len(succ_l) > 1 else ""
        by = scores.set_index("label")
        prev_s = ", ".join(f"{by['prev_token'][lab]:.2f}" for lab in prev_l)
        succ_s = ", ".join(f"{by['successor'][lab]:.3f}" for lab in succ_l)
        return prev_l, succ_l, (f"Head{ps} {', '.join(prev_l)} attend{'' if ps else 's'} to the previous position "
                                f"(prev_token {prev_s} ≥ {PREV_MIN}) and head{ss} {', '.join(succ_l)} to the tokens "
                                f"that followed the current one (successor {succ_s} ≥ {SUCCESSOR_MARGIN:g} × "
                                f"{even:.3f} = {SUCCESSOR_MARGIN * even:.3f}, even attention's score doubled): "
                                "together they count transitions, a statistical induction head.")
    first, later = scores[scores["layer"] == 0], scores[scores["layer"] >= 1]
    missing = [] if prev_l else [f"no block-1 head has prev_token ≥ {PREV_MIN} (the highest "
                                 f"{first['prev_token'].max():.2f})"]
    if not succ_l:
        missing.append(f"no later head has a successor score ≥ {SUCCESSOR_MARGIN:g} × {even:.3f} = "
                       f"{SUCCESSOR_MARGIN * even:.3f} (even attention's, doubled; the highest "
                       f"{later['successor'].max():.3f})")
    return prev_l, succ_l, "No pair of heads counts transitions here: " + " and ".join(missing) + "."


def _outputs_sentence(successor_heads: list[str], kl: dict[str, float]) -> str:
    """When no head clears the successor bar but the model's predictions are nearest the bigram strategy, a
    sentence saying so (the scores and the outputs tell apart; the page must not leave the first alone)."""
    nearest = min(kl, key=kl.get)
    if successor_heads or nearest != "bigram":
        return ""
    runner = min((n for n in kl if n != "bigram"), key=kl.get)
    return (f" Its predictions are nonetheless nearest the bigram strategy (KL {kl['bigram']:.3f} nats, against "
            f"{kl[runner]:.3f} to {runner}): it uses the transitions, but no single head's score clears the bar.")


@torch.no_grad()
def markov_view(model: TinyCharLM, task: MarkovTask, seed: int = 0) -> MarkovView:
    """Patterns of the first of SCORE_SEQS seeded sequences, the head scores and the KL to each strategy over all."""
    check_model(model, task)
    tokens, _ = sample(task, SCORE_SEQS, seed)
    logits, cache = model.run_with_cache(tokens)
    rows = []
    for layer, pattern in enumerate(cache["pattern"]):
        s = markov.head_scores(pattern.double(), tokens)
        for h in range(pattern.shape[1]):
            rows.append({"label": head_label(layer, h), "layer": layer, "head": h,
                         "prev_token": float(s["prev_token"][h]), "successor": float(s["induction"][h])})
    scores = pd.DataFrame(rows)
    even = even_successor(tokens)
    smear = smear_weights(model)
    if smear:
        scores["smear"] = scores["label"].map(smear)
    prev_l, succ_l, sentence = transition_heads(scores, even, smear)
    kl = markov.strategy_kl(logits, tokens, task)
    sentence += _outputs_sentence(succ_l, {n: kl[n]["mean"] for n in task.strategies})
    return MarkovView(
        tokens=tokens[0].numpy(), labels=[f"{t}·{int(x)}" for t, x in enumerate(tokens[0])],
        raw=np.stack([p[0].double().numpy() for p in cache["pattern"]]), scores=scores,
        kl=pd.DataFrame([{"strategy": n, "kl": kl[n]["mean"]} for n in task.strategies]), even=even,
        prev_heads=prev_l, successor_heads=succ_l, sentence=sentence, n_seqs=SCORE_SEQS)
