"""Named experiment settings (DESIGN.md "Presets"): model, task and training for each shipped run."""
from __future__ import annotations

from dataclasses import dataclass, field

from .model import ModelConfig
from .task import TaskConfig
from .trainer import TrainConfig


@dataclass(frozen=True)
class Preset:
    name: str
    blurb: str
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "fixed-period-1block-bias",
            "One block with biases on a single period (32): solvable by a fixed-offset shortcut.",
            ModelConfig(n_layers=1, bias=True),
            TaskConfig(period_min=32, period_max=32, seq_len=96),
        ),
        Preset(
            "variable-period-1block",
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
            "variable-period-2block",
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
