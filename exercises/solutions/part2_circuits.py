"""Part 2: circuits and ablations (page: Circuits & ablations). Solutions."""
import math

import torch
import torch.nn.functional as F

from core.model.rope import apply_rope, rope_cos_sin
from core.reading.composition import composition_baseline


def ov_copying_matrix(W_E: torch.Tensor, W_V: torch.Tensor, W_O: torch.Tensor) -> torch.Tensor:
    """The OV copying matrix of one head.

    W_E [V, D] (the embedding, also the unembedding's transpose), W_V [D, d_head] and W_O [d_head, D]
    of one head. Return C = W_E W_V W_O W_E^T [V, V]: row a = the attended token, column b = the
    logit its output raises.
    """
    return W_E @ W_V @ W_O @ W_E.T


def copying_scores(C: torch.Tensor) -> tuple[float, float]:
    """The OV copying scores of a copying matrix C [V, V] (row = attended token, column = logit).

    Return (ov_diag_top1, ov_copying_eig): ov_diag_top1 is the share of rows whose largest entry is
    on the diagonal (chance 1/V); ov_copying_eig is Re(sum of eigenvalues) / sum |eigenvalues| of
    C with every row's mean removed (centred: the softmax ignores a shift common to a row), +1 for
    pure copying, -1 for anti-copying. Compute the eigenvalues in float64 (torch.linalg.eigvals).
    """
    diag = float((C.argmax(-1) == torch.arange(C.shape[0])).float().mean())
    centred = (C - C.mean(-1, keepdim=True)).double()
    eig = torch.linalg.eigvals(centred)
    return diag, float(eig.sum().real / eig.abs().sum())


def factored_svals(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Singular values of a low-rank product without forming it (TransformerLens's FactoredMatrix).

    A [m, r] and B [r, n] with r smaller than m and n, e.g. a head's QK circuit W_Q W_K^T (A = W_Q,
    B = W_K^T) or its OV circuit seen from the tokens (A = W_E W_V, B = W_O W_E^T). M = A B is m x n, but
    its rank is at most r. With the QR decompositions A = Q_A R_A and B^T = Q_B R_B (torch.linalg.qr),
    M = Q_A (R_A R_B^T) Q_B^T, and Q_A, Q_B have orthonormal columns: M's nonzero singular values are those
    of the r x r matrix R_A R_B^T. Return them [r], largest first, computed in float64. Never form a
    tensor as large as M (the check watches).
    """
    R_A = torch.linalg.qr(A.double())[1]
    R_B = torch.linalg.qr(B.T.double())[1]
    return torch.linalg.svdvals(R_A @ R_B.T)


def rotary_profile(q: torch.Tensor, k: torch.Tensor, n_offsets: int) -> torch.Tensor:
    """A head's positional profile through RoPE.

    q, k [d_head]: a query and a key before rotation. With rotary positions the score of query
    position i on key position j depends on positions only through the offset t = i - j:
    (R_i q) . (R_j k) = (R_t q) . k. Return [n_offsets]: the score (R_t q) . k / sqrt(d_head) of a key
    t positions back, t = 0..n_offsets-1 (use rope_cos_sin(n_offsets, d_head, 10000.0) and apply_rope).
    """
    dh = q.shape[-1]
    cos, sin = rope_cos_sin(n_offsets, dh, 10000.0, q.dtype)
    return apply_rope(q.expand(n_offsets, dh), cos, sin) @ k / math.sqrt(dh)


def k_composition(W_OV: torch.Tensor, W_QK: torch.Tensor) -> float:
    """K-composition of a writer head into a reader head (Elhage et al. 2021).

    W_OV [D, D] = W_V W_O of the writer (an earlier block); W_QK [D, D] = W_Q W_K^T of the reader.
    The reader's keys read what the writer wrote: x W_OV W_QK^T in the row-vector convention. Return
    ||W_OV W_QK^T||_F / (||W_OV||_F ||W_QK||_F) as a float. (The Circuits page sets it against the
    mean score of random matrices of the same shapes, core.reading.composition.composition_baseline.)
    """
    return float((W_OV @ W_QK.T).norm() / (W_OV.norm() * W_QK.norm()))


def composition_scores(model, writer_layer: int, reader_layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Q-, K- and V-composition of every head of one block into every head of a later one, batched.

    model: a TinyCharLM; writer_layer < reader_layer (0-based). For each head h, W_OV[h] = W_V[h] W_O[h] and
    W_QK[h] = W_Q[h] W_K[h]^T ([D, D]; stack them [H, D, D] with torch.einsum, no loop over heads). For a
    writer w and a reader r (row-vector convention): Q reads W_OV^w W_QK^r, K reads W_OV^w (W_QK^r)^T, V
    reads W_OV^w W_OV^r; each score is ||product||_F / (||left||_F ||right||_F) as in k_composition, 0 for a
    head that writes or reads nothing (clamp the denominator at 1e-30, as core.reading.composition does).
    Return (scores, ratios), each [3, H writer, H reader] with the kinds in the order Q, K, V: the scores,
    and each score divided by the random baseline of its kind,
    composition_baseline(d_model, d_head)[kind] (core.reading.composition), the line the Circuits page draws.
    """
    bw, br = model.blocks[writer_layer], model.blocks[reader_layer]
    ov_w = torch.einsum("hdk,hkm->hdm", bw.W_V, bw.W_O)[:, None]  # [H, 1, D, D]: writers on axis 0
    qk_r = torch.einsum("hdk,hmk->hdm", br.W_Q, br.W_K)[None]  # [1, H, D, D]: readers on axis 1
    ov_r = torch.einsum("hdk,hkm->hdm", br.W_V, br.W_O)[None]
    scores = []
    for right in (qk_r, qk_r.transpose(-1, -2), ov_r):
        num = (ov_w @ right).norm(dim=(-2, -1))
        scores.append(num / (ov_w.norm(dim=(-2, -1)) * right.norm(dim=(-2, -1))).clamp_min(1e-30))
    scores = torch.stack(scores).detach()
    base = composition_baseline(model.cfg.d_model, model.cfg.d_head)
    return scores, scores / torch.tensor([base[k] for k in "QKV"])[:, None, None]


def composed_ov_circuit(model, writer: tuple[int, int], reader: tuple[int, int]) -> torch.Tensor:
    """The effective OV circuit of two heads together (V-composition).

    model: a TinyCharLM; writer and reader are (layer, head), the writer in an earlier block. The reader's
    values read what the writer wrote: a token a attended by the writer goes W_E[a] W_OV^writer, then through
    the reader's W_OV^reader, then to the logits. Return W_E W_OV^writer W_OV^reader W_E^T [V, V] (W_OV =
    W_V[h] W_O[h] of the head's block): row a = the token the writer attends to, column b = the logit raised.
    """
    (wl, wh), (rl, rh) = writer, reader
    bw, br = model.blocks[wl], model.blocks[rl]
    with torch.no_grad():
        return model.W_E @ bw.W_V[wh] @ bw.W_O[wh] @ br.W_V[rh] @ br.W_O[rh] @ model.W_E.T


def full_k_circuit(model, writer: tuple[int, int], reader: tuple[int, int]) -> torch.Tensor:
    """The full K-composition circuit of two heads.

    model: a TinyCharLM; writer and reader are (layer, head), the writer in an earlier block. The reader's
    query at a position holding token a reads W_E[a]; its key at a position where the writer wrote its output
    for token b reads W_E[b] W_OV^writer. Return W_E W_QK^reader (W_E W_OV^writer)^T [V, V], with W_QK =
    W_Q[h] W_K[h]^T of the reader and W_OV = W_V[h] W_O[h] of the writer: row a = the query's token, column
    b = the token behind the writer's output at the key; the score before rotary and before 1/sqrt(d_head).
    """
    (wl, wh), (rl, rh) = writer, reader
    bw, br = model.blocks[wl], model.blocks[rl]
    with torch.no_grad():
        keys = model.W_E @ bw.W_V[wh] @ bw.W_O[wh]  # [V, D]: the writer's output for each token
        return model.W_E @ br.W_Q[rh] @ br.W_K[rh].T @ keys.T


def score_parts(model, tokens: torch.Tensor, head: int) -> torch.Tensor:
    """An induction head's attention score split into query parts and key parts.

    model: a TinyCharLM with two blocks or more and no biases; tokens [T], one sequence; head: a head of
    block 2 (layer 1). The stream entering block 2 is a sum of 1 + H parts: part 0 the embedding W_E[tokens],
    part 1 + h block-1 head h's output (`_, cache = model.run_with_cache(tokens[None])`,
    cache["head_out"][0][0, h], [T, D]). q and k are linear in the stream, and so is RoPE: part p's query
    q_p = rotary(x_p W_Q[head]), part p's key k_p = rotary(x_p W_K[head]) (rope_cos_sin(T, d_head, 10000.0),
    apply_rope). Return [1 + H, 1 + H, T, T]: entry [p, s, i, j] = q_p[i] . k_s[j] / sqrt(d_head), the query
    part p on axis 0, the key part s on axis 1, before the causal mask; summed over p and s it is the head's
    score of query i on key j.
    """
    T, dh = tokens.shape[0], model.cfg.d_head
    block = model.blocks[1]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens[None])
        parts = torch.cat([model.W_E[tokens][None], cache["head_out"][0][0]])  # [1 + H, T, D]
        cos, sin = rope_cos_sin(T, dh, 10000.0)
        q = apply_rope(parts @ block.W_Q[head], cos, sin)  # [1 + H, T, dh]
        k = apply_rope(parts @ block.W_K[head], cos, sin)
        return torch.einsum("pid,sjd->psij", q, k) / math.sqrt(dh)


def ablation_delta(model, tokens: torch.Tensor, periods: torch.Tensor, layer: int, head: int,
                   mode: str) -> float:
    """The change in later-copy loss when one head is knocked out.

    model: a TinyCharLM; tokens [B, T], periods [B]; (layer, head) 0-based; mode "zero" or "mean".
    Run the model block by block: h = W_E[tokens]; each block gives
    `h_out, pattern, head_out, v = block.forward_with_cache(h)` with head_out [B, H, T, D] each head's
    output (without b_O). In block `layer`, replace head `head`'s output by 0 ("zero") or by its mean
    over the batch at each position ("mean"), i.e. h_out + (replacement - head_out[:, head]). Then
    logits = h_L W_E^T. Return loss_later_copies(ablated) - loss_later_copies(clean): the mean
    cross-entropy (nats) over the later-copy targets t >= L (logits at t - 1), as a float.
    """
    def later_loss(logits):
        t = torch.arange(1, tokens.shape[1])[None, :]
        later = t >= periods[:, None]
        loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
        return float(loss[later].mean())

    with torch.no_grad():
        clean = later_loss(model(tokens))
        h = model.W_E[tokens]
        for l, block in enumerate(model.blocks):
            h_out, _, head_out, _ = block.forward_with_cache(h)
            if l == layer:
                out = head_out[:, head]
                new = torch.zeros_like(out) if mode == "zero" else out.mean(0, keepdim=True).expand_as(out)
                h_out = h_out + (new - out)
            h = h_out
        return later_loss(h @ model.W_E.T) - clean


def knockout_rescore(model, tokens: torch.Tensor, periods: torch.Tensor, head: int, mode: str) -> torch.Tensor:
    """Knock out a previous-token head and score the induction heads again.

    model: a TinyCharLM with two blocks or more; tokens [B, T], periods [B]; head: a head of block 1
    (layer 0); mode "zero" or "mean" (as in ablation_delta: the head's output replaced by 0, or by its mean
    over the batch at each position). Run the model with that head knocked out, e.g. with
    `model.run_with_hooks(tokens, edits=...)` on f"blocks.0.attn.hook_z" (z [B, H, T, d_head]: the output
    z_h W_O[h] is linear in z_h), and return the induction scores [H] of block 2's heads (layer 1, as in
    induction_score) computed from block 2's patterns of that run.
    """
    def knock(z):
        z = z.clone()
        z[:, head] = 0.0 if mode == "zero" else z[:, head].mean(0, keepdim=True)
        return z

    with torch.no_grad():
        _, cache = model.run_with_hooks(tokens, edits={"blocks.0.attn.hook_z": knock},
                                        cache=["blocks.1.attn.hook_pattern"])
    pattern = cache["blocks.1.attn.hook_pattern"]
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H), 0
    for b in range(B):
        L = int(periods[b])
        i = torch.arange(L, T)
        total += pattern[b][:, i, i + 1 - L].sum(-1)
        count += len(i)
    return total / count
