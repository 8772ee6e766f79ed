"""Checkpoint files, format version 2 (docs/DESIGN.md "Checkpoint file"; docs/DESIGN.md "Checkpoint format v2").

Version 2 is version 1 plus an optional `snapshots` list of {"step", "state_dict"} (core.model.snapshots);
version-1 files still load.

A file is one dict written by torch.save and read only with torch.load(weights_only=True), so
nothing beyond tensors and plain containers is ever unpickled. Every problem with a file is a
CheckpointError whose message is one plain sentence.
"""
from __future__ import annotations

import errno
import io
import math
import os
import pickle
import re
import warnings
import zipfile
from pathlib import Path

import torch

from core.model import tasks
from core.model.config import MAX_LAYERS, ModelConfig
from core.model.snapshots import check_snapshots
from core.model.symbols import parse_head_label
from core.model.task import TaskConfig
from core.model.tasks import Task
from core.model.tinycharlm import TinyCharLM

FORMAT = "tinycharlm"
VERSION = 2
VERSIONS = (1, 2)  # versions this lab reads
CONFIG_KEYS = ("vocab_size", "d_model", "n_heads", "n_layers", "bias", "rope_base")
OPTIONAL_CONFIG = {"smeared_keys": False}  # entries a file may omit (older files have none of them)
TASK_KEYS = ("period_min", "period_max", "seq_len")
MAX_FILE_BYTES = 50 * 1024 * 1024


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used; the message is one plain sentence."""


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The exact state_dict key -> shape list a file of this config must hold."""
    V, D, H, dh = cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.d_head
    shapes = {"W_E": (V, D)}
    for l in range(cfg.n_layers):
        for name in ("W_Q", "W_K", "W_V"):
            shapes[f"blocks.{l}.{name}"] = (H, D, dh)
        shapes[f"blocks.{l}.W_O"] = (H, dh, D)
        if cfg.bias:
            for name in ("b_Q", "b_K", "b_V"):
                shapes[f"blocks.{l}.{name}"] = (H, dh)
            shapes[f"blocks.{l}.b_O"] = (D,)
        if cfg.smeared_keys:
            shapes[f"blocks.{l}.smear"] = (H,)
    return shapes


def save_checkpoint(model: TinyCharLM, path, task: Task | dict | None = None,
                    train: dict | None = None, history: list | None = None, snapshots: list | None = None) -> None:
    """Write `model` (and optional task, train settings, history, snapshots [{"step", "state_dict"}])
    as a version-2 file at `path` (a path or a writable binary file object)."""
    task = task if task is not None else TaskConfig()
    task_dict = task.to_dict() if isinstance(task, Task) else dict(task)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "config": model.cfg.to_dict(),
        "task": task_dict,
        "state_dict": {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
    }
    if train is not None:
        payload["train"] = train
    if history is not None:
        payload["history"] = history
    if snapshots:
        payload["snapshots"] = [{"step": s["step"], "state_dict": s["state_dict"]} for s in snapshots]
    if not isinstance(path, (str, os.PathLike)):
        torch.save(payload, path)
        return
    # Through a Python file (a folder or unwritable path is a plain OSError, not a torch RuntimeError),
    # written beside the target and renamed over it, so a reader never sees half a file.
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a folder", str(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
        os.replace(tmp, path)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None  # name the file asked for, not tmp
    finally:
        tmp.unlink(missing_ok=True)


def checkpoint_bytes(model: TinyCharLM, **kwargs) -> bytes:
    """The file save_checkpoint would write, as bytes (for downloads)."""
    buf = io.BytesIO()
    save_checkpoint(model, buf, **kwargs)
    return buf.getvalue()


# What torch's weights-only unpickler says when a file names a Python object it will not build (as
# opposed to bytes that are simply not a pickle, which it reports as bad opcodes or an empty stack).
_BLOCKED_OBJECT = re.compile(r"GLOBAL \S+|Can only (create|build)|allowlisted|whose module|must be imported")


def _read(source, name: str, mmap: bool = False) -> dict:
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the CLI prints one line only
            warnings.simplefilter("ignore")
            obj = torch.load(source, map_location="cpu", weights_only=True, **({"mmap": True} if mmap else {}))
    except pickle.UnpicklingError as e:
        if _BLOCKED_OBJECT.search(str(e)):
            raise CheckpointError(
                f"{name} holds Python objects other than tensors and plain containers, so it was not loaded."
            ) from None
        raise CheckpointError(f"{name} is truncated or is not a torch checkpoint file.") from None
    except (EOFError, zipfile.BadZipFile, RuntimeError, OSError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, UnicodeDecodeError, MemoryError):
        raise CheckpointError(f"{name} is truncated or is not a torch checkpoint file.") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CheckpointError(f"{name} is not a TinyCharLM checkpoint (it has no format 'tinycharlm' entry).")
    return obj


def _config(obj: dict, name: str) -> ModelConfig:
    cfg = obj.get("config")
    if not isinstance(cfg, dict) or any(k not in cfg for k in CONFIG_KEYS):
        missing = [k for k in CONFIG_KEYS if not isinstance(cfg, dict) or k not in cfg]
        raise CheckpointError(f"{name} lacks the config entries {', '.join(missing)}.")
    ints = ("vocab_size", "d_model", "n_heads", "n_layers")
    if any(not isinstance(cfg[k], int) or isinstance(cfg[k], bool) for k in ints) or \
            not isinstance(cfg["bias"], bool) or not isinstance(cfg["rope_base"], (int, float)) or \
            any(not isinstance(cfg.get(k, v), bool) for k, v in OPTIONAL_CONFIG.items()):
        raise CheckpointError(f"{name} has a config whose entries are not of the right types.")
    if cfg["d_model"] < 1 or not math.isfinite(cfg["rope_base"]):
        raise CheckpointError(f"{name} has an invalid config: d_model must be positive and rope_base finite.")
    if cfg["n_layers"] > MAX_LAYERS or cfg["vocab_size"] > 4096 or cfg["d_model"] > 2048:
        raise CheckpointError(f"{name} describes a model larger than this lab handles.")
    try:
        return ModelConfig(**{k: cfg[k] for k in CONFIG_KEYS}, **{k: cfg.get(k, v) for k, v in OPTIONAL_CONFIG.items()})
    except ValueError as e:
        raise CheckpointError(f"{name} has an invalid config: {e}") from None


def _task(obj: dict, name: str, cfg: ModelConfig) -> Task:
    """The task of the file's entry (core.model.tasks: the task its "kind" names; the repeat task, with integer
    period_min, period_max and seq_len, when it names none)."""
    task = obj.get("task")
    kind = task.get("kind", tasks.DEFAULT) if isinstance(task, dict) else tasks.DEFAULT
    if kind == tasks.DEFAULT and (not isinstance(task, dict) or any(not isinstance(task.get(k), int)
                                                                    for k in TASK_KEYS)):
        raise CheckpointError(f"{name} lacks a task entry with integer {', '.join(TASK_KEYS)}.")
    try:
        cls = tasks.task_class(kind)
    except ValueError as e:
        raise CheckpointError(f"{name} has a task this lab does not know: {e}") from None
    what = "task" if kind == tasks.DEFAULT else f"{kind.capitalize()} task"
    try:
        return cls.from_dict(task).validate(cfg.vocab_size)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{name} has an impossible {what}: {e}") from None


def _state_dict(obj: dict, name: str, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    sd = obj.get("state_dict")
    if not isinstance(sd, dict):
        raise CheckpointError(f"{name} has no state_dict.")
    shapes = expected_shapes(cfg)
    smear = sorted(k for k in {*shapes, *sd} if isinstance(k, str) and k.endswith(".smear"))
    if cfg.smeared_keys and not all(k in sd for k in smear):
        raise CheckpointError(f"{name} says its keys are smeared (config smeared_keys) but lacks the smear "
                              f"weights {', '.join(k for k in smear if k not in sd)[:200]}.")
    if not cfg.smeared_keys and smear:
        raise CheckpointError(f"{name} holds smear weights ({', '.join(smear[:4])}) but its config does not say "
                              "smeared_keys: it is not a plain model, and no config here describes it.")
    missing = sorted(set(shapes) - set(sd))
    if missing:
        raise CheckpointError(f"{name} is missing the weights {', '.join(missing[:4])}.")
    extra = sorted(set(sd) - set(shapes))
    if extra:
        raise CheckpointError(f"{name} holds weights its config does not describe: {', '.join(extra[:4])}.")
    for key, shape in shapes.items():
        t = sd[key]
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise CheckpointError(f"{name}: weight {key} is not a floating-point tensor.")
        if tuple(t.shape) != shape:
            raise CheckpointError(f"{name}: weight {key} has shape {tuple(t.shape)}, its config needs {shape}.")
        if not torch.isfinite(t).all():
            raise CheckpointError(f"{name}: weight {key} holds NaN or infinite values.")
    return {k: sd[k].float() for k in shapes}


def read_checkpoint(source, name: str | None = None, mmap: bool = False) -> tuple[TinyCharLM, dict]:
    """Load and check a file (path, bytes or binary file object). mmap=True (a path only): the file's
    tensors, the snapshots among them, stay pages of the file mapped into memory (torch.load's mmap)
    instead of copies in the heap; the file must not be rewritten in place while they are used.

    Returns (model in eval mode, info) where info holds "config", "task" (TaskConfig), "train" and
    "history" (None when absent) and "snapshots" ([{"step", "state_dict"}], empty when absent).
    Raises CheckpointError for any problem.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        name = name or path.name
        if not path.is_file():
            raise CheckpointError(f"There is no checkpoint file at {path}.")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise CheckpointError(f"{name} is larger than {MAX_FILE_BYTES // 2**20} MB, "
                                  "too large for a TinyCharLM checkpoint.")
    elif isinstance(source, (bytes, bytearray)):
        name = name or "The uploaded file"
        if len(source) > MAX_FILE_BYTES:
            raise CheckpointError(f"{name} is larger than {MAX_FILE_BYTES // 2**20} MB, "
                                  "too large for a TinyCharLM checkpoint.")
        source = io.BytesIO(source)
    else:
        name = name or "The file"
    obj = _read(source, name, mmap=mmap and isinstance(source, (str, os.PathLike)))
    version = obj.get("version")
    if type(version) is not int or version not in VERSIONS:  # True and 1.0 compare equal to 1
        raise CheckpointError(f"{name} is format version {version!r}; this lab reads versions 1 and 2.")
    cfg = _config(obj, name)
    task = _task(obj, name, cfg)
    sd = _state_dict(obj, name, cfg)
    snapshots = []
    if "snapshots" in obj:
        if version == 1:
            raise CheckpointError(f"{name} is format version 1, which has no snapshots, but holds a snapshots entry.")
        snapshots = check_snapshots(obj["snapshots"], name, expected_shapes(cfg), CheckpointError)
    model = TinyCharLM(cfg)
    model.load_state_dict(sd)
    model.eval()
    history = obj.get("history")
    train = obj.get("train")
    _restore_hold(model, train if isinstance(train, dict) else None, name)
    info = {
        "config": cfg,
        "task": task,
        "train": train if isinstance(train, dict) else None,
        "history": history if isinstance(history, list) else None,
        "snapshots": snapshots,
    }
    return model, info


def _restore_hold(model: TinyCharLM, train: dict | None, name: str) -> None:
    """A run trained with a held previous-token head (core.training.interventions) keeps the hold: it is
    part of the model as trained and measured, recorded as the train entry's "hold" (a head label, "1.2"; files
    written before heads were labels: hold_prev_head, the 0-based block-1 head, -1 = none). Every page then
    analyses the model its training history describes."""
    train = train or {}
    label = train.get("hold")
    if label not in (None, "", "none"):
        try:
            layer, hold = parse_head_label(str(label))
        except ValueError:
            layer, hold = -1, -1
        if layer != 0:
            raise CheckpointError(f"{name} records a held head ({label!r}) that is not a head of block 1.")
    else:
        hold = train.get("hold_prev_head", -1)
        if hold is None or hold == -1:
            return
    if type(hold) is not int or model.cfg.n_layers < 1 or not 0 <= hold < model.cfg.n_heads:
        raise CheckpointError(f"{name} records a held head ({label or f'hold_prev_head {hold!r}'}) that is not a "
                              "head of block 1.")
    model.hold_previous(hold)


def load_checkpoint(path) -> TinyCharLM:
    """The model in a version-1 or version-2 file, in eval mode; CheckpointError for any bad file."""
    return read_checkpoint(path)[0]
