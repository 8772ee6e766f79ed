"""Part 3: the logit lens, attribution, patching and head detectors (pages: What depth can express, Causal
experiments, Head archetypes & IOI). Solutions."""
import math

import torch

from core.causal.patching import metric
from core.model.rope import apply_rope, rope_cos_sin


def logit_lens(model, tokens: torch.Tensor) -> torch.Tensor:
    """The logit lens after each block.

    model: a TinyCharLM; tokens [B, T]. `_, cache = model.run_with_cache(tokens)` gives
    cache["resid"], n_layers + 1 streams [B, T, D]: stage 0 is the embedding, stage l the stream after
    block l. Read each stage through the unembedding (stream @ model.W_E.T) and return the probability
    of the right next token, [n_layers + 1, B, T - 1]: entry [s, b, t-1] is the softmax probability
    that stage s, at position t - 1, gives the target x_t.
    """
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        out = []
        for h in cache["resid"]:
            probs = (h[:, :-1] @ model.W_E.T).softmax(-1)
            out.append(probs.gather(-1, tokens[:, 1:, None])[..., 0])
        return torch.stack(out)


def direct_logit_attribution(model, tokens: torch.Tensor) -> torch.Tensor:
    """Direct logit attribution: the right token's logit split over the parts of the final stream.

    model: a TinyCharLM; tokens [B, T]. With no MLP and no LayerNorm the final stream is an exact sum of
    parts: the embedding W_E[tokens], every head's output (`_, cache = model.run_with_cache(tokens)`,
    cache["head_out"][l][:, h], [B, T, D]) and, when model.cfg.bias, each block's b_O. The logits are the
    stream @ W_E^T, so the logit of the target x_t at position t - 1 splits into one term per part: the
    part's vector at t - 1 dotted with W_E[x_t]. Return [P, B, T - 1], the parts in the order embedding,
    block 1's heads 1..H, block 2's heads, ..., then (with biases) b_O of block 1, 2, ...; summed over the
    parts (axis 0) it is the right token's logit (the check adds them up).
    """
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        B, T = tokens.shape
        parts = [model.W_E[tokens]] + [out[:, h] for out in cache["head_out"] for h in range(model.cfg.n_heads)]
        if model.cfg.bias:
            parts += [block.b_O.expand(B, T, -1) for block in model.blocks]
        right = model.W_E[tokens[:, 1:]]  # [B, T-1, D]: the unembedding row of each target
        return torch.stack([(part[:, :-1] * right).sum(-1) for part in parts])


def logit_diff_attribution(model, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """Logit-difference attribution (Wang et al. 2022): which parts of the stream write the right answer
    against the wrong one.

    clean [B, T], corrupted [B, T] (the first copy replaced, as in head_patch_effect), periods [B]. On the
    clean run, at each second-copy target L+1 <= t < 2L (the targets of M), the logit difference is the
    logit of the right token clean[t] minus the logit of the token the corrupted run's first copy offers
    there, corrupted[t - L] (core.causal.metrics's logit_diff), both read at position t - 1. Split it over
    the parts of direct_logit_attribution (a part's term: its vector at t - 1 dotted with
    W_E[clean_t] - W_E[corrupted_{t-L}]) and return [P]: each part's term averaged over every second-copy
    target of every sequence; summed over the parts it is the logit difference (the check adds them up).
    """
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
        B, T = clean.shape
        parts = [model.W_E[clean]] + [out[:, h] for out in cache["head_out"] for h in range(model.cfg.n_heads)]
        if model.cfg.bias:
            parts += [block.b_O.expand(B, T, -1) for block in model.blocks]
        total, count = torch.zeros(len(parts)), 0
        for b in range(B):
            L = int(periods[b])
            t = torch.arange(L + 1, 2 * L)
            direction = model.W_E[clean[b, t]] - model.W_E[corrupted[b, t - L]]  # [n, D]
            total += torch.stack([(part[b, t - 1] * direction).sum() for part in parts])
            count += len(t)
        return total / count


def head_patch_effect(model, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor,
                      layer: int, head: int) -> float:
    """Activation patching of one head: its patch effect.

    clean [B, T]: task sequences; corrupted [B, T]: the same with the first copy (t < L) replaced by
    a fresh random pattern; periods [B]. M(logits) = core.causal.patching.metric(logits, clean,
    periods), the mean log-probability of the right token over the second-copy targets L+1 <= t < 2L.
    Run the corrupted sequences, but with head (layer, head)'s output (cache["head_out"][layer][:, head],
    [B, T, D]) replaced by its output on the clean run at every position; rerun the blocks above
    (block(h) gives a block's output stream). Return the patch effect
    (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)) as a float.
    """
    with torch.no_grad():
        clean_logits, cc = model.run_with_cache(clean)
        corr_logits, kc = model.run_with_cache(corrupted)
        m_clean, m_corr = float(metric(clean_logits, clean, periods)), float(metric(corr_logits, clean, periods))
        h = kc["resid"][layer + 1] + cc["head_out"][layer][:, head] - kc["head_out"][layer][:, head]
        for block in model.blocks[layer + 1:]:
            h = block(h)
        m = float(metric(h @ model.W_E.T, clean, periods))
        return (m - m_corr) / (m_clean - m_corr)


def path_patch_keys(model, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor,
                    sender: tuple[int, int], receiver: tuple[int, int]) -> float:
    """Path patching into the keys (noising): is the path sender -> receiver's keys needed?

    sender and receiver are (layer, head), the sender in an earlier block. Start from the clean run.
    The receiver's *keys* read the clean stream entering its block plus (the sender's output on the
    corrupted run - its output on the clean run), at every position; its queries and values read the
    clean stream. Recompute the receiver's output (q = h W_Q[h], k, v likewise, plus b_Q, b_K, b_V if
    model.cfg.bias; rotary on q and k; causal softmax of q.k / sqrt(d_head); z = A v; z @ W_O[h]),
    swap it for its clean output in the stream after the receiver's block, rerun the blocks above it,
    and return the patch effect (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)) with M as
    in head_patch_effect.
    """
    (sl, sh), (rl, rh) = sender, receiver
    with torch.no_grad():
        clean_logits, cc = model.run_with_cache(clean)
        corr_logits, kc = model.run_with_cache(corrupted)
        m_clean, m_corr = float(metric(clean_logits, clean, periods)), float(metric(corr_logits, clean, periods))
        h = cc["resid"][rl]
        h_key = h + kc["head_out"][sl][:, sh] - cc["head_out"][sl][:, sh]
        block = model.blocks[rl]
        q, k, v = h @ block.W_Q[rh], h_key @ block.W_K[rh], h @ block.W_V[rh]
        if model.cfg.bias:
            q, k, v = q + block.b_Q[rh], k + block.b_K[rh], v + block.b_V[rh]
        T, dh = clean.shape[1], model.cfg.d_head
        cos, sin = rope_cos_sin(T, dh, model.cfg.rope_base)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        pattern = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        out = pattern @ v @ block.W_O[rh]
        h = cc["resid"][rl + 1] + out - cc["head_out"][rl][:, rh]
        for later in model.blocks[rl + 1:]:
            h = later(h)
        m = float(metric(h @ model.W_E.T, clean, periods))
        return (m - m_corr) / (m_clean - m_corr)


def path_patch_inputs(model, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor,
                      sender: tuple[int, int], receiver: tuple[int, int], path: str) -> float:
    """Path patching into the queries or the values (noising), the other two inputs of a head.

    As path_patch_keys, with the input the sender's change reaches chosen by path: "q" (the receiver's
    queries), "k" (its keys) or "v" (its values). Start from the clean run; the receiver's input `path` reads
    the clean stream entering its block plus (the sender's output on the corrupted run - its output on the
    clean run), at every position, its two other inputs the clean stream. Recompute the receiver's output
    (biases, rotary on q and k, causal softmax, z @ W_O[h]), swap it for its clean output in the stream after
    its block, rerun the blocks above, and return the patch effect (M(patched) - M(corrupted)) /
    (M(clean) - M(corrupted)) with M = core.causal.patching.metric.
    """
    (sl, sh), (rl, rh) = sender, receiver
    with torch.no_grad():
        clean_logits, cc = model.run_with_cache(clean)
        corr_logits, kc = model.run_with_cache(corrupted)
        m_clean, m_corr = float(metric(clean_logits, clean, periods)), float(metric(corr_logits, clean, periods))
        h = cc["resid"][rl]
        moved = h + kc["head_out"][sl][:, sh] - cc["head_out"][sl][:, sh]
        x = {p: moved if p == path else h for p in "qkv"}
        block = model.blocks[rl]
        q, k, v = x["q"] @ block.W_Q[rh], x["k"] @ block.W_K[rh], x["v"] @ block.W_V[rh]
        if model.cfg.bias:
            q, k, v = q + block.b_Q[rh], k + block.b_K[rh], v + block.b_V[rh]
        T, dh = clean.shape[1], model.cfg.d_head
        cos, sin = rope_cos_sin(T, dh, model.cfg.rope_base)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        pattern = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        h = cc["resid"][rl + 1] + pattern @ v @ block.W_O[rh] - cc["head_out"][rl][:, rh]
        for later in model.blocks[rl + 1:]:
            h = later(h)
        m = float(metric(h @ model.W_E.T, clean, periods))
        return (m - m_corr) / (m_clean - m_corr)


def circuit_faithfulness(model, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor,
                         circuit: frozenset) -> float:
    """A circuit's faithfulness (Wang et al. 2022, section 4): the share of M it keeps on its own.

    model: a 2-block TinyCharLM without biases; clean, corrupted, periods as in head_patch_effect. circuit: a
    set of elements, ("path", h, p): block-1 head h's output reaches input p ("q", "k" or "v") of every
    block-2 head; ("direct", h): block-1 head h's output reaches the logits directly; ("head", r): block-2
    head r's output reaches the logits. F(C) is M (core.causal.patching.metric) of the clean run where every
    element outside C carries, instead of its head's clean output, that head's mean output over the
    corrupted batch at each position (cache["head_out"][l].mean(0) of the corrupted run): block-2 input p
    of every block-2 head reads the clean stream entering block 2 plus (mean - clean) of each block-1 head
    whose path p is missing; the final stream gains (mean - clean) of each block-1 head whose direct
    element is missing; a block-2 head in C adds its output recomputed from those inputs (rotary, causal
    softmax, z @ W_O), one outside C its mean, in place of its clean output. Return the share recovered,
    (F(C) - F(none)) / (F(all) - F(none)), where `all` holds every element and none is the empty set.
    """
    H, T, dh = model.cfg.n_heads, clean.shape[1], model.cfg.d_head
    with torch.no_grad():
        _, cc = model.run_with_cache(clean)
        _, kc = model.run_with_cache(corrupted)
        clean1, clean2 = cc["head_out"][0], cc["head_out"][1]  # [B, H, T, D]
        mean1, mean2 = kc["head_out"][0].mean(0, keepdim=True), kc["head_out"][1].mean(0, keepdim=True)
        cos, sin = rope_cos_sin(T, dh, model.cfg.rope_base)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        block = model.blocks[1]

        def F(kept):
            x = {p: cc["resid"][1] + sum((mean1[:, h] - clean1[:, h] for h in range(H) if ("path", h, p) not in kept),
                                         torch.zeros_like(cc["resid"][1])) for p in "qkv"}
            final = cc["resid"][2].clone()
            for h in range(H):
                if ("direct", h) not in kept:
                    final += mean1[:, h] - clean1[:, h]
                if ("head", h) in kept:
                    q = apply_rope(x["q"] @ block.W_Q[h], cos, sin)
                    k = apply_rope(x["k"] @ block.W_K[h], cos, sin)
                    A = (q @ k.transpose(-1, -2) / math.sqrt(dh)).masked_fill(future, float("-inf")).softmax(-1)
                    final += A @ (x["v"] @ block.W_V[h]) @ block.W_O[h] - clean2[:, h]
                else:
                    final += mean2[:, h] - clean2[:, h]
            return float(metric(final @ model.W_E.T, clean, periods))

        every = {("path", h, p) for h in range(H) for p in "qkv"} | {(kind, h) for kind in ("direct", "head")
                                                                     for h in range(H)}
        f_none = F(set())
        return (F(set(circuit)) - f_none) / (F(every) - f_none)


def induction_detector(pattern: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """A detector for the induction archetype on one sequence (TransformerLens's detect_head, "mul").

    pattern [H, T, T] (query i, key j) of one sequence; tokens [T]. The induction mask M [T, T] is 1
    where 1 <= j <= i and token_{j-1} == token_i (key j follows an earlier occurrence of the query's
    token). Return [H]: the share of all the head's attention that falls on the mask,
    sum_ij A[i, j] M[i, j] / sum_ij A[i, j].
    """
    T = tokens.shape[0]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    prev_same = torch.zeros(T, T, dtype=torch.bool)
    prev_same[:, 1:] = tokens[None, :-1] == tokens[:, None]
    mask = prev_same & (j <= i)
    return (pattern * mask).sum((-2, -1)) / pattern.sum((-2, -1))


def attention_detectors(pattern: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three more detectors beside the induction one: previous-token, first-token (the attention sink) and
    self (TransformerLens's detect_head, "mul", as in induction_detector).

    pattern [H, T, T] (query i, key j) of one sequence; tokens [T] (these masks do not depend on the
    tokens). The masks: previous_token 1 where j = i - 1; first_token 1 where j = 0 and i >= 1 (query 0 can
    attend nowhere but key 0, so it says nothing about a sink); self 1 where j = i. For each, the share of
    all the head's attention that falls on the mask, sum_ij A[i, j] M[i, j] / sum_ij A[i, j]. Return the
    tuple (previous_token [H], first_token [H], self [H]).
    """
    T = pattern.shape[-1]
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    total = pattern.sum((-2, -1))
    return tuple((pattern * mask).sum((-2, -1)) / total for mask in (j == i - 1, (j == 0) & (i >= 1), j == i))
