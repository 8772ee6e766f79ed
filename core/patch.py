"""Command line: activation patching of each head (DESIGN.md "Causal experiments").

    python -m core.patch FILE [--json] [--period L] [--n-seqs N] [--seed S]

Samples N task sequences of the checkpoint's task (every one at period L if given) and their
corruptions (first copy replaced by a fresh random pattern), both from seed S, and patches each
head's clean output (z W_O, no b_O, every position) into the corrupted run. The JSON object holds
clean and corrupted (the metric M of each run: mean log-probability of the right token over the
second-copy targets L+1 <= t < 2L) and heads: one {layer, head, patch_effect} per head, 0-based,
patch_effect = (M(patched) - M(corrupted)) / (M(clean) - M(corrupted)), null when the two runs tie.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from .checkpoints import read_checkpoint
from .cli import OneLineParser, UsageError, run_main
from .model import TinyCharLM
from .patching import check_period, head_patch_effects, task_runs
from .task import TaskConfig

DEFAULT_N_SEQS = 256
DEFAULT_SEED = 0
MAX_N_SEQS = 4096


def _num(x: float):
    return None if math.isnan(x) else round(float(x), 6)


def build_patch_report(model: TinyCharLM, task: TaskConfig, period: int | None = None,
                       n_seqs: int = DEFAULT_N_SEQS, seed: int = DEFAULT_SEED) -> dict:
    """Every number `python -m core.patch --json` prints, as a dict."""
    runs = task_runs(model, task, n_seqs, seed, period)
    df = head_patch_effects(model, runs)
    heads = [{"layer": int(r.layer), "head": int(r.head), "patch_effect": _num(r.patch_effect)}
             for r in df.itertuples()]
    return {"clean": _num(runs.m_clean), "corrupted": _num(runs.m_corrupted), "heads": heads}


def format_text(report: dict) -> str:
    """A short human-readable rendering (heads as block.head, counted from 1)."""
    lines = [f"M(clean)     = {report['clean']}", f"M(corrupted) = {report['corrupted']}", "block.head  patch_effect"]
    for h in report["heads"]:
        v = "-" if h["patch_effect"] is None else f"{h['patch_effect']:.3f}"
        lines.append(f"{h['layer'] + 1}.{h['head'] + 1:<9} {v:>12}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = OneLineParser(prog="python -m core.patch", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--period", type=int, help="sample every sequence at this one period")
    p.add_argument("--n-seqs", type=int, default=DEFAULT_N_SEQS)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = p.parse_args(argv)
    if not 1 <= args.n_seqs <= MAX_N_SEQS:
        raise UsageError(f"--n-seqs must be between 1 and {MAX_N_SEQS}, got {args.n_seqs}")
    if not 0 <= args.seed < 2**63:
        raise UsageError(f"--seed must be between 0 and 2**63 - 1, got {args.seed}")
    model, info = read_checkpoint(args.file)
    task = info["task"]
    if args.period is not None:
        try:
            check_period(args.period, task.seq_len)
        except ValueError as e:
            raise UsageError(f"--period: {e}") from None
    report = build_patch_report(model, task, args.period, args.n_seqs, args.seed)
    print(json.dumps(report) if args.json else format_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(run_main("python -m core.patch", main))
