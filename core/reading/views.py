"""What the Attention and Circuits pages draw of a model: the views core.reading.analysis (and, for a Markov-chain
model, core.reading.markov) computes, as numpy arrays and pandas frames. Apart from the computation, so that a
page reading a stored view imports no torch (core/model/lazy.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

EVAL_SEQS = 32  # evaluation batch of the ablation views (about 2,300 later-copy targets)


@dataclass
class SequenceView:
    """One sequence through the model, and the scores of its heads.

    tokens [T] ids and labels [T] (characters); period (None for typed text); raw and weighted
    [L, H, T, T] patterns of this sequence; predicted [T] the model's top next-token label at each
    position; scores: one row per head (label, layer, head) with the period scores (task sequences
    only) and the token detectors (columns tok_<detector>), averaged over n_seqs sequences; offsets:
    tidy offset-mass profile (label, layer, head, offset, mass) over the same sequences.
    """

    tokens: list[int]
    labels: list[str]
    period: int | None
    raw: np.ndarray
    weighted: np.ndarray
    predicted: list[str]
    scores: pd.DataFrame
    offsets: pd.DataFrame
    n_seqs: int
    intervals: pd.DataFrame | None = None  # heads.score_intervals (label, layer, head); None for typed text


@dataclass(frozen=True)
class HeadCircuitView:
    """Everything the Circuits page shows about one head, as numpy (D = d_model, V = vocab)."""
    qk: np.ndarray  # [D, D] W_QK's content part (offset 0)
    ov: np.ndarray  # [D, D] W_OV
    qk_s: np.ndarray  # [D] singular values, padded with exact zeros past d_head
    ov_s: np.ndarray  # [D]
    qk_rank: int
    ov_rank: int
    profile: dict[str, np.ndarray]  # name -> [T] score per offset 0..T-1 ("average query and key"; biases)
    C: np.ndarray  # [V, V] the head's OV copying matrix W_E W_OV W_E^T
    copy: dict  # copying scores of C (core.reading.copying.copying_scores)
    block_copy: dict  # the same for the block's heads summed
    copy_effective: dict  # rows read from the effective embedding (each earlier head weighted by its
    block_copy_effective: dict  # self-attention on the same 32 sequences); block 1: the plain scores
    self_attention: list | None  # [layer][head] measured self-attention of the earlier blocks' heads
    copy_uncentred: float  # the head's eigenvalue score without centring
    d_head: int
    vocab: int


@dataclass
class MarkovView:
    """What the Attention page shows of one Markov model on seeded sequences."""

    tokens: np.ndarray  # [T] the shown sequence (the first of the batch)
    labels: list[str]  # position labels of the shown sequence
    raw: np.ndarray  # [L, H, T, T] patterns on the shown sequence
    scores: pd.DataFrame  # label, layer, head, prev_token, successor (mean over n_seqs sequences), smear
    # (sigma(a_h), a model with smeared keys only)
    kl: pd.DataFrame  # strategy, kl (mean over positions and sequences, nats)
    even: float  # even_successor of the batch
    prev_heads: list[str]
    successor_heads: list[str]
    sentence: str  # which heads count transitions, from the numbers above
    n_seqs: int
