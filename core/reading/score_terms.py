"""Attention scores split into (query path, key path) terms.

q and k are linear in the stream and RoPE is a linear map per position, so with the patterns of
earlier blocks held fixed a head's score s_ij splits exactly into terms, one per pair of paths
(core.reading.paths) feeding its query and its key (Elhage et al. 2021).
"""
from __future__ import annotations

import math

import torch

from core.model.rope import apply_rope, rope_cos_sin
from core.model.task import TaskConfig, sample_batch
from core.model.tinycharlm import TinyCharLM
from core.reading.paths import stream_paths


@torch.no_grad()
def score_terms(model: TinyCharLM, tokens: torch.Tensor, layer: int, head: int,
                cache: dict | None = None) -> dict:
    """Split head (layer, head)'s scores into path pairs, every query at once.

    tokens [T] or [B, T]. The stream entering `layer` is split into paths (patterns of earlier blocks
    fixed); b_Q and b_K are paths of their own. Returns {"q_labels" [Pq], "k_labels" [Pk],
    "terms" [Pq, Pk, (B,) T, T] (query i, key j; before the causal mask), "scores" [(B,) T, T] (the
    model's own, before the mask)}, without the B axis for a single sequence;
    terms.sum((0, 1)) == scores to float precision.
    """
    single = tokens.dim() == 1
    tokens = tokens[None] if single else tokens
    if cache is None:
        _, cache = model.run_with_cache(tokens)
    blk, T, dh = model.blocks[layer], tokens.shape[1], model.cfg.d_head
    paths = stream_paths(model, tokens, cache["pattern"], upto=layer)
    cos, sin = rope_cos_sin(T, dh, model.cfg.rope_base, model.W_E.dtype)
    qs = torch.stack([apply_rope(x @ blk.W_Q[head], cos, sin) for x in paths.values()])  # [Pq, B, T, dh]
    ks = torch.stack([apply_rope(x @ blk.W_K[head], cos, sin) for x in paths.values()])
    q_labels, k_labels = list(paths), list(paths)
    if model.cfg.bias:
        B = tokens.shape[0]
        qs = torch.cat([qs, apply_rope(blk.b_Q[head].expand(B, T, dh), cos, sin)[None]])
        ks = torch.cat([ks, apply_rope(blk.b_K[head].expand(B, T, dh), cos, sin)[None]])
        q_labels.append("b_Q")
        k_labels.append("b_K")
    terms = torch.einsum("pbid,qbjd->pqbij", qs, ks) / math.sqrt(dh)
    q_full = apply_rope(_stream_proj(model, cache, layer, head, "Q"), cos, sin)
    k_full = apply_rope(_stream_proj(model, cache, layer, head, "K"), cos, sin)
    scores = q_full @ k_full.transpose(-1, -2) / math.sqrt(dh)
    if single:
        terms, scores = terms[:, :, 0], scores[0]
    return {"q_labels": q_labels, "k_labels": k_labels, "terms": terms, "scores": scores}


def _stream_proj(model: TinyCharLM, cache: dict, layer: int, head: int, which: str) -> torch.Tensor:
    """q or k [B, T, d_head] of one head from the cached stream (before RoPE), bias included."""
    blk = model.blocks[layer]
    x = cache["resid"][layer] @ getattr(blk, f"W_{which}")[head]
    return x + getattr(blk, f"b_{which}")[head] if model.cfg.bias else x


def target_margin(terms: torch.Tensor, query: int, key: int) -> torch.Tensor:
    """terms [..., T, T] -> [...]: the term at (query, key) minus its mean over the other visible
    keys j <= query (what makes `key` win the softmax at `query`)."""
    row = terms[..., query, :query + 1]
    if query == 0:
        return row[..., 0] * 0
    return row[..., key] - (row.sum(-1) - row[..., key]) / query


def induction_margins(terms: torch.Tensor, period: int) -> torch.Tensor:
    """target_margin at every query i >= period with key i+1-period: terms [..., T, T] -> [..., T-period]."""
    T = terms.shape[-1]
    i = torch.arange(period, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    row_sums = terms.masked_fill(~causal, 0).sum(-1)[..., period:]  # [..., n]
    at_target = terms[..., i, i + 1 - period]
    return at_target - (row_sums - at_target) / i.to(terms.dtype)


@torch.no_grad()
def mean_induction_score_terms(model: TinyCharLM, task: TaskConfig, layer: int, head: int,
                               n_seqs: int = 16, seed: int = 0) -> dict:
    """Average, over later-copy queries i of sampled sequences, of each (query path, key path) term's
    margin at the induction target j = i+1-L (see target_margin). Returns {"q_labels", "k_labels",
    "terms" [Pq, Pk], "total": the mean margin of the model's own scores, "n"}.
    """
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=g)
    st = score_terms(model, tokens, layer, head)
    acc, total, n = 0.0, 0.0, 0
    for b in range(n_seqs):
        L = int(periods[b])
        acc = acc + induction_margins(st["terms"][:, :, b], L).sum(-1)
        total += float(induction_margins(st["scores"][b], L).sum())
        n += tokens.shape[1] - L
    return {"q_labels": st["q_labels"], "k_labels": st["k_labels"], "terms": acc / n, "total": total / n, "n": n}
