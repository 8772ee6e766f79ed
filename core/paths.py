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

import math
from dataclasses import dataclass

import torch

from .model import TinyCharLM, apply_rope, rope_cos_sin
from .task import TaskConfig, sample_batch


def head_label(layer: int, head: int) -> str:
    """'2.3' is block 2, head 3 (both counted from 1, as the UI does)."""
    return f"{layer + 1}.{head + 1}"


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


def _kind(label: str) -> str:
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
    return PathTerms(labels, [_kind(s) for s in labels], torch.stack([terms[s] for s in labels]))


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
def induction_scores(model: TinyCharLM, task: TaskConfig, layer: int, n_seqs: int = 32, seed: int = 0) -> list[float]:
    """Each head's induction score on the latest copy (docs/DESIGN.md: mean A[i, i+1-L] over i >= L) in
    block `layer`."""
    from .heads import head_scores

    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=torch.Generator().manual_seed(seed))
    _, cache = model.run_with_cache(tokens)
    return head_scores(cache["pattern"][layer], periods)["induction"].tolist()


@torch.no_grad()
def mean_target_contributions(model: TinyCharLM, task: TaskConfig, n_seqs: int = 128, seed: int = 0,
                              part: str = "later", chunk: int = 32) -> dict:
    """Average each path's centered logit of the *correct* next token over sampled task sequences.

    part: "first" or "later" copies (docs/DESIGN.md). Returns {"labels", "kinds", "values" [P],
    "total": mean centered logit of the model, "n": targets averaged}.
    """
    from .task import copy_masks

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


# ---------------------------------------------------------------------------------------------
# Zero blocks: the Gram form


@torch.no_grad()
def gram_logits(model: TinyCharLM) -> torch.Tensor:
    """W_E W_E^T: [V, V], row = current token a, column = next-token logit b. For a zero-block
    model this *is* the model: logits[i] = gram[x_i]. Symmetric and positive semidefinite."""
    return model.W_E @ model.W_E.T


@torch.no_grad()
def bigram_counts(task: TaskConfig, vocab_size: int, n_seqs: int = 4096, seed: int = 0) -> torch.Tensor:
    """Counts [V, V] of (current a, next b) over sampled task sequences, each sequence's distinct
    pairs counted once: the L pairs x_t -> x_{t+1}, t = 0..L-1, of one period (later copies repeat
    the same pairs, adding copies but no information, which would inflate any estimate from them)."""
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, vocab_size, generator=g)
    one_period = torch.arange(tokens.shape[1] - 1)[None] < periods[:, None]  # [B, T-1]
    idx = (tokens[:, :-1] * vocab_size + tokens[:, 1:])[one_period]
    return torch.bincount(idx, minlength=vocab_size ** 2).view(vocab_size, vocab_size).float()


def mutual_information(counts: torch.Tensor) -> float:
    """Plug-in mutual information (nats) between current and next token from counts [V, V]."""
    p = counts / counts.sum()
    pa, pb = p.sum(1, keepdim=True), p.sum(0, keepdim=True)
    nz = p > 0
    return float((p[nz] * (p[nz] / (pa @ pb)[nz]).log()).sum())


@torch.no_grad()
def zero_block_summary(model: TinyCharLM, task: TaskConfig, n_seqs: int = 4096, seed: int = 0) -> dict:
    """What a zero-block model can know, and what the task offers it.

    Returns gram [V, V]; model_probs [V, V] (softmax of each Gram row); task_probs [V, V] (estimated
    P(next b | current a)); gram_max_error (max |model logits - Gram rows| on sampled sequences);
    mutual_info (plug-in, nats) and mutual_info_bias (its expected value, (V-1)^2 / (2N), when the
    tokens are independent); model_loss (model's mean loss on fresh sequences), bigram_loss (loss of
    the estimated table on fresh sequences), ln_V, n_pairs, repeat_bits (mean log2(V p(a | a)): how
    much the model favours repeating the current token).
    """
    V = model.cfg.vocab_size
    gram = gram_logits(model)
    counts = bigram_counts(task, V, n_seqs, seed)
    g = torch.Generator().manual_seed(seed + 1)
    tokens, _ = sample_batch(task, 256, V, generator=g)
    logits = model(tokens) if model.cfg.n_layers == 0 else None
    gram_err = float((logits - gram[tokens]).abs().max()) if logits is not None else math.nan
    model_probs = gram.softmax(-1)
    task_probs = counts / counts.sum(1, keepdim=True).clamp_min(1)
    a, b = tokens[:, :-1], tokens[:, 1:]
    model_loss = float(-model_probs.log()[a, b].mean())
    smoothed = (counts + 1) / (counts + 1).sum(1, keepdim=True)  # add-one so unseen pairs stay finite
    return {
        "gram": gram, "model_probs": model_probs, "task_probs": task_probs,
        "gram_max_error": gram_err, "mutual_info": mutual_information(counts),
        "mutual_info_bias": (V - 1) ** 2 / (2 * float(counts.sum())),
        "model_loss": model_loss, "bigram_loss": float(-smoothed.log()[a, b].mean()),
        "ln_V": math.log(V), "n_pairs": int(counts.sum()),
        "repeat_bits": float(torch.log2(model_probs.diagonal() * V).mean()),
    }


# ---------------------------------------------------------------------------------------------
# Skip-trigrams read from the weights (direct path only: the head reads and writes embeddings)


@torch.no_grad()
def qk_content(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    """Token-to-token attention scores [V dest b, V source a] at offset 0 (query and key at the same
    position, so RoPE rotates both equally and cancels), biases included:
    (e_b W_Q + b_Q) . (e_a W_K + b_K) / sqrt(d_head)."""
    blk = model.blocks[layer]
    q = model.W_E @ blk.W_Q[head]
    k = model.W_E @ blk.W_K[head]
    if model.cfg.bias:
        q, k = q + blk.b_Q[head], k + blk.b_K[head]
    return q @ k.T / math.sqrt(model.cfg.d_head)


@torch.no_grad()
def skip_trigrams(model: TinyCharLM, layer: int, head: int, k: int = 8) -> list[dict]:
    """The head's strongest "[a] ... [b] -> [c]" rules read from the weights, one per source token a.

    QK margin of (b, a): how far b's score for source a stands above b's mean score over all sources
    (offset-0 content part, see qk_content). OV logit of (a, c): the centered entry of a's row of
    W_E W_OV W_E^T. For each a: the destination b with the largest margin and the token c it boosts
    most; rules ranked by margin x OV logit (a large push that the head actually attends to).
    Returns the top k as dicts with source, dest, boosted (token ids), qk_margin, ov_logit.
    """
    from .circuits import ov_copying_matrix

    qk = qk_content(model, layer, head)
    qk = qk - qk.mean(-1, keepdim=True)  # [dest b, source a]
    ov = ov_copying_matrix(model, layer, head)
    ov = ov - ov.mean(-1, keepdim=True)  # [source a, boosted c]
    margin, dest = qk.max(0)  # per source a: its best destination
    ov_best, boosted = ov.max(-1)
    strength = margin.clamp_min(0) * ov_best.clamp_min(0)
    order = strength.argsort(descending=True)[:k]
    return [{"source": int(a), "dest": int(dest[a]), "boosted": int(boosted[a]),
             "qk_margin": float(margin[a]), "ov_logit": float(ov_best[a])} for a in order]


@torch.no_grad()
def ov_top(model: TinyCharLM, layer: int, head: int, source: int, k: int = 5) -> list[tuple[int, float]]:
    """Tokens that attending to `source` boosts most: top k of the centered OV row [(token, logit)]."""
    from .circuits import ov_copying_matrix

    row = ov_copying_matrix(model, layer, head)[source]
    row = row - row.mean()
    vals, idx = row.topk(k)
    return list(zip(idx.tolist(), vals.tolist()))


@torch.no_grad()
def qk_top(model: TinyCharLM, layer: int, head: int, dest: int, k: int = 5) -> list[tuple[int, float]]:
    """Source tokens destination `dest` prefers most at offset 0: [(token, score - row mean)]."""
    row = qk_content(model, layer, head)[dest]
    row = row - row.mean()
    vals, idx = row.topk(k)
    return list(zip(idx.tolist(), vals.tolist()))


# ---------------------------------------------------------------------------------------------
# Attention scores split into (query path, key path) terms


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


# ---------------------------------------------------------------------------------------------
# Composition scores: core.circuits computes them (Elhage et al. 2021); this arranges one block pair


def composition_matrix(model: TinyCharLM, kind: str, writer: int = 0, reader: int = 1) -> torch.Tensor:
    """[H writer heads, H reader heads] Q-, K- or V-composition scores from core.circuits."""
    from .circuits import COMPOSITION_KINDS, composition_table

    if kind not in COMPOSITION_KINDS:
        raise ValueError(f"composition kind must be one of {', '.join(COMPOSITION_KINDS)}, got {kind!r}.")
    df = composition_table(model)
    df = df[(df.kind == kind) & (df.writer_layer == writer) & (df.reader_layer == reader)]
    H = model.cfg.n_heads
    out = torch.zeros(H, H)
    for r in df.itertuples():
        out[r.writer_head, r.reader_head] = r.score
    return out
