"""Path patching: one sender head's effect on one receiver head through its query, key or value input.

The sender's output is swapped along one path only: the receiver (in a later block) reads, for the
chosen input, the stream it saw plus (swapped sender output - the sender output of the base run), at
every position; its other two inputs, every other head and every other path stay as in the base run.
Blocks above the receiver then run normally on the receiver's changed output (Wang et al., 2022).
It is one edit on the receiver's hook_q, hook_k or hook_v (receiver_edits): the base run's receiver
block rerun with every sender of a chunk on a leading patch dim, then the blocks above.

- noising: base = clean run, the sender's output taken from the corrupted run. Is the path needed?
  A patch effect near 0 means the clean performance is gone; near 1 that nothing was lost.
- denoising: base = corrupted run, the sender's output taken from the clean run. Does the path
  suffice? Near 1 means it alone brings the clean performance back.
Both use the patch effect of core.causal.patching: (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)).

Per position (path_patch_positions): the same path resolved by where it acts.
- by="sender": the sender's swapped output only at position p (the receiver reads stream + delta at p alone;
  a receiver's q, k and v at p read only the stream at p, so this is also the receiver's input position p).
- by="receiver": the sender's swapped output at every position, but only the receiver's changed output at
  position i goes on to the blocks above (its other positions keep the base run's output).
A last-block receiver's output at i reaches only i's logits, so the by="receiver" changes of M add up to
the whole path's change exactly; the by="sender" ones add up only where the receiver is linear in them.
reference="mean" (noising only) replaces the sender's output by its mean over the corrupted runs at each
position instead of each sequence's own corrupted run: Wang et al.'s (2022) mean over a reference
distribution. Under first-copy that also removes what the sender writes at the second copy, which a
corrupted run (the same tokens there) leaves in place.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from core.causal.patching import (
    CHUNK_POSITIONS,
    PatchRuns,
    both_metrics,
    effect_interval,
    metric,
)
from core.model.hooks import hook_name
from core.model.tinycharlm import TinyCharLM

PATHS = ("q", "k", "v")
DIRECTIONS = ("noising", "denoising")
REFERENCES = ("corrupted", "mean")
RESOLUTIONS = ("sender", "receiver")


def receiver_edits(model: TinyCharLM, layer: int, heads, path: str, delta: torch.Tensor) -> dict:
    """The run_with_hooks edit that makes the receivers `heads` of block `layer` read, for input `path`,
    the stream plus delta [G, B, T, D] (on a run over [G, B, T, D]): q, k and v are linear in the
    stream, so hook_{path} (before rotary, bias in) gains delta @ W_{path}[h] for each receiver h."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, got {path!r}.")
    W = getattr(model.blocks[layer], f"W_{path.upper()}")
    heads = list(heads)
    shift = torch.einsum("gbtd,hde->gbhte", delta, W[heads])  # [G, B, len(heads), T, d_head]

    def edit(x):  # [G, B, H, T, d_head]
        x = x.clone()
        x[:, :, heads] += shift
        return x
    return {hook_name(layer, f"attn.hook_{path}"): edit}


def _senders(model: TinyCharLM, receiver_layer: int) -> list[tuple[int, int]]:
    return [(l, h) for l in range(receiver_layer) for h in range(model.cfg.n_heads)]


def _check(senders, rl: int, direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'noising' or 'denoising', got {direction!r}.")
    if any(l >= rl for l, _ in senders):
        raise ValueError("a sender head must sit in an earlier block than its receiver.")


def _path_patches(model: TinyCharLM, runs: PatchRuns, senders: list[tuple[int, int]], rl: int,
                  receivers: list[int | None], path: str, direction: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(M [S], metric_by_seq [S, B]) of each sender's path patch into each receiver of block rl (a head,
    or None for every head at once).

    One edited run of block rl per chunk of senders patches the path into every head at once: a head's
    output depends on its own q, k and v only, so head r's hook_result there is its output when r alone
    is the receiver. A head receiver's stream above is the base stream plus that head's change."""
    base, donor = ((runs.clean_cache, runs.corrupted_cache) if direction == "noising"
                   else (runs.corrupted_cache, runs.clean_cache))
    H = model.cfg.n_heads
    B, T = runs.clean.shape
    per = max(1, CHUNK_POSITIONS // (B * T))
    result = hook_name(rl, "attn.hook_result")
    out = [[] for _ in receivers]
    for lo in range(0, len(senders), per):
        chunk = senders[lo:lo + per]
        delta = torch.stack([donor["head_out"][l][:, s] - base["head_out"][l][:, s] for l, s in chunk])
        every, cache = model.run_with_hooks(resid=base["resid"][rl].expand(len(chunk), -1, -1, -1), start=rl,
                                            stop=rl + 1, edits=receiver_edits(model, rl, range(H), path, delta),
                                            cache=[result])  # every: the stream above with all heads receiving
        for i, rh in enumerate(receivers):
            stream = every if rh is None else \
                base["resid"][rl + 1][None] + (cache[result][:, :, rh] - base["head_out"][rl][None, :, rh])
            logits, _ = model.run_with_hooks(resid=stream, start=rl + 1)
            out[i].append(both_metrics(logits, runs.clean, runs.periods))
    return [(torch.cat([m for m, _ in o]), torch.cat([s for _, s in o])) for o in out]


@torch.no_grad()
def path_patch(model: TinyCharLM, runs: PatchRuns, senders: list[tuple[int, int]],
               receiver: tuple[int, int | None], path: str, direction: str, by_seq: bool = False) -> torch.Tensor:
    """M of each sender -> receiver path patch, [len(senders)] (by_seq: (M, metric_by_seq [len(senders), B])).
    Every sender must sit below the receiver.

    receiver (layer, None) patches the path into every head of that block at once (the heads of one
    block may share a job: then each single path looks unneeded while all of them together are)."""
    rl, rh = receiver
    _check(senders, rl, direction)
    m, seq = _path_patches(model, runs, senders, rl, [rh], path, direction)[0]
    return (m, seq) if by_seq else m


@torch.no_grad()
def path_patch_table(model: TinyCharLM, runs: PatchRuns, receivers: list[tuple[int, int]] | None = None,
                     senders: list[tuple[int, int]] | None = None) -> pd.DataFrame:
    """Every sender -> receiver pair (sender in an earlier block), path and direction.

    Rows: direction, path, sender_layer, sender_head, receiver_layer, receiver_head (0-based; -1 = every
    head of the receiver's block at once), m_patched, patch_effect, effect_low, effect_high (95% bootstrap
    interval over the sequences, core.causal.patching.effect_interval). Defaults: every head, and every block as a
    whole, as receiver; every earlier head as sender. The receivers of one block share their edited runs."""
    if receivers is None:
        receivers = [(l, h) for l in range(1, model.cfg.n_layers) for h in [*range(model.cfg.n_heads), None]]
    in_block: dict[int, list[int | None]] = {}
    for rl, rh in receivers:
        in_block.setdefault(rl, []).append(rh)
    done = {}
    for rl, rhs in in_block.items():
        from_ = [s for s in (senders or _senders(model, rl)) if s[0] < rl]
        for direction in DIRECTIONS if from_ else ():
            for path in PATHS:
                for rh, res in zip(rhs, _path_patches(model, runs, from_, rl, rhs, path, direction)):
                    done[rl, rh, direction, path] = (from_, res)
    rows, seqs = [], []
    for rl, rh in receivers:
        for direction in DIRECTIONS:
            for path in PATHS:
                if (rl, rh, direction, path) not in done:
                    continue
                from_, (m, by_seq) = done[rl, rh, direction, path]
                seqs.append(by_seq.double().numpy())
                rows += [{"direction": direction, "path": path, "sender_layer": sl, "sender_head": sh,
                          "receiver_layer": rl, "receiver_head": -1 if rh is None else rh, "m_patched": float(v)}
                         for (sl, sh), v in zip(from_, m)]
    cols = ["direction", "path", "sender_layer", "sender_head", "receiver_layer", "receiver_head", "m_patched"]
    df = pd.DataFrame(rows, columns=cols)
    if len(df):
        df["patch_effect"] = runs.effect(df["m_patched"].to_numpy())
        df["effect_low"], df["effect_high"] = effect_interval(runs, np.concatenate(seqs))
    else:
        df["patch_effect"] = df["effect_low"] = df["effect_high"] = pd.Series(dtype=float)
    return df


def path_effect(model: TinyCharLM, runs: PatchRuns, sender: tuple[int, int], receiver: tuple[int, int | None],
                path: str, direction: str) -> float:
    """One path's patch effect (NaN when M(clean) == M(corrupted))."""
    m = float(path_patch(model, runs, [sender], receiver, path, direction)[0])
    gap = runs.m_clean - runs.m_corrupted
    return (m - runs.m_corrupted) / gap if gap else math.nan


CHANGED = 0.1  # a sender's output "changes" at a position when it moves by more than this share of its clean size
TESTABLE = 0.5  # a path can be tested when its sender changes at at least this share of the positions it is read at


@torch.no_grad()
def sender_changes(runs: PatchRuns, senders: list[tuple[int, int]]) -> pd.DataFrame:
    """Where each sender's output differs between the two runs. A path can only show something where
    the sender writes differently in the clean and corrupted runs: the second-copy query positions
    L <= i <= 2L-2 (whose logits M scores) for the query path, the first-copy positions 0..L-1 (where
    an induction head finds the token to copy) for the key and value paths.

    Rows: sender_layer, sender_head, at_queries, at_keys (the share of those positions, over every
    sequence, where |donor - base| > CHANGED |clean output|), and testable_q, testable_k, testable_v
    (share >= TESTABLE). Under the first-copy corruption a block-1 head that reads only the last few
    tokens changes at no more than its first few query positions: its query-path rows cannot test anything."""
    B, T = runs.clean.shape
    i = torch.arange(T)[None, :]
    L = runs.periods[:, None]
    where = {"at_queries": (i >= L) & (i <= 2 * L - 2), "at_keys": i < L}
    rows = []
    for layer, head in senders:
        clean = runs.clean_cache["head_out"][layer][:, head]
        moved = (runs.corrupted_cache["head_out"][layer][:, head] - clean).norm(dim=-1)
        changed = moved > CHANGED * clean.norm(dim=-1).clamp_min(1e-12)
        row = {"sender_layer": layer, "sender_head": head}
        row.update({name: float(changed[m].float().mean()) for name, m in where.items()})
        row.update(testable_q=row["at_queries"] >= TESTABLE, testable_k=row["at_keys"] >= TESTABLE,
                   testable_v=row["at_keys"] >= TESTABLE)
        rows.append(row)
    return pd.DataFrame(rows, columns=["sender_layer", "sender_head", "at_queries", "at_keys",
                                       "testable_q", "testable_k", "testable_v"])


def _check_positions(model: TinyCharLM, senders, receiver, path: str, direction: str, reference: str,
                     by: str) -> None:
    """ValueError with a sentence for every argument path_patch_positions cannot use."""
    rl, rh = receiver
    if not 1 <= rl < model.cfg.n_layers:
        raise ValueError(f"The receiver must sit in block 2 or above of this {model.cfg.n_layers}-block model "
                         f"(0-based layer 1..{model.cfg.n_layers - 1}), got layer {rl}.")
    if rh is not None and not 0 <= rh < model.cfg.n_heads:
        raise ValueError(f"Receiver head {rh} does not exist: this model has {model.cfg.n_heads} heads per block.")
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, got {path!r}.")
    _check(senders, rl, direction)
    if any(not 0 <= h < model.cfg.n_heads for _, h in senders):
        raise ValueError(f"A sender head does not exist: this model has {model.cfg.n_heads} heads per block.")
    if reference not in REFERENCES:
        raise ValueError(f"reference must be 'corrupted' or 'mean', got {reference!r}.")
    if reference == "mean" and direction != "noising":
        raise ValueError("A mean reference replaces the sender's output in the clean run (noising); denoising "
                         "starts from the corrupted run itself and has no reference to average: use "
                         "reference='corrupted'.")
    if by not in RESOLUTIONS:
        raise ValueError(f"by must be 'sender' (the sender's output at one position) or 'receiver' (the receiver's "
                         f"changed output at one position), got {by!r}.")


def reference_output(runs: PatchRuns, layer: int, direction: str, reference: str = "corrupted"):
    """(base, donor) head outputs of block `layer`, each [B, H, T, D]: the run a path patch goes into and the
    outputs swapped in. reference="mean": the donor is the corrupted runs' mean at each position."""
    if direction == "noising":
        base, donor = runs.clean_cache["head_out"][layer], runs.corrupted_cache["head_out"][layer]
        if reference == "mean":
            donor = donor.mean(0, keepdim=True).expand_as(donor)
        return base, donor
    return runs.corrupted_cache["head_out"][layer], runs.clean_cache["head_out"][layer]


@torch.no_grad()
def path_patch_positions(model: TinyCharLM, runs: PatchRuns, senders: list[tuple[int, int]],
                         receiver: tuple[int, int | None], path: str, direction: str = "noising",
                         reference: str = "corrupted", by: str = "sender") -> torch.Tensor:
    """M of each sender -> receiver path patch resolved by position: [len(senders), T] (T = runs.clean's length).
    Cell (s, p): by="sender", sender s's swapped output only at position p; by="receiver", at every position,
    with only the receiver's changed output at position p kept (module docstring). receiver (layer, None) is
    every head of that block at once. reference: "corrupted" or, noising only, "mean". G patches go through
    run_with_hooks in one call (chunks of CHUNK_POSITIONS sequence positions). ValueError for bad arguments."""
    _check_positions(model, senders, receiver, path, direction, reference, by)
    rl, rh = receiver
    H = model.cfg.n_heads
    B, T = runs.clean.shape
    base_run = runs.clean_cache if direction == "noising" else runs.corrupted_cache
    outs = {l: reference_output(runs, l, direction, reference) for l in {l for l, _ in senders}}
    deltas = torch.stack([outs[l][1][:, h] - outs[l][0][:, h] for l, h in senders])  # [S, B, T, D]
    resid_in, resid_out = base_run["resid"][rl], base_run["resid"][rl + 1]
    base_out = base_run["head_out"][rl]  # [B, H, T, D]
    result = hook_name(rl, "attn.hook_result")
    heads = range(H) if rh is None else [rh]
    eye = torch.eye(T)
    per = max(1, CHUNK_POSITIONS // (B * T))

    def changed(delta):  # delta [G, B, T, D] into the receivers' input -> their summed output change [G, B, T, D]
        _, cache = model.run_with_hooks(resid=resid_in.expand(len(delta), -1, -1, -1), start=rl, stop=rl + 1,
                                        edits=receiver_edits(model, rl, heads, path, delta), cache=[result])
        return (cache[result][:, :, list(heads)] - base_out[None, :, list(heads)]).sum(2)

    cells = [(s, p) for s in range(len(senders)) for p in range(T)]
    if by == "receiver":
        change = torch.cat([changed(deltas[lo:lo + per]) for lo in range(0, len(senders), per)])  # [S, B, T, D]
    out = []
    for lo in range(0, len(cells), per):
        chunk = cells[lo:lo + per]
        s_idx, p_idx = torch.tensor([s for s, _ in chunk]), torch.tensor([p for _, p in chunk])
        at = eye[p_idx][:, None, :, None]  # [G, 1, T, 1]: one position per patch
        shift = changed(deltas[s_idx] * at) if by == "sender" else change[s_idx] * at
        logits, _ = model.run_with_hooks(resid=resid_out[None] + shift, start=rl + 1)
        out.append(metric(logits, runs.clean, runs.periods))
    return torch.cat(out).reshape(len(senders), T)


def path_positions_table(model: TinyCharLM, runs: PatchRuns, senders: list[tuple[int, int]],
                         receiver: tuple[int, int | None], paths=PATHS, direction: str = "noising",
                         reference: str = "corrupted", by: str = "sender") -> pd.DataFrame:
    """path_patch_positions for each path, long form. Rows: path, sender_layer, sender_head, position,
    m_patched, patch_effect, change (M(patched) - M of the run patched into, over the gap: the share of M lost
    under noising is -change, the share restored under denoising is change); empty without a gap."""
    rows = []
    m_base = runs.m_clean if direction == "noising" else runs.m_corrupted
    gap = runs.m_clean - runs.m_corrupted
    for path in paths:
        m = path_patch_positions(model, runs, senders, receiver, path, direction, reference, by).double().numpy()
        for (sl, sh), row in zip(senders, m):
            rows += [{"path": path, "sender_layer": sl, "sender_head": sh, "position": p, "m_patched": float(v)}
                     for p, v in enumerate(row)]
    df = pd.DataFrame(rows, columns=["path", "sender_layer", "sender_head", "position", "m_patched"])
    df["patch_effect"] = runs.effect(df["m_patched"].to_numpy())
    df["change"] = (df["m_patched"] - m_base) / gap if gap else np.nan
    return df
