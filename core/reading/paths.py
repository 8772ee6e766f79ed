"""Path expansion of an attention-only model with its attention patterns held fixed.

Without MLPs or LayerNorm, once every pattern A is frozen each block is linear in its input
stream, so the final stream (and the logits, through the tied unembedding W_E^T) is an exact sum of
*paths* (Elhage et al. 2021):

- "direct": the token's own embedding, read out at once: logits W_E[x_i] W_E^T (the bigram term);
- one head "b.h": A^{bh} (W_E[x] W_OV^{bh}) read out (a skip-trigram term);
- composed "b.h→c.k": the output of head b.h read through the *values* of a later head c.k
  (V-composition); Q- and K-composition change the patterns, which are held fixed here;
- bias terms as paths of their own: "b_V b.h" (A rows sum to 1, so A (1 b_V) W_O = b_V W_O at
  every position), "b_O b", and these carried onward through later heads' values.
b_Q and b_K act only on the patterns. Blocks and heads are numbered from 1 in labels.

The same holds for attention *scores*: q and k are linear in the stream and RoPE is a linear map
per position, so a head's score s_ij splits exactly into (query path, key path) terms.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.model.symbols import head_label
from core.model.task import TaskConfig, copy_masks, sample_batch
from core.model.tinycharlm import TinyCharLM
from core.reading.heads import head_scores


@dataclass
class PathTerms:
    """The final residual stream split into paths.

    labels [P], kinds [P] ("direct" | "head" | "composed" | "bias"), resid [P, B, T, D]:
    resid.sum(0) is the final stream (to float precision) given the patterns used.
    """

    labels: list[str]
    kinds: list[str]
    resid: torch.Tensor

    def logits(self, W_E: torch.Tensor) -> torch.Tensor:
        """Each path's logits: [P, B, T, V]."""
        return self.resid @ W_E.T


def path_kind(label: str) -> str:
    if label == "direct":
        return "direct"
    if label.startswith("b_"):
        return "bias"
    return "composed" if "→" in label else "head"


@torch.no_grad()
def stream_paths(model: TinyCharLM, tokens: torch.Tensor, patterns: list[torch.Tensor],
                 upto: int | None = None) -> dict[str, torch.Tensor]:
    """Paths of the stream entering block `upto` (default: the final stream), patterns fixed.

    tokens [B, T], patterns[l] [B, H, T, T] -> {label: [B, T, D]} in order of creation.
    """
    upto = model.cfg.n_layers if upto is None else upto
    B, T = tokens.shape
    D = model.cfg.d_model
    terms: dict[str, torch.Tensor] = {"direct": model.W_E[tokens]}
    for l in range(upto):
        block, A = model.blocks[l], patterns[l]
        new: dict[str, torch.Tensor] = {}
        for h in range(model.cfg.n_heads):
            name = head_label(l, h)
            for label, x in terms.items():  # A (x W_V) W_O: the factored W_OV is cheaper
                new[name if label == "direct" else f"{label}→{name}"] = (A[:, h] @ (x @ block.W_V[h])) @ block.W_O[h]
            if model.cfg.bias:
                new[f"b_V {name}"] = (block.b_V[h] @ block.W_O[h]).expand(B, T, D)
        if model.cfg.bias:
            new[f"b_O {l + 1}"] = block.b_O.expand(B, T, D)
        terms.update(new)
    return terms


@torch.no_grad()
def path_terms(model: TinyCharLM, tokens: torch.Tensor, cache: dict | None = None) -> PathTerms:
    """Decompose the final stream of `tokens` [B, T] into paths, with the model's own patterns
    (from `cache`, or from a fresh run_with_cache)."""
    if cache is None:
        _, cache = model.run_with_cache(tokens)
    terms = stream_paths(model, tokens, cache["pattern"])
    labels = list(terms)
    return PathTerms(labels, [path_kind(s) for s in labels], torch.stack([terms[s] for s in labels]))


def example_sequence(task: TaskConfig, vocab_size: int, seed: int) -> tuple[torch.Tensor, int]:
    """One task sequence: tokens [T] and its period, reproducible from `seed`."""
    tokens, periods = sample_batch(task, 1, vocab_size, generator=torch.Generator().manual_seed(seed))
    return tokens[0], int(periods[0])


@torch.no_grad()
def logit_contributions(model: TinyCharLM, tokens: torch.Tensor, pos: int, token: int | None = None,
                        centered: bool = True) -> dict:
    """Each path's share of one logit: the logit of `token` predicted at position `pos` (the
    prediction of token pos+1), tokens [T] or [1, T]; token=None takes the model's top prediction.

    centered=True subtracts each path's mean over the V logits (the softmax ignores a shift shared
    by all logits, so only differences matter). Returns {"labels", "kinds", "values" [P] list,
    "total": the model's own (centered) logit, "token", "prob": the model's probability of it}.
    """
    tokens = tokens[None] if tokens.dim() == 1 else tokens
    logits, cache = model.run_with_cache(tokens)
    pt = path_terms(model, tokens, cache)
    per_path = pt.logits(model.W_E)[:, 0, pos]  # [P, V]
    total = logits[0, pos]
    token = int(total.argmax()) if token is None else token
    prob = float(total.softmax(-1)[token])
    if centered:
        per_path = per_path - per_path.mean(-1, keepdim=True)
        total = total - total.mean()
    return {"labels": pt.labels, "kinds": pt.kinds, "values": per_path[:, token].tolist(),
            "total": float(total[token]), "token": token, "prob": prob}


def sum_by_kind(result: dict) -> dict[str, float]:
    """{kind: summed value} of a result with "kinds" and "values" (e.g. mean_target_contributions)."""
    out: dict[str, float] = {}
    for k, v in zip(result["kinds"], result["values"]):
        out[k] = out.get(k, 0.0) + v
    return out


@torch.no_grad()
def induction_scores(model: TinyCharLM, task: TaskConfig, layer: int) -> list[float]:
    """Each head's induction score (mean A[i, i+1-L] over i >= L, core.reading.heads.head_scores) in block `layer`,
    on 32 sequences."""
    tokens, periods = sample_batch(task, 32, model.cfg.vocab_size, generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    return head_scores(cache["pattern"][layer], periods)["induction"].tolist()


@torch.no_grad()
def mean_target_contributions(model: TinyCharLM, task: TaskConfig, n_seqs: int = 128, seed: int = 0,
                              part: str = "later", chunk: int = 32) -> dict:
    """Average each path's centered logit of the *correct* next token over sampled task sequences.

    part: "first" or "later" copies (core.model.task.copy_masks). Returns {"labels", "kinds", "values" [P],
    "total": mean centered logit of the model, "n": targets averaged}.
    """
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=g)
    sums, total, n, labels, kinds = None, 0.0, 0, None, None
    for s in range(0, n_seqs, chunk):
        tok, per = tokens[s:s + chunk], periods[s:s + chunk]
        logits, cache = model.run_with_cache(tok)
        pt = path_terms(model, tok, cache)
        mask = copy_masks(per, tok.shape[1])[part]  # [b, T-1] targets 1..T-1
        target = tok[:, 1:]
        W_t = model.W_E[target]  # [b, T-1, D]
        mean_row = model.W_E.mean(0)  # centring: e_c - mean_v e_v
        contrib = ((pt.resid[:, :, :-1] * (W_t - mean_row)).sum(-1))  # [P, b, T-1]
        c = logits[:, :-1]
        own = c.gather(-1, target[..., None])[..., 0] - c.mean(-1)
        part_sum = contrib[:, mask].sum(-1)
        sums = part_sum if sums is None else sums + part_sum
        total += float(own[mask].sum())
        n += int(mask.sum())
        labels, kinds = pt.labels, pt.kinds
    return {"labels": labels, "kinds": kinds, "values": (sums / max(n, 1)).tolist(),
            "total": total / max(n, 1), "n": n}
