"""Activation patching: clean runs against corrupted runs (DESIGN.md "Causal experiments").

Clean run: task sequences. Corrupted run: the same sequences with the first copy (positions 0..L-1)
replaced by a fresh random pattern, so a second-copy target can no longer be read from the context.
Metric M: the mean log-probability of the right token over second-copy targets L+1 <= t < 2L (the
target at t = L is left out: even the clean run cannot predict it, nothing before it says the pattern repeats).
Patch effect: (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)); 0 = no recovery, 1 = full.

A head's output is its z W_O without b_O ([B, T, D] per head, cache["head_out"] of run_with_cache, the
hook_result of TinyCharLM.run_with_hooks). Every patch is an edit on that one forward: a patched head
output or stream is added to the cached stream of the run it goes into and the model runs from the
block above (`start`), so only the blocks above the patch are rerun; many patches go in one call as a
leading patch dim [G, B, T, D], in chunks of CHUNK_POSITIONS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core.causal.corruptions import CORRUPTIONS, corrupted_tokens
from core.model.hooks import hook_name
from core.model.task import TaskConfig, sample_batch
from core.model.tinycharlm import TinyCharLM
from core.reading import bootstrap

CHUNK_POSITIONS = 1 << 16  # sequences x positions per patched forward: bounds memory on a shared server


def target_mask(periods: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Boolean [B, seq_len - 1] over targets t = 1..seq_len-1: True where L+1 <= t < 2L."""
    t = torch.arange(1, seq_len)[None, :]
    L = periods[:, None]
    return (t >= L + 1) & (t < 2 * L)


def check_period(period: int, seq_len: int) -> None:
    """ValueError saying why a period gives nothing to measure (no complete second copy, or L < 2)."""
    if period < 2:
        raise ValueError(f"Period {period} has no second-copy target after the first one (L+1 <= t < 2L is empty): "
                         "use a period of at least 2.")
    if 2 * period > seq_len:
        raise ValueError(f"Period {period} leaves no complete second copy in {seq_len} tokens: use a period of at "
                         f"most {seq_len // 2}.")


def metric(logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """M per group: logits [..., B, T, V], tokens [B, T] -> mean log-prob of the right token over the
    second-copy targets, shape [...] (a 0-dim tensor for plain [B, T, V])."""
    mask = target_mask(periods, tokens.shape[1])  # [B, T-1]
    b, i = mask.nonzero(as_tuple=True)  # logits of target t sit at position t-1 = i
    picked = logits[..., b, i, :]  # [..., N, V]
    logp = picked.log_softmax(-1).gather(-1, tokens[b, i + 1].expand(*picked.shape[:-1])[..., None])
    return logp[..., 0].mean(-1)


def metric_by_seq(logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor) -> torch.Tensor:
    """M of each sequence: logits [..., B, T, V] -> [..., B], the mean log-prob of the right token over
    that sequence's second-copy targets. Weighted by target_counts they pool to `metric`."""
    mask = target_mask(periods, tokens.shape[1])  # [B, T-1]
    logp = logits[..., :-1, :].log_softmax(-1).gather(-1, tokens[:, 1:].expand(*logits.shape[:-2], -1)[..., None])
    logp = logp[..., 0] * mask
    return logp.sum(-1) / mask.sum(-1).clamp_min(1)


def target_counts(periods: torch.Tensor) -> torch.Tensor:
    """How many second-copy targets each sequence has (L - 1): metric_by_seq's pooling weights."""
    return (periods - 1).clamp_min(0).double()


@dataclass
class PatchRuns:
    """Both runs of one experiment: tokens [B, T] (truncated to 2 max L: later positions cannot change M),
    periods [B], and each run's cache from model.run_with_cache and its metric M."""

    clean: torch.Tensor
    corrupted: torch.Tensor
    periods: torch.Tensor
    clean_cache: dict
    corrupted_cache: dict
    m_clean: float
    m_corrupted: float
    clean_full: torch.Tensor | None = None  # the clean tokens before the cut (for views of whole sequences)
    corruption: str = "first-copy"  # how the corrupted run was made (CORRUPTIONS)
    clean_seq: np.ndarray | None = None  # M of each clean sequence (metric_by_seq), [B]
    corrupted_seq: np.ndarray | None = None  # M of each corrupted sequence, [B]

    @property
    def weights(self) -> np.ndarray:
        """Each sequence's number of second-copy targets (how metric_by_seq pools to M), [B]."""
        return target_counts(self.periods).numpy()

    def effect(self, m_patched) -> np.ndarray:
        """Patch effect of M values (array-like); NaN where M(clean) == M(corrupted)."""
        m = np.asarray(m_patched, dtype=np.float64)
        gap = self.m_clean - self.m_corrupted
        return (m - self.m_corrupted) / gap if gap != 0 else np.full_like(m, math.nan)


def effect_interval(runs: PatchRuns, m_seq) -> tuple[np.ndarray, np.ndarray]:
    """A bootstrap interval of patch effects over the sequences measured: m_seq [..., B] (metric_by_seq
    of each patched run) -> (low, high), each [...]. Each resample (core.reading.bootstrap) draws B
    sequences with replacement and recomputes the whole ratio, denominator included; NaN where a
    resample's M(clean) == M(corrupted)."""
    m = np.asarray(m_seq, dtype=np.float64)
    w = runs.weights

    def effect(idx):  # [N, B] -> [..., N]
        ws = w[idx]
        clean = (runs.clean_seq[idx] * ws).sum(-1)
        corr = (runs.corrupted_seq[idx] * ws).sum(-1)
        patched = (m[..., idx] * ws).sum(-1)
        gap = clean - corr
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(gap != 0, (patched - corr) / gap, np.nan)

    return bootstrap.sequence_interval(effect, len(w))


@torch.no_grad()
def prepare(model: TinyCharLM, clean: torch.Tensor, corrupted: torch.Tensor, periods: torch.Tensor,
            corruption: str = "first-copy") -> PatchRuns:
    """Run both token batches [B, T] once with the cache (corruption: the name of how `corrupted` was made)."""
    for L in periods.unique().tolist():
        check_period(int(L), clean.shape[1])
    T = 2 * int(periods.max())
    full, clean, corrupted = clean, clean[:, :T], corrupted[:, :T]
    c_logits, c_cache = model.run_with_cache(clean)
    k_logits, k_cache = model.run_with_cache(corrupted)
    return PatchRuns(clean, corrupted, periods, c_cache, k_cache,
                     float(metric(c_logits, clean, periods)), float(metric(k_logits, clean, periods)), full,
                     corruption, metric_by_seq(c_logits, clean, periods).double().numpy(),
                     metric_by_seq(k_logits, clean, periods).double().numpy())


def task_runs(model: TinyCharLM, task: TaskConfig, n_seqs: int, seed: int = 0, period: int | None = None,
              corruption: str = "first-copy") -> PatchRuns:
    """Sample n_seqs task sequences (at one period if given) and their corrupted runs with seed `seed`:
    corruption "first-copy" replaces each first copy by a fresh pattern, "resample" takes another
    sequence of the same period as the donor (both drawn right after the clean batch)."""
    if corruption not in CORRUPTIONS:
        raise ValueError(f"corruption must be one of {', '.join(CORRUPTIONS)}, got {corruption!r}.")
    if period is not None:
        check_period(period, task.seq_len)
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=g, period=period)
    return prepare(model, tokens, corrupted_tokens(tokens, periods, model.cfg.vocab_size, corruption, g), periods,
                   corruption)


def _metrics_of_streams(model: TinyCharLM, runs: PatchRuns, streams: torch.Tensor, start: int,
                        by_seq: bool = False) -> torch.Tensor:
    """streams [G, B, T, D] entering block `start` -> M of each of the G patched runs, [G], in chunks
    (by_seq: (M [G], metric_by_seq [G, B]))."""
    B, T = runs.clean.shape
    per = max(1, CHUNK_POSITIONS // (B * T))
    measure = both_metrics if by_seq else metric
    out = [measure(model.run_with_hooks(resid=streams[i:i + per], start=start)[0], runs.clean, runs.periods)
           for i in range(0, streams.shape[0], per)]
    if by_seq:
        return torch.cat([m for m, _ in out]), torch.cat([s for _, s in out])
    return torch.cat(out)


def both_metrics(logits: torch.Tensor, tokens: torch.Tensor, periods: torch.Tensor):
    """(metric, metric_by_seq) of the same logits."""
    return metric(logits, tokens, periods), metric_by_seq(logits, tokens, periods)


def _lazy_metrics(model, runs: PatchRuns, make, n: int, start: int) -> torch.Tensor:
    """Like _metrics_of_streams, but the G = n streams are built chunk by chunk: make(lo, hi) -> [hi-lo, B, T, D]."""
    B, T = runs.clean.shape
    per = max(1, CHUNK_POSITIONS // (B * T))
    return torch.cat([metric(model.run_with_hooks(resid=make(lo, min(n, lo + per)), start=start)[0], runs.clean,
                             runs.periods)
                      for lo in range(0, n, per)])


@torch.no_grad()
def patch_heads(model: TinyCharLM, runs: PatchRuns, heads: list[tuple[int, int]]) -> float:
    """M of the corrupted run with the clean output of every head in `heads` patched in at every position,
    all at once: edits on hook_result. The lowest patched block is not rerun (its
    other heads' outputs are cached): its patch is added to the corrupted stream above it, and the run
    starts there. An empty list gives M(corrupted)."""
    if not heads:
        return runs.m_corrupted
    start = min(l for l, _ in heads)
    mine = {layer: sorted({hd for l, hd in heads if l == layer}) for layer in {l for l, _ in heads}}

    def swap(layer, result):  # result [B, H, T, D] -> the same with the clean outputs of this block's heads
        clean, mine_here = runs.clean_cache["head_out"][layer], mine[layer]
        result = result.clone()
        result[:, mine_here] = clean[:, mine_here]
        return result

    out = runs.corrupted_cache["head_out"][start]
    h = runs.corrupted_cache["resid"][start + 1] + (swap(start, out) - out).sum(1)
    edits = {hook_name(layer, "attn.hook_result"): (lambda r, layer=layer: swap(layer, r))
             for layer in mine if layer > start}
    logits, _ = model.run_with_hooks(resid=h, start=start + 1, edits=edits)
    return float(metric(logits, runs.clean, runs.periods))


@torch.no_grad()
def head_patch_effects(model: TinyCharLM, runs: PatchRuns) -> pd.DataFrame:
    """Patching (1): each head's clean output at every position into the corrupted run.

    Rows: layer, head (0-based), m_patched, patch_effect, and effect_low, effect_high: its 95% bootstrap
    interval over the sequences (effect_interval)."""
    rows, seqs = [], []
    for layer in range(model.cfg.n_layers):
        clean = runs.clean_cache["head_out"][layer].transpose(0, 1)  # [H, B, T, D]
        corr = runs.corrupted_cache["head_out"][layer].transpose(0, 1)
        streams = runs.corrupted_cache["resid"][layer + 1][None] + (clean - corr)
        m, by_seq = _metrics_of_streams(model, runs, streams, layer + 1, by_seq=True)
        seqs.append(by_seq.double().numpy())  # [H, B]
        rows += [{"layer": layer, "head": hd, "m_patched": float(m[hd])} for hd in range(model.cfg.n_heads)]
    df = pd.DataFrame(rows, columns=["layer", "head", "m_patched"])
    df["patch_effect"] = runs.effect(df["m_patched"].to_numpy())
    if seqs:
        df["effect_low"], df["effect_high"] = effect_interval(runs, np.concatenate(seqs))
    else:
        df["effect_low"] = df["effect_high"] = pd.Series(dtype=float)
    return df


def _sweep_positions(runs: PatchRuns, piece: torch.Tensor, into: torch.Tensor) -> torch.Tensor:
    """The positions p a one-position patch of `piece` into the run whose stream is `into` (both [B, T, ...]) can
    change M at: where the two differ in some sequence, and at or before the last position whose logits M scores
    (a patch at p changes only positions p and later). Elsewhere the patched run is the run patched into, and
    its M that run's. Under first-copy the token embeddings past the first copy are the same in both runs: half
    of the stream's first row is left out so."""
    T = runs.clean.shape[1]
    scored = target_mask(runs.periods, T).any(0).nonzero()  # logits positions i = t - 1 that M reads
    last = int(scored.max()) if len(scored) else -1
    differs = (piece != into).flatten(2).any(-1).any(0) if piece.dim() > 2 else (piece != into).any(0)
    return torch.nonzero(differs & (torch.arange(T) <= last)).flatten()


def _position_metrics(model: TinyCharLM, runs: PatchRuns, make, where: torch.Tensor, start: int,
                      unpatched: float) -> torch.Tensor:
    """M of one-position patches at every position: [T], computed (_lazy_metrics, make(ps) -> streams [len(ps),
    B, T, D] patched at positions ps) only at `where` (_sweep_positions); `unpatched`, the M of the run patched
    into, elsewhere."""
    out = torch.full((runs.clean.shape[1],), float(unpatched))
    if len(where):
        out[where] = _lazy_metrics(model, runs, lambda lo, hi: make(where[lo:hi]), len(where), start).float()
    return out


@torch.no_grad()
def resid_patch_effects(model: TinyCharLM, runs: PatchRuns, noising: bool = False) -> np.ndarray:
    """Patching (2): the clean stream entering block l at one position p into the corrupted run
    (noising=True: the corrupted stream at p into the clean run; near 1 = nothing lost there).

    Returns patch effects [n_layers, T] (row l = the stream before block l+1, column = position p)."""
    B, T = runs.clean.shape
    out = np.zeros((model.cfg.n_layers, T))
    eye = torch.eye(T, dtype=torch.bool)
    for layer in range(model.cfg.n_layers):
        clean, corr = runs.clean_cache["resid"][layer], runs.corrupted_cache["resid"][layer]
        if noising:
            clean, corr = corr, clean  # the piece patched in, the run it goes into

        def make(ps, clean=clean, corr=corr):  # bound now: called within this iteration
            sel = eye[ps, None, :, None]  # [G, 1, T, 1]: patch position p in ps
            return torch.where(sel, clean[None], corr[None])

        m = _position_metrics(model, runs, make, _sweep_positions(runs, clean, corr), layer,
                              runs.m_clean if noising else runs.m_corrupted)
        out[layer] = runs.effect(m.numpy())
    return out


@torch.no_grad()
def _last_block_position_metrics(model: TinyCharLM, runs: PatchRuns, base: torch.Tensor,
                                 patched: torch.Tensor) -> torch.Tensor:
    """M of each run whose final stream is `patched` [B, T, D] at one position p and `base` elsewhere, for every
    p: [T]. No block is above such a patch, so only position p's logits change: M(p) is M(base) plus the change
    of the scored log-probabilities at p over the number of scored targets. Both streams go through the
    unembedding once, instead of one run per position."""
    logits, _ = model.run_with_hooks(resid=torch.stack([base, patched]), start=model.cfg.n_layers)  # [2, B, T, V]
    mask = target_mask(runs.periods, runs.clean.shape[1])  # [B, T-1]: the target at t is read at position t-1
    logp = logits[:, :, :-1].log_softmax(-1).gather(-1, runs.clean[:, 1:].expand(2, -1, -1)[..., None])[..., 0]
    logp = logp.double() * mask
    change = (logp[1] - logp[0]).sum(0)  # [T-1]
    return (logp[0].sum() + torch.cat([change, change.new_zeros(1)])) / mask.sum()


@torch.no_grad()
def head_position_effects(model: TinyCharLM, runs: PatchRuns) -> np.ndarray:
    """Patching (3): each head's clean output at one position p into the corrupted run.

    Returns patch effects [n_layers, n_heads, T]."""
    B, T = runs.clean.shape
    H, L = model.cfg.n_heads, model.cfg.n_layers
    out = np.zeros((L, H, T))
    eye = torch.eye(T)
    for layer in range(L):
        delta = runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]  # [B, H, T, D]
        base = runs.corrupted_cache["resid"][layer + 1]
        for hd in range(H):
            d = delta[:, hd]
            if layer == L - 1:
                m = _last_block_position_metrics(model, runs, base, base + d)
            else:
                def make(ps, base=base, d=d):
                    return base[None] + d[None] * eye[ps, None, :, None]

                m = _position_metrics(model, runs, make, _sweep_positions(runs, base + d, base), layer + 1,
                                      runs.m_corrupted)
            out[layer, hd] = runs.effect(m.numpy())
    return out


@torch.no_grad()
def resid_all_positions_effect(model: TinyCharLM, runs: PatchRuns, layer: int) -> float:
    """The whole clean stream entering block `layer` (every position) into the corrupted run: effect."""
    logits, _ = model.run_with_hooks(resid=runs.clean_cache["resid"][layer], start=layer)
    return float(runs.effect(float(metric(logits, runs.clean, runs.periods))))


@torch.no_grad()
def resid_positions_effect(model: TinyCharLM, runs: PatchRuns, layer: int, positions: list[int]) -> float:
    """The clean stream entering block `layer` at several positions together (corrupted elsewhere): effect."""
    where = torch.zeros(runs.clean.shape[1], dtype=torch.bool)
    where[positions] = True
    h = torch.where(where[None, :, None], runs.clean_cache["resid"][layer], runs.corrupted_cache["resid"][layer])
    logits, _ = model.run_with_hooks(resid=h, start=layer)
    return float(runs.effect(float(metric(logits, runs.clean, runs.periods))))
