"""Direct logit attribution and two weight products of a pair of heads (Elhage et al. 2021; Wang et al. 2022).

Without MLPs or LayerNorm the final stream is an exact sum of parts: the token's embedding W_E[x], every
head's output (z_h W_O[h], b_V included) and, with biases, each block's b_O. The tied unembedding is linear,
so a logit splits exactly into one term per part (direct logit attribution, DLA); a logit difference splits
the same way (core.causal.attribution).

The two weight products (row-vector convention, as the model computes):
- composed_ov_circuit: W_E W_OV^w W_OV^r W_E^T [V, V], what a token attended by the writer and then
  passed on by the reader's values raises at the logits (the V-composition path of core.reading.paths);
- full_k_circuit: W_E W_QK^r (W_E W_OV^w)^T [V, V], the score a query token a gives a key position whose
  stream holds the writer's output for token b (the K-composition circuit, offset 0, unscaled).
"""
from __future__ import annotations

import torch

from core.model.symbols import block_label, head_label
from core.model.tinycharlm import TinyCharLM


def part_labels(model: TinyCharLM) -> list[str]:
    """The parts of the final stream in order: "embedding", every head by block ("1.1", "1.2", ...), then,
    with biases, each block's b_O ("b_O block 1", ...)."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    labels = ["embedding", *(head_label(l, h) for l in range(L) for h in range(H))]
    if model.cfg.bias:
        labels += [f"b_O {block_label(l)}" for l in range(L)]
    return labels


@torch.no_grad()
def stream_parts(model: TinyCharLM, tokens: torch.Tensor) -> torch.Tensor:
    """The final stream of tokens [B, T] split into part_labels(model)'s parts: [P, B, T, D]."""
    _, cache = model.run_with_cache(tokens)
    B, T = tokens.shape
    parts = [model.W_E[tokens][None]]
    parts += [cache["head_out"][l].transpose(0, 1) for l in range(model.cfg.n_layers)]  # [H, B, T, D] each
    if model.cfg.bias:
        parts += [b.b_O.expand(1, B, T, -1) for b in model.blocks]
    return torch.cat(parts)


@torch.no_grad()
def direct_logit_attribution(model: TinyCharLM, tokens: torch.Tensor) -> torch.Tensor:
    """Each part's term of the right next token's logit: [P, B, T - 1], entry [p, b, t - 1] = part p's
    final-stream vector at position t - 1 dotted with W_E[x_t]. Summed over the parts: the logit itself."""
    parts = stream_parts(model, tokens)[:, :, :-1]  # [P, B, T-1, D]
    return (parts * model.W_E[tokens[:, 1:]]).sum(-1)


def _ov(model: TinyCharLM, layer: int, head: int) -> torch.Tensor:
    b = model.blocks[layer]
    return b.W_V[head] @ b.W_O[head]


@torch.no_grad()
def composed_ov_circuit(model: TinyCharLM, writer: tuple[int, int], reader: tuple[int, int]) -> torch.Tensor:
    """W_E W_OV^writer W_OV^reader W_E^T [V, V]: row a = the token the writer attends to, column b = the logit
    raised once the reader's values pass the writer's output on. The writer sits in an earlier block."""
    if writer[0] >= reader[0]:
        raise ValueError("the writer must sit in an earlier block than the reader.")
    return model.W_E @ _ov(model, *writer) @ _ov(model, *reader) @ model.W_E.T


@torch.no_grad()
def full_k_circuit(model: TinyCharLM, writer: tuple[int, int], reader: tuple[int, int]) -> torch.Tensor:
    """W_E W_QK^reader (W_E W_OV^writer)^T [V, V] with W_QK = W_Q W_K^T: row a = the query's token, column b =
    the token whose writer output sits in the key's stream; the pre-softmax score (no rotary, no 1/sqrt(d_head))."""
    if writer[0] >= reader[0]:
        raise ValueError("the writer must sit in an earlier block than the reader.")
    rb, rh = model.blocks[reader[0]], reader[1]
    return (model.W_E @ rb.W_Q[rh]) @ (model.W_E @ _ov(model, *writer) @ rb.W_K[rh]).T
