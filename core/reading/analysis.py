"""Page-sized analyses: each call runs the model once or a few times and returns plain numpy arrays and
pandas frames (no tensors), so a page can cache the result and draw it without importing torch.

Every frame returned here has 0-based `layer` and `head` and the head's `label` ("1.4"), first, from
core.model.symbols: the one place that counts blocks and heads from 1 for the student.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from core.model import symbols
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.reading import ablation, attention, circuits, composition, copying, heads, probes
from core.reading.detectors import DETECTORS, detector_scores
from core.reading.views import EVAL_SEQS, HeadCircuitView, SequenceView

SCORE_SEQS = 32  # task sequences behind the head-score table and offset profile
DETECTOR_PREFIX = "tok_"  # detector columns (token-based, no period) beside the period scores


# ---------------------------------------------------------------------------------------------
# Attention page


def _detector_means(patterns: list[torch.Tensor], tokens: torch.Tensor) -> pd.DataFrame:
    """Detector scores per head averaged over sequences: patterns[l] [B, H, T, T], tokens [B, T]."""
    rows = []
    for layer, pattern in enumerate(patterns):
        scores = {d: s.mean(0) for d, s in detector_scores(pattern, tokens[:, None, :]).items()}  # [H] each
        for h in range(pattern.shape[1]):
            rows.append({"layer": layer, "head": h, **{DETECTOR_PREFIX + d: float(scores[d][h]) for d in DETECTORS}})
    return symbols.with_labels(pd.DataFrame(rows, columns=["layer", "head", *(DETECTOR_PREFIX + d for d in DETECTORS)]))


@torch.no_grad()
def _sequence_view(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor | None) -> SequenceView:
    cap = attention.capture(model, tokens, periods)
    scores = _detector_means(cap.pattern, cap.tokens)
    if periods is not None:
        scores = heads.head_score_table(cap.pattern, periods).merge(scores, on=["label", "layer", "head"])
    first = cap.tokens[0]
    raw = torch.stack([p[0] for p in cap.pattern]) if cap.n_layers else torch.zeros(0)
    weighted = torch.stack([cap.weighted(l)[0] for l in range(cap.n_layers)]) if cap.n_layers else torch.zeros(0)
    return SequenceView(
        tokens=first.tolist(), labels=symbols.token_labels(first),
        period=None if periods is None else int(periods[0]),
        raw=raw.numpy(), weighted=weighted.numpy(),
        predicted=symbols.token_labels(cap.logits[0].argmax(-1)),
        scores=scores, offsets=heads.offset_table(cap.pattern), n_seqs=tokens.shape[0],
        intervals=None if periods is None else heads.score_intervals(cap.pattern, periods))


def task_sequence_view(model: TinyCharLM, task: TaskConfig, period: int, seed: int = 0) -> SequenceView:
    """SCORE_SEQS task sequences at one period (the first is the one shown)."""
    lo, hi = probes.probe_periods(task)
    if not lo <= period <= hi:
        raise ValueError(f"period must be between {lo} and {hi} so that a second copy fits in {task.seq_len} tokens.")
    tokens, periods = attention.task_sequences(task, model.cfg.vocab_size, SCORE_SEQS, period=period, seed=seed)
    return _sequence_view(model, tokens, periods)


def text_view(model: TinyCharLM, text: str) -> SequenceView:
    """A typed sequence (see core.model.symbols.ALPHABET); raises symbols.InputProblem with a message on bad input."""
    return _sequence_view(model, torch.tensor([symbols.encode_text(text, model.cfg.vocab_size, min_len=2)]), None)


def probe_view(model: TinyCharLM, task: TaskConfig, period: int) -> dict:
    """The period-shift probe at one period, on 32 sequences: {"metrics", "mass": frame (label, layer, head,
    offset, mass, role)} with role "period - 1" for offset period-1 and "trained offset" for each training L-1."""
    trained = probes.training_offsets(task)
    shown = sorted({trained[0], trained[-1]})
    out = probes.period_probe(model, task, period, offsets=shown, n_seqs=32)
    mass = out["offset_mass"].copy()
    mass["role"] = np.where(mass["offset"] == period - 1, "probe period − 1 (induction target)",
                            "training period − 1 (fixed-offset rule)")
    return {"metrics": out["metrics"], "mass": mass}


def sweep_view(model: TinyCharLM, task: TaskConfig) -> pd.DataFrame:
    """Accuracy and loss at every probe period, 4 sequences each (core.reading.probes.period_sweep)."""
    return probes.period_sweep(model, task, n_seqs=4)


# ---------------------------------------------------------------------------------------------
# Circuits page


@torch.no_grad()
def head_circuit_view(model: TinyCharLM, task: TaskConfig, layer: int, head: int) -> HeadCircuitView:
    """Everything the Circuits page shows about one head (HeadCircuitView), for 0-based layer, head."""
    qk_f, ov_f = circuits.qk_circuit(model, layer, head), circuits.ov_circuit(model, layer, head)
    tokens, periods = attention.task_sequences(task, model.cfg.vocab_size, 32, seed=0)
    self_attn = copying.measured_self_attention(model, tokens, periods) if layer else None
    resid, _ = model.run_with_hooks(tokens, stop=layer)
    T = task.seq_len
    q, k = circuits.head_qk_vectors(model, layer, head, resid=resid, source="mean")
    profile = {"average query and key": circuits.rotary_profile(q, k, T, model.cfg.rope_base).numpy()}
    if model.cfg.bias:
        qb, kb = circuits.head_qk_vectors(model, layer, head, source="bias")
        profile["biases b_Q, b_K only"] = circuits.rotary_profile(qb, kb, T, model.cfg.rope_base).numpy()
    C = copying.ov_copying_matrix(model, layer, head)
    block_copy = copying.copying_scores(copying.ov_copying_matrix(model, layer, None))
    copy = copying.copying_scores(C)
    if layer:  # block 1 reads W_E itself: the effective scores are the plain ones
        copy_eff = copying.copying_scores(copying.ov_copying_matrix(model, layer, head, True, self_attn))
        block_eff = copying.copying_scores(copying.ov_copying_matrix(model, layer, None, True, self_attn))
    else:
        copy_eff, block_eff = copy, block_copy
    return HeadCircuitView(
        qk=qk_f.AB.numpy(), ov=ov_f.AB.numpy(), qk_s=qk_f.svals(full=True).numpy(), ov_s=ov_f.svals(full=True).numpy(),
        qk_rank=qk_f.rank(), ov_rank=ov_f.rank(), profile=profile, C=C.numpy(), copy=copy, block_copy=block_copy,
        copy_effective=copy_eff, block_copy_effective=block_eff, self_attention=self_attn,
        copy_uncentred=copying.ov_copying_eig(C, centred=False), d_head=model.cfg.d_head, vocab=model.cfg.vocab_size)


def copying_table_view(model: TinyCharLM, task: TaskConfig | None = None) -> pd.DataFrame:
    """ov_copying_table (label, layer, head; head "all" for a block's sum); with a task, the
    effective columns weight each earlier head by its self-attention measured on 32 sequences."""
    self_attn = None
    if task is not None and model.cfg.n_layers > 1:
        tokens, periods = attention.task_sequences(task, model.cfg.vocab_size, 32, seed=0)
        self_attn = copying.measured_self_attention(model, tokens, periods)
    return copying.ov_copying_table(model, self_attn)


def composition_view(model: TinyCharLM) -> tuple[pd.DataFrame, dict[str, float]]:
    """(scores, baseline): rows {kind, writer, reader, score, baseline, ratio} with heads labelled
    'block.head', and the random-matrix baseline per kind."""
    df = composition.composition_table(model)
    base = composition.composition_baseline(model.cfg.d_model, model.cfg.d_head)
    out = pd.DataFrame({
        "kind": df["kind"],
        "writer": [symbols.head_label(l, h) for l, h in zip(df.writer_layer, df.writer_head)],
        "reader": [symbols.head_label(l, h) for l, h in zip(df.reader_layer, df.reader_head)],
        "score": df["score"],
    })
    out["baseline"] = out["kind"].map(base)
    out["ratio"] = out["score"] / out["baseline"]
    return out, base


def _ablation_batch(model: TinyCharLM, task: TaskConfig):
    """The ablation views' EVAL_SEQS task sequences (seed 0; not the trainer's eval_batch)."""
    return attention.task_sequences(task, model.cfg.vocab_size, EVAL_SEQS, seed=0)


def ablation_view(model: TinyCharLM, task: TaskConfig, heads_ablated: dict[str, str]) -> pd.DataFrame:
    """Before/after copy metrics with heads {'block.head': 'zero' | 'mean'} ablated (rows = metric)."""
    tokens, periods = _ablation_batch(model, task)
    spec = {symbols.parse_head_label(k): mode for k, mode in heads_ablated.items()}
    return ablation.compare_ablation(model, tokens, periods, spec)


def ablation_grid_view(model: TinyCharLM, task: TaskConfig, mode: str = "zero") -> pd.DataFrame:
    """Each head ablated alone: label, layer, head, loss_later_delta, acc_later_delta."""
    tokens, periods = _ablation_batch(model, task)
    return ablation.ablation_table(model, tokens, periods, mode)
