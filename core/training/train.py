"""Command line: train TinyCharLM and write a checkpoint.

    python -m core.train --preset variable-period-2block --out m.pt
    python -m core.train --layers 2 --period-min 16 --period-max 32 --stop-at-loss 0.5 --out m.pt
    python -m core.train --preset markov-2block --seed 0 --out m.pt     # a Markov-chain preset

Flags given explicitly override the preset's values. A Markov-chain preset (core.training.markov) takes
only --seed, --out and --manifest: its settings are the preset's.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from core.model.cli import OneLineParser, UsageError
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.training.config import TrainConfig
from core.training.heap import keep_freed_memory
from core.training.markov import MARKOV_PRESETS
from core.training.presets import DEFAULT_PRESET, PRESETS
from core.training.run_config import RunConfig

if TYPE_CHECKING:
    from core.training.trainer import Trainer


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m core.train", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", help=f"one of: {', '.join([*PRESETS, *MARKOV_PRESETS])}")
    p.add_argument("--out", required=True, help="checkpoint file to write")
    # a flag whose dest is a model, task or TrainConfig field sets that field (RunConfig.of, by name): a new
    # training option is its TrainConfig field and one add_argument here
    p.add_argument("--layers", type=int, dest="n_layers", help="number of attention blocks (0-6)")
    p.add_argument("--period-min", type=int)
    p.add_argument("--period-max", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--bias", action=argparse.BooleanOptionalAction, default=None, help="q/k/v/o biases")
    p.add_argument("--steps", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--log-every", type=int)
    p.add_argument("--stop-at-loss", type=float,
                   help="stop once loss_later_copies on the fixed evaluation batch is below this")
    p.add_argument("--hold-prev-head", metavar="1.H", dest="hold",
                   help="experiment: hold block-1 head H's pattern on the previous position for the whole run")
    p.add_argument("--clamp-induction-head", metavar="2.H", dest="clamp",
                   help="experiment: clamp block-2 head H's pattern to the ideal induction pattern while it trains")
    p.add_argument("--knockout", metavar="B.H", help="experiment: head B.H writes nothing for the whole run")
    p.add_argument("--plain-embedding", action="store_true",
                   help="experiment: start from the plain embedding (embed_scale 1, embed_shared 0)")
    p.add_argument("--manifest", help="also measure the checkpoint and record it in this manifest.json")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    return p


def configs_from_args(args) -> tuple[ModelConfig, TaskConfig, TrainConfig]:
    """The preset (default: the default preset, whose configs are the classes' defaults) with the explicit
    flags, as RunConfig.of builds every run; raises ValueError for bad values."""
    given = {k: v for k, v in vars(args).items() if v is not None and k not in NOT_SETTINGS}
    if args.plain_embedding:
        given["init"] = "plain"
    run = RunConfig.of(args.preset or DEFAULT_PRESET, **given)
    run.validate(min_steps=0)
    return run.model, run.task, run.train


NOT_SETTINGS = {"preset", "out", "stop_at_loss", "plain_embedding", "manifest", "quiet"}  # flags of the command


def train_to_file(model_cfg, task_cfg, train_cfg, out, stop_at_loss=None, progress=False, preset=None) -> Trainer:
    """Run a whole training and save it to `out`; returns the finished Trainer."""
    from core.model.checkpoints import save_checkpoint
    from core.training.trainer import Trainer

    trainer = Trainer(model_cfg, task_cfg, train_cfg)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=train_cfg.steps, unit="step", file=sys.stderr)
    while not trainer.done:
        n = trainer.run(train_cfg.log_every, stop_at_loss)
        if bar is not None:
            bar.update(n)
            bar.set_postfix(later=f"{trainer.history[-1]['loss_later_copies']:.3f}")
        if stop_at_loss is not None and trainer.reached(stop_at_loss):
            break
    if bar is not None:
        bar.close()
    fields = trainer.checkpoint_fields()
    fields["train"]["preset"] = preset
    fields["train"]["stop_at_loss"] = stop_at_loss
    save_checkpoint(trainer.model, out, **fields)
    return trainer


def manifest_row(file: Path, command: str) -> dict:
    """A manifest row for a written checkpoint: {file, preset, train, seed, command, model, task,
    metrics}, the metrics measured on the file's model (core.training.presets.measure)."""
    from core.model.checkpoints import read_checkpoint
    from core.training.presets import PRESETS, measure

    model, info = read_checkpoint(file)
    train = dict(info["train"] or {})
    preset = train.get("preset")
    return {
        "file": file.name,
        "preset": preset,
        "train": {k: v for k, v in train.items() if k not in ("seed", "preset")},
        "seed": train.get("seed"),
        "command": command,
        "model": info["config"].to_dict(),
        "task": info["task"].to_dict(),
        "metrics": measure(model, info["task"], PRESETS.get(preset)),
    }


def update_manifest(manifest: Path, row: dict) -> None:
    """Put `row` into the manifest file (replacing any row for the same file), presets in order."""
    data = json.loads(manifest.read_text()) if manifest.is_file() else {}
    rows = [r for r in data.get("checkpoints", []) if r.get("file") != row["file"]] + [row]
    order = {name: i for i, name in enumerate(_preset_names())}
    rows.sort(key=lambda r: (order.get(r.get("preset"), len(order)), r["file"]))
    data["checkpoints"] = rows
    data["metrics_note"] = ("metrics: core.reading.report.build_report on the checkpoint's own task "
                            "(n_seqs=256, seed=0); "
                            "a probe such as period_24 evaluates every sequence at that one period.")
    manifest.write_text(json.dumps(data, indent=1) + "\n")


def _preset_names() -> list[str]:
    return list(PRESETS)


def main(argv=None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.preset in MARKOV_PRESETS:
        return _train_markov(args, raw)
    model_cfg, task_cfg, train_cfg = configs_from_args(args)
    out = Path(args.out)
    if not out.parent.exists():
        raise UsageError(f"the folder {out.parent} for --out does not exist.")
    progress = not args.quiet and sys.stderr.isatty()
    keep_freed_memory()  # this process only trains
    trainer = train_to_file(model_cfg, task_cfg, train_cfg, out, args.stop_at_loss, progress, args.preset)
    if args.manifest:
        manifest = Path(args.manifest)
        command = "python -m core.train " + " ".join(shlex.quote(a) for a in raw)
        update_manifest(manifest, manifest_row(out, command))
    if not args.quiet:
        last = trainer.history[-1]
        print(f"trained {trainer.step} steps in {trainer.seconds:.1f} s: loss_first_copy "
              f"{last['loss_first_copy']:.3f}, loss_later_copies {last['loss_later_copies']:.3f}, "
              f"acc_later_copies {last['acc_later_copies']:.3f} -> {out}")
    return 0


def _train_markov(args, raw: list[str]) -> int:
    """A Markov-chain preset: its own settings, seed, checkpoint and manifest row (core.training.markov)."""
    from core.training.markov import stage_sentence, train_preset

    allowed = {"--preset", "--seed", "--out", "--manifest", "--quiet"}
    extra = sorted({a.split("=")[0] for a in raw if a.startswith("--")} - allowed)
    if extra:
        raise UsageError(f"a Markov-chain preset takes only --seed, --out and --manifest (not {', '.join(extra)}).")
    out = Path(args.out)
    if not out.parent.exists():
        raise UsageError(f"the folder {out.parent} for --out does not exist.")
    keep_freed_memory()
    trainer = train_preset(args.preset, args.out, args.seed or 0, args.manifest)
    if not args.quiet:
        print(f"{args.preset}: {trainer.step} steps in {trainer.seconds:.1f} s; "
              + stage_sentence(trainer.history, trainer.task_cfg) + f" -> {args.out}")
    return 0
