"""Part 2: circuits and ablations (page: Circuits & ablations).

Your file: write each function below, then check it with

    python -m pytest exercises/test_part2_circuits.py

from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).
Hints and solutions: the Exercises page of the app, or exercises/solutions/part2_circuits.py.
"""
import math  # noqa: F401

import torch  # noqa: F401
import torch.nn.functional as F  # noqa: F401

from core.model.tinycharlm import apply_rope, rope_cos_sin  # noqa: F401


def ov_copying_matrix(W_E: torch.Tensor, W_V: torch.Tensor, W_O: torch.Tensor) -> torch.Tensor:
    """The OV copying matrix of one head.

    W_E [V, D] (the embedding, also the unembedding's transpose), W_V [D, d_head] and W_O [d_head, D]
    of one head. Return C = W_E W_V W_O W_E^T [V, V]: row a = the attended token, column b = the
    logit its output raises.
    """
    raise NotImplementedError("not written yet")


def copying_scores(C: torch.Tensor) -> tuple[float, float]:
    """The OV copying scores of a copying matrix C [V, V] (row = attended token, column = logit).

    Return (ov_diag_top1, ov_copying_eig): ov_diag_top1 is the share of rows whose largest entry is
    on the diagonal (chance 1/V); ov_copying_eig is Re(sum of eigenvalues) / sum |eigenvalues| of
    C with every row's mean removed (centred: the softmax ignores a shift common to a row), +1 for
    pure copying, -1 for anti-copying. Compute the eigenvalues in float64 (torch.linalg.eigvals).
    """
    raise NotImplementedError("not written yet")


def rotary_profile(q: torch.Tensor, k: torch.Tensor, n_offsets: int) -> torch.Tensor:
    """A head's positional profile through RoPE.

    q, k [d_head]: a query and a key before rotation. With rotary positions the score of query
    position i on key position j depends on positions only through the offset t = i - j:
    (R_i q) . (R_j k) = (R_t q) . k. Return [n_offsets]: the score (R_t q) . k / sqrt(d_head) of a key
    t positions back, t = 0..n_offsets-1 (use rope_cos_sin(n_offsets, d_head, 10000.0) and apply_rope).
    """
    raise NotImplementedError("not written yet")


def k_composition(W_OV: torch.Tensor, W_QK: torch.Tensor) -> float:
    """K-composition of a writer head into a reader head (Elhage et al. 2021).

    W_OV [D, D] = W_V W_O of the writer (an earlier block); W_QK [D, D] = W_Q W_K^T of the reader.
    The reader's keys read what the writer wrote: x W_OV W_QK^T in the row-vector convention. Return
    ||W_OV W_QK^T||_F / (||W_OV||_F ||W_QK||_F) as a float. (The Circuits page sets it against the
    mean score of random matrices of the same shapes, core.reading.composition.composition_baseline.)
    """
    raise NotImplementedError("not written yet")


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
    raise NotImplementedError("not written yet")
