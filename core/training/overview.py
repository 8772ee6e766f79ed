"""What the Home page shows about one model: its settings and headline measurements.

What the page reads (Overview, top_head, settings_rows) needs no torch: the measuring functions import it
when they run, so a server that reads stored overviews never does (docs/DESIGN.md, "A reading server without torch")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd

from core.model.config import ModelConfig
from core.model.symbols import with_labels
from core.model.task import TaskConfig
from core.training.config import TrainConfig

if TYPE_CHECKING:
    from core.model.tinycharlm import TinyCharLM

HEAD_COLUMNS = ["label", "layer", "head", "prev_token", "induction", "induction_any", "duplicate", "first_token",
                "ov_diag_top1", "ov_diag_top1_effective", "ov_copying_eig_effective", "ablation_loss_later_delta"]


@dataclass(frozen=True)
class Overview:
    """A model's headline numbers, measured now on `n_seqs` fresh sequences of its own task (`seed`)."""
    metrics: dict  # copy metrics (core.model.metrics: loss_first_copy, loss_later_copies, acc_later_copies, ...)
    heads: pd.DataFrame  # HEAD_COLUMNS: the label "1.4" first, then 0-based layer and head (core.model.symbols)
    n_seqs: int
    seed: int


def model_overview(model: TinyCharLM, task: TaskConfig, n_seqs: int = 64, seed: int = 0) -> Overview:
    """What the Home page shows about `model`: its copy metrics and one row of scores per head."""
    from core.reading.report import build_report

    report = build_report(model, task, n_seqs=n_seqs, seed=seed)
    heads = pd.DataFrame(report["heads"])
    heads = pd.DataFrame(columns=HEAD_COLUMNS) if heads.empty else with_labels(heads)[HEAD_COLUMNS]
    return Overview(report["metrics"], heads, n_seqs, seed)


class TopHead(NamedTuple):
    """The head with the largest score: its table row's 0-based layer and head, value and label."""
    layer: int
    head: int
    value: float
    label: str


def top_head(heads: pd.DataFrame, score: str) -> TopHead | None:
    """The head with the largest `score` (its label and value), or None without heads."""
    col = heads[score].astype(float) if len(heads) else None
    if col is None or col.isna().all():
        return None
    row = heads.loc[col.idxmax()]
    return TopHead(int(row["layer"]), int(row["head"]), float(row[score]), str(row["label"]))


def settings_rows(info: dict) -> pd.DataFrame:
    """The model's configuration, task and (if stored) training settings as (setting, value) rows."""
    cfg, task, train = info["config"], info["task"], info.get("train") or {}
    rows = [
        ("attention blocks", cfg.n_layers), ("heads per block", cfg.n_heads), ("d_model", cfg.d_model),
        ("d_head", cfg.d_head), ("vocabulary V", cfg.vocab_size), ("biases", "on" if cfg.bias else "off"),
        ("rotary base", f"{cfg.rope_base:g}"),
        ("pattern length L", f"{task.period_min}–{task.period_max}" if task.period_min != task.period_max
         else str(task.period_min)),
        ("sequence length", task.seq_len),
    ]
    rows.append(("initial embedding", initial_embedding_label(train)))
    for key, label in (("steps_done", "steps trained"), ("batch_size", "batch size"), ("lr", "learning rate"),
                       ("seed", "seed"), ("seconds", "training seconds")):
        if key in train:
            v = train[key]
            rows.append((label, f"{v:.0f}" if key == "seconds" and isinstance(v, (int, float)) else v))
    return pd.DataFrame(rows, columns=["setting", "value"]).astype({"value": str})


def initial_embedding_label(train: dict) -> str:
    """How W_E started, from a checkpoint's train settings: "plain", "not stored", or the enlarged start
    as "×scale + shared s" (TrainConfig.embed_scale / embed_shared)."""
    if "embed_scale" not in train and "embed_shared" not in train:
        return "not stored"
    scale, shared = train.get("embed_scale", 1.0), train.get("embed_shared", 0.0)
    if scale == 1.0 and not shared:
        return "plain"
    return f"×{scale:g}" + (f" + shared {shared:g}" if shared else "")


def initial_logit_bias(model_cfg: ModelConfig, train_cfg: TrainConfig) -> dict:
    """What the initial embedding does to the direct path W_E W_E^T [V, V] of the untrained model.

    bias_std: std over logits b of the part of logit b that does not depend on the current token (the
    column means of W_E W_E^T after each row's mean is removed, which the softmax ignores), in nats:
    a per-token logit bias the shared direction adds. repeat_bet: share of tokens x whose largest
    logit is x itself (the untrained model bets on a repeat of the current token).
    """
    import torch

    from core.training.initial import initial_model

    E = initial_model(model_cfg, train_cfg).W_E.detach()
    C = E @ E.T
    bias = (C - C.mean(1, keepdim=True)).mean(0)
    return {"bias_std": float(bias.std()), "repeat_bet": float((C.argmax(1) == torch.arange(len(C))).float().mean())}
