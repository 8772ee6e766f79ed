"""Part 3: the logit lens, patching and a head detector (pages: Causal experiments, Head archetypes & IOI).
Solutions."""
import math

import torch

from core.causal.patching import metric
from core.model.tinycharlm import apply_rope, rope_cos_sin


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
