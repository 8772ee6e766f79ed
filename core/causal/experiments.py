"""The causal experiments on one pair of runs (clean, corrupted) that the Causal page shows, as numpy arrays
and pandas frames (0-based layer and head, labels from core.model.symbols), collected in core.causal.results'
Experiments. Runs on sampled task sequences at one period, or on one typed sequence corrupted several times.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import torch

from core.causal import atp, circuit, composition, logit_lens, metrics, noising, patching, path_patching
from core.causal.corruptions import corrupted_tokens
from core.causal.patching import effect_interval
from core.causal.results import POSITION_BUDGET, Experiments
from core.model.symbols import head_label, token_labels, with_labels
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM


def text_period(tokens: torch.Tensor) -> int | None:
    """The smallest L with tokens[t] == tokens[t - L] for every t >= L and a complete second copy
    (2L <= T), or None when the sequence does not repeat that way."""
    T = len(tokens)
    for L in range(1, T // 2 + 1):
        if torch.equal(tokens[L:], tokens[:-L]):
            return L
    return None


def typed_runs(model: TinyCharLM, tokens: torch.Tensor, n_corruptions: int, seed: int = 0,
               corruption: str = "first-copy") -> patching.PatchRuns:
    """One typed sequence tokens [T] as the clean run (repeated), n_corruptions corrupted runs (fresh first
    copies, or with corruption="resample" other sequences of the same period).
    ValueError with a message a student can act on when the text has no repeat to corrupt."""
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    L = text_period(tokens)
    if L is None:
        raise ValueError("This text does not repeat: type a pattern followed by at least one full copy of it "
                         "(for example `abcdefabcdef`), so there is a second copy whose tokens the first one "
                         "predicts.")
    patching.check_period(L, len(tokens))
    clean = tokens[None].repeat(n_corruptions, 1)
    periods = torch.full((n_corruptions,), L, dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    corrupted = corrupted_tokens(clean, periods, model.cfg.vocab_size, corruption, g)
    return patching.prepare(model, clean, corrupted, periods, corruption)


def _path_frame(model: TinyCharLM, runs: patching.PatchRuns) -> pd.DataFrame:
    """Path patching from the block-1 heads into the block-2 heads (each, and all at once): the pair of
    blocks an induction circuit needs. Deeper models get the same pair, not every pair of blocks (on
    a 4-block model that was 90 patched runs per direction and path instead of 30)."""
    H = model.cfg.n_heads
    receivers = [(1, h) for h in [*range(H), None]] if model.cfg.n_layers >= 2 else []
    df = path_patching.path_patch_table(model, runs, receivers=receivers, senders=[(0, h) for h in range(H)])
    df["sender"] = [head_label(l, h) for l, h in zip(df["sender_layer"], df["sender_head"])]
    df["receiver"] = [head_label(l, h) for l, h in zip(df["receiver_layer"], df["receiver_head"])]  # "2.all": h < 0
    df["testable"] = pd.Series(dtype=bool)
    if len(df):
        changes = path_patching.sender_changes(runs, [(0, h) for h in range(H)]).set_index("sender_head")
        df["testable"] = [bool(changes.loc[h, f"testable_{p}"]) for h, p in zip(df["sender_head"], df["path"])]
    return df


def sender_frame(model: TinyCharLM, runs: patching.PatchRuns) -> pd.DataFrame:
    """path_patching.sender_changes of the block-1 heads, with a sender label."""
    df = path_patching.sender_changes(runs, [(0, h) for h in range(model.cfg.n_heads)])
    df.insert(0, "sender", [head_label(0, h) for h in df["sender_head"]])
    return df


def block1_offsets(runs: patching.PatchRuns) -> pd.DataFrame:
    """How far back each block-1 head looks on the clean run: its mean attention at offsets 0..3
    (query i on key i - d, over every query i >= 3 of every sequence). Rows: sender, offset,
    mass; the offset with the most mass is `top` (True on that row)."""
    P = runs.clean_cache["pattern"][0]  # [B, H, T, T]
    T = P.shape[-1]
    i = torch.arange(3, T)
    rows = []
    for h in range(P.shape[1]):
        masses = [float(P[:, h, i, i - d].mean()) for d in range(4)]
        top = max(range(len(masses)), key=masses.__getitem__)
        rows += [{"sender": head_label(0, h), "sender_head": h, "offset": d, "mass": m, "top": d == top}
                 for d, m in enumerate(masses)]
    return pd.DataFrame(rows)


def position_sweep_cost(model: TinyCharLM, runs: patching.PatchRuns) -> int:
    """Relative cost of the two one-position-at-a-time sweeps: blocks x (heads + 1) patched runs per
    position, each a forward pass over the cut sequences, so it grows with T^2."""
    T = runs.clean.shape[1]
    return model.cfg.n_layers * (model.cfg.n_heads + 1) * T * T


def experiments(model: TinyCharLM, runs: patching.PatchRuns, positions: bool = True,
                research: bool = True) -> Experiments:
    """Every experiment of the page on one pair of runs (Experiments). positions=False leaves out the
    position sweeps (position_sweeps: resid, resid_noise, head_positions, embedding_window and attribution are
    then None): on a large model they cost minutes (position_sweep_cost), and on the 2-block model they are most
    of the rest, so the page draws what comes before them first. research=False leaves out what only the page's
    researcher view shows and costs most of the rest (resid_noise, attribution and circuit are then None: on
    the 2-block model about three quarters of the CPU, the circuit alone more than half)."""
    cfg = model.cfg
    periods = runs.periods.unique()
    heads = with_labels(patching.head_patch_effects(model, runs))
    every = [(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
    full = runs.clean_full if runs.clean_full is not None else runs.clean
    paths = _path_frame(model, runs)
    seq = full[0]
    lens = logit_lens.lens_sequence(model, seq)
    labels = token_labels(seq)
    lens["token"] = [labels[i] for i in lens["position"]]
    lens["target_token"] = [labels[i] for i in lens["target"]]
    out = Experiments(
        m_clean=runs.m_clean, m_corrupted=runs.m_corrupted, n_seqs=int(runs.clean.shape[0]),
        period=int(periods[0]) if len(periods) == 1 else None,
        clean=labels[:runs.clean.shape[1]], corrupted=token_labels(runs.corrupted[0]),
        heads=heads,
        all_heads=float(runs.effect(patching.patch_heads(model, runs, every))) if every else float("nan"),
        resid_last=(patching.resid_all_positions_effect(model, runs, cfg.n_layers - 1)
                    if cfg.n_layers else float("nan")),
        resid=None, resid_noise=None, head_positions=None,
        position_cost=position_sweep_cost(model, runs),
        embedding_window=None,
        noise=_noise_frame(model, runs),
        attribution=None,
        head_rows=[head_label(l, h) for l, h in every],
        paths=paths,
        corruption=runs.corruption,
        senders=sender_frame(model, runs) if cfg.n_layers >= 2 else None,
        offsets=block1_offsets(runs) if cfg.n_layers >= 2 else None,
        lens=lens,
        lens_by_copy=logit_lens.lens_by_copy(model, full, runs.periods),
        by_metric=metrics.head_effects_by_metric(model, runs) if cfg.n_layers else None,
        circuit=circuit.page_circuit(model, runs) if research and cfg.n_layers == 2 else None,
        composition=composition.composition_vs_paths(model, paths) if cfg.n_layers >= 2 and len(paths) else None,
    )
    return replace(out, **position_sweeps(model, runs, research)) if positions else out


SWEEP_FIELDS = ("resid", "resid_noise", "head_positions", "embedding_window", "attribution")


def position_sweeps(model: TinyCharLM, runs: patching.PatchRuns, research: bool = True) -> dict:
    """The one-position-at-a-time part of experiments(), {field of Experiments: value} for SWEEP_FIELDS: the
    stream restored at each position before each block (resid; resid_noise, noising, only with research), each
    head's output at each position (head_positions), the embedding window and attribution patching against the
    exact head sweep (only with research). Without blocks every value is None but resid and resid_noise ([0, T])."""
    cfg = model.cfg
    out_positions = patching.head_position_effects(model, runs) if cfg.n_layers else None
    return {
        "resid": patching.resid_patch_effects(model, runs),
        "resid_noise": patching.resid_patch_effects(model, runs, noising=True) if research else None,
        "head_positions": (out_positions.reshape(cfg.n_layers * cfg.n_heads, runs.clean.shape[1])
                           if out_positions is not None else None),
        "embedding_window": embedding_window(model, runs) if cfg.n_layers else None,
        "attribution": (atp.attribution_agreement(model, runs, out_positions) if research and cfg.n_layers
                        else None),
    }


def _noise_frame(model: TinyCharLM, runs: patching.PatchRuns) -> pd.DataFrame:
    """noising.head_noise_effects with the head's label first, and direct_testable: the head's direct path
    reads its output at the scored positions (the second copy's queries), so its direct effect can show
    something only where that output differs between the runs there (path_patching.sender_changes's
    testable_q). Under first-copy a block-1 head that reads the last few tokens hardly changes there, so a
    direct effect of 1 is forced by the corruption, not measured."""
    df = with_labels(noising.head_noise_effects(model, runs))
    every = [(l, h) for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
    changes = path_patching.sender_changes(runs, every)
    df["direct_testable"] = changes["testable_q"].astype(bool).to_numpy() if len(df) else pd.Series(dtype=bool)
    return df


def embedding_window(model: TinyCharLM, runs: patching.PatchRuns) -> dict | None:
    """The clean stream before block 1 (the token embeddings) restored at 3 neighbouring first-copy
    positions together, starting at L // 3: {positions, effect, one_target} (one_target = 1 / (L - 1), the
    share of M's targets one sequence position can hold). None when the sequences' periods differ."""
    periods = runs.periods.unique()
    if len(periods) != 1:
        return None
    L = int(periods[0])
    start = L // 3
    where = [p for p in range(start, start + 3) if p < L]
    return {"positions": where, "effect": patching.resid_positions_effect(model, runs, 0, where),
            "one_target": 1 / (L - 1)}


def _positions(model: TinyCharLM, runs: patching.PatchRuns, positions: bool | None, budget: int) -> bool:
    """None: run the position sweeps only when they cost at most `budget` (position_sweep_cost)."""
    return position_sweep_cost(model, runs) <= budget if positions is None else positions


def task_experiments(model: TinyCharLM, task: TaskConfig, period: int, n_seqs: int, seed: int = 0,
                     positions: bool | None = None, budget: int = POSITION_BUDGET,
                     corruption: str = "first-copy", research: bool = True) -> Experiments:
    """experiments() on n_seqs sampled sequences at one period and their corrupted runs (positions:
    True/False runs the position sweeps or not; None runs them when they cost at most `budget`;
    corruption: core.causal.corruptions.CORRUPTIONS; research: as in experiments())."""
    runs = patching.task_runs(model, task, n_seqs, seed, period, corruption)
    return experiments(model, runs, _positions(model, runs, positions, budget), research)


def text_experiments(model: TinyCharLM, tokens: torch.Tensor, n_corruptions: int, seed: int = 0,
                     positions: bool | None = None, budget: int = POSITION_BUDGET,
                     corruption: str = "first-copy", research: bool = True) -> Experiments:
    """experiments() on one typed sequence, corrupted n_corruptions times (positions, budget, corruption and
    research as in task_experiments)."""
    runs = typed_runs(model, tokens, n_corruptions, seed, corruption)
    return replace(experiments(model, runs, _positions(model, runs, positions, budget), research), typed=True)


def task_sweeps(model: TinyCharLM, task: TaskConfig, period: int, n_seqs: int, seed: int = 0,
                positions: bool | None = None, budget: int = POSITION_BUDGET, corruption: str = "first-copy",
                research: bool = True) -> dict:
    """position_sweeps() on the runs of task_experiments() with the same arguments, every value None where it
    would not run them (positions, budget): task_experiments(..., positions=p) is
    replace(task_experiments(..., positions=False), **task_sweeps(..., positions=p))."""
    runs = patching.task_runs(model, task, n_seqs, seed, period, corruption)
    return _sweeps_or_none(model, runs, positions, budget, research)


def text_sweeps(model: TinyCharLM, tokens: torch.Tensor, n_corruptions: int, seed: int = 0,
                positions: bool | None = None, budget: int = POSITION_BUDGET, corruption: str = "first-copy",
                research: bool = True) -> dict:
    """task_sweeps() for text_experiments()."""
    runs = typed_runs(model, tokens, n_corruptions, seed, corruption)
    return _sweeps_or_none(model, runs, positions, budget, research)


def _sweeps_or_none(model: TinyCharLM, runs: patching.PatchRuns, positions: bool | None, budget: int,
                    research: bool) -> dict:
    if _positions(model, runs, positions, budget):
        return position_sweeps(model, runs, research)
    return dict.fromkeys(SWEEP_FIELDS)


def mechanism_over_training(model: TinyCharLM, info: dict, period: int, n_seqs: int, seed: int = 0,
                            corruption: str = "first-copy") -> pd.DataFrame:
    """Path patching at every snapshot of a checkpoint (core.model.snapshots) and at its final weights:
    noising each block-1 head's key and value paths into all of block 2, on the same sequences at every step, so the
    timeline shows which part of the circuit forms first. Rows: step, gap (M(clean) - M(corrupted)),
    sender, path, patch_effect, effect_low, effect_high. Empty for fewer than two blocks or no snapshots."""
    from core.model.snapshots import snapshot_model

    cols = ["step", "gap", "sender", "path", "patch_effect", "effect_low", "effect_high"]
    snaps = info.get("snapshots") or []
    if model.cfg.n_layers < 2 or not snaps:
        return pd.DataFrame(columns=cols)
    final = (info.get("train") or {}).get("steps_done")
    models = [(s["step"], snapshot_model(model, s["state_dict"])) for s in snaps]
    if isinstance(final, int) and final > snaps[-1]["step"]:
        models.append((final, model))
    senders = [(0, h) for h in range(model.cfg.n_heads)]
    rows = []
    for step, m in models:
        runs = patching.task_runs(m, info["task"], n_seqs, seed, period, corruption)
        gap = runs.m_clean - runs.m_corrupted
        for path in ("k", "v"):
            mp, by_seq = path_patching.path_patch(m, runs, senders, (1, None), path, "noising", by_seq=True)
            eff = runs.effect(mp.numpy())
            lo, hi = effect_interval(runs, by_seq.double().numpy())
            rows += [{"step": step, "gap": gap, "sender": head_label(l, h), "path": path, "patch_effect": float(e),
                      "effect_low": float(a), "effect_high": float(b)}
                     for (l, h), e, a, b in zip(senders, eff, lo, hi)]
    return pd.DataFrame(rows, columns=cols)


@torch.no_grad()
def markov_patch_view(model: TinyCharLM, task, n_seqs: int = 16, seed: int = 0) -> dict:
    """Head patching on the Markov-chain task (core.model.markov): clean runs are n_seqs sequences of fresh
    chains (seeded), corrupted runs the "another-chain" donors (core.causal.corruptions.another_chain), the
    metrics metrics.MARKOV_METRICS against the clean sequences' bigram strategy. Returns {"heads":
    metrics.effect_frame rows, "clean", "corrupted": {metric: value}, "clean_tokens", "corrupted_tokens":
    the first pair [T], "n_seqs"}. ValueError when the model cannot run this task's sequences."""
    from core.causal.corruptions import another_chain
    from core.model.markov import strategy_probs
    from core.reading.markov import check_model, sample

    check_model(model, task)
    clean, _ = sample(task, n_seqs, seed)
    corrupted = another_chain(clean, task, torch.Generator().manual_seed(int(seed) + 1))
    bigram = strategy_probs(clean, task)["bigram"]

    def measure(logits):
        return metrics.markov_metric_values(logits, clean, bigram, task.n_states)

    c_logits, c_cache = model.run_with_cache(clean)
    k_logits, k_cache = model.run_with_cache(corrupted)
    base = {k: float(v) for k, v in measure(c_logits).items()}
    corr = {k: float(v) for k, v in measure(k_logits).items()}
    heads = metrics.effect_frame(model, c_cache, k_cache, base, corr, measure, metrics.MARKOV_METRICS)
    return {"heads": heads, "clean": base, "corrupted": corr, "clean_tokens": clean[0].numpy(),
            "corrupted_tokens": corrupted[0].numpy(), "n_seqs": n_seqs}
