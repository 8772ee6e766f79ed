"""Named experiment settings (docs/DESIGN.md "Presets"): model, task and training for each shipped run,
and the measurements the manifest records for each shipped checkpoint."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.training.config import TrainConfig

if TYPE_CHECKING:
    from core.model.tinycharlm import TinyCharLM

DEFAULT_PRESET = "variable-period-2block"  # what the Train page starts from and the picker opens on
REFERENCE_PRESET = "variable-period-1block"  # the Train page's comparison: one block cannot do induction


@dataclass(frozen=True)
class Probe:
    """An extra evaluation of a shipped model: every sequence at one `period`, plus `offsets` mass rows."""
    name: str
    period: int | None = None
    offsets: tuple[int, ...] = ()


@dataclass(frozen=True)
class Preset:
    name: str
    blurb: str
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    probes: tuple[Probe, ...] = ()


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "fixed-period-1block-bias",
            "One block with biases on a single period (32): solvable by a fixed-offset shortcut.",
            ModelConfig(n_layers=1, bias=True),
            TaskConfig(period_min=32, period_max=32, seq_len=96),
            # A short run at a high rate: the content-free offset-31 head is sharpest early (about
            # 0.97 of a head's mass by step 100); longer runs spread the offset over the heads.
            TrainConfig(steps=125, lr=3e-2, weight_decay=0.1, decay_steps=0, embed_scale=1.0, embed_shared=0.0),
            probes=(Probe("period_24", period=24, offsets=(23, 31)),),
        ),
        Preset(
            REFERENCE_PRESET,
            "One block, periods 16-32: no fixed offset works and one block cannot build an induction circuit.",
            ModelConfig(n_layers=1),
            TaskConfig(),
        ),
        Preset(
            "zero-block",
            "No attention at all: logits are the Gram form W_E W_E^T, bigram statistics only.",
            ModelConfig(n_layers=0),
            TaskConfig(),
        ),
        Preset(
            DEFAULT_PRESET,
            "Two blocks, periods 16-32: a previous-token head feeds induction heads.",
            ModelConfig(n_layers=2),
            TaskConfig(),
        ),
    ]
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}.")
    return PRESETS[name]


def measure(model: TinyCharLM, task: TaskConfig, preset: Preset | None = None, n_seqs: int = 256,
            seed: int = 0) -> dict:
    """The manifest's metrics for one model (core.reading.report.build_report on the preset's task).

    Returns the copy metrics, "prev_token" and "induction" as [layer][head] lists, and for each of
    the preset's probes {probe name: {copy metrics, "offset_mass": {offset: [layer][head]}}}.
    """
    from core.reading.report import build_report  # report is heavier; only the manifest needs it

    def summary(report: dict, offsets=()) -> dict:
        out = dict(report["metrics"])
        L, H = report["config"]["n_layers"], report["config"]["n_heads"]
        for name in ("prev_token", "induction"):
            grid = [[None] * H for _ in range(L)]
            for h in report["heads"]:
                grid[h["layer"]][h["head"]] = h[name]
            out[name] = grid
        if offsets:
            mass = {str(k): [[None] * H for _ in range(L)] for k in offsets}
            for r in report["offset_mass"]:
                mass[str(r["offset"])][r["layer"]][r["head"]] = r["mass"]
            out["offset_mass"] = mass
        return out

    metrics = summary(build_report(model, task, n_seqs=n_seqs, seed=seed))
    for probe in (preset.probes if preset else ()):
        report = build_report(model, task, period=probe.period, offsets=list(probe.offsets), n_seqs=n_seqs, seed=seed)
        metrics[probe.name] = summary(report, probe.offsets)
    return metrics
