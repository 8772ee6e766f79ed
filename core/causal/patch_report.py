"""Command line: activation patching of each head (DESIGN.md "Causal experiments").

    python -m core.patch FILE [--json] [--period L] [--n-seqs N] [--seed S] [--corruption first-copy|resample]

Samples N task sequences of the checkpoint's task (every one at period L if given) and their
corrupted runs, both from seed S: first-copy (the default) replaces each first copy by a fresh random
pattern, resample runs another sequence of the same period (Heimersheim & Nanda, 2024). Patches each
head's clean output (z W_O, no b_O, every position) into the corrupted run. The JSON object holds
corruption, clean and corrupted (the metric M of each run: mean log-probability of the right token
over the second-copy targets L+1 <= t < 2L) and heads: one {layer, head, patch_effect, effect_low,
effect_high} per head, 0-based, patch_effect = (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)),
null when the two runs tie; effect_low and effect_high bound its 95% bootstrap interval over the sequences.
"""
from __future__ import annotations

import json
import math

from core.causal.corruptions import CORRUPTIONS
from core.causal.patching import check_period, head_patch_effects, task_runs
from core.model.cli import measure_parser, read_measure_args
from core.model.symbols import head_label
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM

DEFAULT_N_SEQS = 256
DEFAULT_SEED = 0


def _num(x: float):
    return None if math.isnan(x) else round(float(x), 6)


def build_patch_report(model: TinyCharLM, task: TaskConfig, period: int | None = None,
                       n_seqs: int = DEFAULT_N_SEQS, seed: int = DEFAULT_SEED, corruption: str = "first-copy") -> dict:
    """Every number `python -m core.patch --json` prints, as a dict."""
    runs = task_runs(model, task, n_seqs, seed, period, corruption)
    df = head_patch_effects(model, runs)
    heads = [{"layer": int(r.layer), "head": int(r.head), "patch_effect": _num(r.patch_effect),
              "effect_low": _num(r.effect_low), "effect_high": _num(r.effect_high)}
             for r in df.itertuples()]
    return {"corruption": corruption, "clean": _num(runs.m_clean), "corrupted": _num(runs.m_corrupted),
            "heads": heads}


def format_text(report: dict) -> str:
    """A short human-readable rendering (heads as block.head, counted from 1)."""
    lines = [f"corruption   = {report['corruption']}", f"M(clean)     = {report['clean']}",
             f"M(corrupted) = {report['corrupted']}", "block.head  patch_effect"]
    for h in report["heads"]:
        v = "-" if h["patch_effect"] is None else f"{h['patch_effect']:.3f}"
        lines.append(f"{head_label(h['layer'], h['head']):<11} {v:>12}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = measure_parser("python -m core.patch", __doc__, "sample every sequence at this one period",
                       DEFAULT_N_SEQS, DEFAULT_SEED)
    p.add_argument("--corruption", choices=CORRUPTIONS, default="first-copy",
                   help="first-copy: a fresh first copy; resample: another sequence of the same period")
    args, model, info = read_measure_args(p, argv, check_period)  # patching needs a whole second copy
    report = build_patch_report(model, info["task"], args.period, args.n_seqs, args.seed, args.corruption)
    print(json.dumps(report) if args.json else format_text(report))
    return 0
