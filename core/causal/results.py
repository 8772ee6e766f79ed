"""What the Causal experiments page reads of its experiments: the Experiments dataclass core.causal.experiments
computes (stored on disk as it is) and the position sweeps' budget. Apart from the computation, so that a page
reading a stored view imports no torch (core/model/lazy.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

POSITION_BUDGET = 4 * 2 * 5 * 64 ** 2  # four times the shipped 2-block model's sweep at its longest period


@dataclass
class Experiments:
    """Every experiment of the Causal page on one pair of runs (experiments()). The patching experiments
    see the sequences cut after their second copy; the logit lens sees them whole."""

    m_clean: float
    """M, the mean log-probability of the right second-copy token, on the clean run."""
    m_corrupted: float
    """M on the corrupted run."""
    n_seqs: int
    """Sequences (clean and corrupted pairs) measured."""
    period: int | None
    """Their period, None if the periods differ."""
    clean: list[str]
    """The first clean sequence's tokens as labels (cut after its second copy)."""
    corrupted: list[str]
    """The first corrupted sequence's tokens as labels."""
    heads: pd.DataFrame
    """One row per head (label, layer, head, patch_effect, effect_low, effect_high): its clean output
    patched alone into the corrupted run, with the 95% bootstrap interval over the sequences."""
    all_heads: float
    """Effect of patching every head at once (NaN without heads)."""
    resid_last: float
    """Effect of patching the whole stream entering the last block (NaN without blocks)."""
    resid: np.ndarray | None
    """[n_layers, T] the clean stream before each block restored at one position; None without the sweeps."""
    resid_noise: np.ndarray | None
    """[n_layers, T] the same, noising (the corrupted stream into the clean run); None without the sweeps."""
    head_positions: np.ndarray | None
    """[n_layers * H, T] one head's clean output at one position (rows head_rows); None without the sweeps."""
    position_cost: int
    """Relative cost of the position sweeps (position_sweep_cost), against POSITION_BUDGET."""
    embedding_window: dict | None
    """embedding_window(): a few neighbouring embeddings restored together; None without the sweeps."""
    noise: pd.DataFrame
    """noising.head_noise_effects per head with its label first: noising and direct effects, intervals,
    and direct_testable (_noise_frame)."""
    attribution: dict | None
    """atp.attribution_agreement() against the exact sweep; None without the sweeps."""
    head_rows: list[str]
    """The label of each row of head_positions."""
    paths: pd.DataFrame
    """path_patching.path_patch_table from the block-1 heads into the block-2 heads, with sender and
    receiver labels and testable (the sender's output differs between the runs where the path reads it)."""
    corruption: str
    """The corruption (core.causal.corruptions.CORRUPTIONS)."""
    senders: pd.DataFrame | None
    """sender_frame(): how much each block-1 head's output differs between the runs; None for one block."""
    offsets: pd.DataFrame | None
    """block1_offsets(): how far back each block-1 head looks; None for one block."""
    lens: pd.DataFrame
    """The logit lens on the first clean sequence, whole, with token and target_token labels."""
    lens_by_copy: pd.DataFrame
    """The logit lens on every clean sequence, whole, by copy (logit_lens.lens_by_copy)."""
    by_metric: pd.DataFrame | None = None
    """metrics.head_effects_by_metric: section 1's head patching under log-prob, logit difference, probability."""
    circuit: dict | None = None
    """circuit.page_circuit: the circuit chosen and scored with one reference (the mean over the corrupted runs),
    with "elements" (their labels), its knockouts, greedy growth and the corrupted-run reference's circuit
    beside it ("other"). None unless 2 blocks."""
    composition: pd.DataFrame | None = None
    """composition.composition_vs_paths: weight K-composition beside key-path noising per receiver; None
    unless 2 or more blocks."""
    typed: bool = False
    """One typed sequence against many corruptions (text_experiments): the intervals are over corruptions."""

    @property
    def gap(self) -> float:
        """M(clean) - M(corrupted): below core.causal.clarity.MIN_GAP no patch effect means much."""
        return float(self.m_clean - self.m_corrupted)
