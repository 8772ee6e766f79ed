"""Part 3: the logit lens, patching and a head detector (pages: Causal experiments, Head archetypes & IOI).

Your file: write each function below, then check it with

    python -m pytest exercises/test_part3_causal.py

from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).
Hints and solutions: the Exercises page of the app, or exercises/solutions/part3_causal.py.
"""
import math  # noqa: F401

import torch  # noqa: F401

from core.causal.patching import metric  # noqa: F401
from core.model.tinycharlm import apply_rope, rope_cos_sin  # noqa: F401


def logit_lens(model, tokens: torch.Tensor) -> torch.Tensor:
    """The logit lens after each block.

    model: a TinyCharLM; tokens [B, T]. `_, cache = model.run_with_cache(tokens)` gives
    cache["resid"], n_layers + 1 streams [B, T, D]: stage 0 is the embedding, stage l the stream after
    block l. Read each stage through the unembedding (stream @ model.W_E.T) and return the probability
    of the right next token, [n_layers + 1, B, T - 1]: entry [s, b, t-1] is the softmax probability
    that stage s, at position t - 1, gives the target x_t.
    """
    raise NotImplementedError("not written yet")


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
    raise NotImplementedError("not written yet")


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
    raise NotImplementedError("not written yet")


def induction_detector(pattern: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """A detector for the induction archetype on one sequence (TransformerLens's detect_head, "mul").

    pattern [H, T, T] (query i, key j) of one sequence; tokens [T]. The induction mask M [T, T] is 1
    where 1 <= j <= i and token_{j-1} == token_i (key j follows an earlier occurrence of the query's
    token). Return [H]: the share of all the head's attention that falls on the mask,
    sum_ij A[i, j] M[i, j] / sum_ij A[i, j].
    """
    raise NotImplementedError("not written yet")
