"""Command line: measure a checkpoint.

    python -m core.report FILE [--json] [--period P] [--offsets 23,31] [--n-seqs N] [--seed S]

The JSON object holds config, task, eval (the sample: n_seqs, seed, period, ablation_mode), metrics
(the copy metrics, plus acc_second_copy_first_token: accuracy on the target t = L, which later copies
include although no variable-period model can know it), heads (one object per head with 0-based layer
and head, every head score of
core.reading.heads: prev_token, induction, induction_any, duplicate, first_token, self; ov_diag_top1 and
ov_copying_eig (centred) of the head's OV copying matrix read from W_E, and ov_diag_top1_effective,
ov_copying_eig_effective read from the effective embedding -- what the head receives, each earlier
head weighted by its measured self-attention (core.reading.copying); ablation_loss_later_delta) and, with
--offsets, offset_mass rows {layer, head, offset, mass}. The text output counts blocks and heads
from 1, as the app does; the JSON keeps 0-based layer and head.

ablation_loss_later_delta is the change in loss_later_copies (nats, ablated - clean) when that head
alone is *zero*-ablated (its output replaced by 0) on the same evaluation sample.
"""
from __future__ import annotations

import argparse
import json
import math

import torch

from core.model.cli import measure_parser, read_measure_args
from core.model.metrics import copy_metrics, second_copy_first_token_accuracy
from core.model.symbols import head_label
from core.model.task import TaskConfig, sample_batch
from core.model.tinycharlm import TinyCharLM
from core.reading.ablation import single_head_ablation
from core.reading.copying import block_ov, effective_embedding, ov_copying_eig, ov_copying_matrix, ov_diag_top1
from core.reading.heads import PERIOD_SCORES, head_scores, offset_mass

DEFAULT_N_SEQS = 256
DEFAULT_SEED = 0
ABLATION_MODE = "zero"


def _clean(x):
    """Floats rounded for JSON; NaN becomes None."""
    if isinstance(x, float):
        return None if math.isnan(x) else round(x, 6)
    return x


@torch.no_grad()
def build_report(model: TinyCharLM, task: TaskConfig, period: int | None = None, offsets: list[int] = (),
                 n_seqs: int = DEFAULT_N_SEQS, seed: int = DEFAULT_SEED) -> dict:
    """Every number `python -m core.report --json` prints, as a dict."""
    g = torch.Generator().manual_seed(seed)
    tokens, periods = sample_batch(task, n_seqs, model.cfg.vocab_size, generator=g, period=period)
    logits, cache = model.run_with_cache(tokens)
    metrics = copy_metrics(logits, tokens, periods)
    metrics["acc_second_copy_first_token"] = second_copy_first_token_accuracy(logits, tokens, periods)
    ablation = {(r["layer"], r["head"]): r for r in single_head_ablation(model, tokens, periods, ABLATION_MODE)}
    heads, offset_rows = [], []
    all_scores = [head_scores(pattern, periods) for pattern in cache["pattern"]]
    self_attention = [s["self"].tolist() for s in all_scores]
    for layer, pattern in enumerate(cache["pattern"]):
        scores = all_scores[layer]
        masses = {k: offset_mass(pattern, k) for k in offsets}
        X = effective_embedding(model, layer, self_attention)
        for head in range(model.cfg.n_heads):
            C = ov_copying_matrix(model, layer, head)
            Ce = X @ block_ov(model, layer, head) @ model.W_E.T  # what the head receives
            row = {"layer": layer, "head": head}
            row.update({name: float(scores[name][head]) for name in PERIOD_SCORES})
            row["ov_diag_top1"] = ov_diag_top1(C)
            row["ov_copying_eig"] = ov_copying_eig(C)
            row["ov_diag_top1_effective"] = ov_diag_top1(Ce)
            row["ov_copying_eig_effective"] = ov_copying_eig(Ce)
            row["ablation_loss_later_delta"] = ablation[(layer, head)]["loss_later_delta"]
            heads.append({k: _clean(v) for k, v in row.items()})
            for k in offsets:
                offset_rows.append({"layer": layer, "head": head, "offset": k, "mass": _clean(float(masses[k][head]))})
    report = {
        "config": model.cfg.to_dict(),
        "task": task.to_dict(),
        "eval": {"n_seqs": n_seqs, "seed": seed, "period": period, "ablation_mode": ABLATION_MODE},
        "metrics": {k: _clean(v) for k, v in metrics.items()},
        "heads": heads,
    }
    if offsets:
        report["offset_mass"] = offset_rows
    return report


def format_text(report: dict) -> str:
    """A short human-readable rendering of build_report's dict."""
    lines = [f"{k:>20}: {v}" for k, v in report["metrics"].items()]
    cols = [c for c in report["heads"][0] if c not in ("layer", "head")] if report["heads"] else []
    if cols:  # one column per score, its name split over two header lines when long
        lines.append("block.head " + " ".join(f"{c[:12]:>12}" for c in cols))
        lines.append(" " * 10 + " " + " ".join(f"{c[12:24]:>12}" for c in cols))
        for h in report["heads"]:
            vals = " ".join(f"{'-' if h[c] is None else format(h[c], '.3f'):>12}" for c in cols)
            lines.append(f"{head_label(h['layer'], h['head']):<10} {vals}")
    for r in report.get("offset_mass", []):
        lines.append(f"offset mass head {head_label(r['layer'], r['head'])} offset {r['offset']}: {r['mass']}")
    return "\n".join(lines)


def _offsets(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--offsets takes comma-separated whole numbers, got {text!r}") from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("offsets must be 0 or more")
    return values


def main(argv=None) -> int:
    p = measure_parser("python -m core.report", __doc__, "evaluate every sequence at this one period",
                       DEFAULT_N_SEQS, DEFAULT_SEED)
    p.add_argument("--offsets", type=_offsets, default=[], help="comma-separated offsets for offset_mass rows")
    args, model, info = read_measure_args(p, argv)
    report = build_report(model, info["task"], args.period, args.offsets, args.n_seqs, args.seed)
    print(json.dumps(report) if args.json else format_text(report))
    return 0
