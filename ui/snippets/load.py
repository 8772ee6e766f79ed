"""Putting a snippet together: the lines that load the picked model, then the page's pieces
(ui/snippets/fill.py says how a piece is written)."""
from __future__ import annotations

from typing import Any

from ui.model_keys import shipped_file, split_step_key
from ui.python_panel import Snippet
from ui.snippets.fill import Piece, checks, fill, placeholders


def _shipped(PATH):
    from core.model.checkpoints import read_checkpoint
    model, info = read_checkpoint(PATH)
    task = info["task"]  # the task it was trained on
    return model, info, task


def _session():
    from core.model.checkpoints import read_checkpoint
    # this session's model: download it (Train page) or use the file you uploaded
    model, info = read_checkpoint("my_model.pt")
    task = info["task"]  # the task it was trained on
    return model, info, task


def _at_step(model, info, STEP):
    from core.model.snapshots import model_at_step
    model = model_at_step(model, info, STEP)  # the weights at training step STEP
    return model


def load(entry) -> str:
    """The lines that load the picked model (a ui.state.LabModel, or its key): a shipped file by its
    path, anything else by the file the student downloads (the Train page) or uploaded; a snapshot's
    entry then takes that step's weights."""
    key, step = split_step_key(getattr(entry, "key", entry))
    file = shipped_file(key)
    code = fill(_shipped, PATH="checkpoints/" + file) if file is not None else fill(_session)
    return code if step is None else code + fill(_at_step, STEP=step)


def _join(parts: list[str]) -> str:
    """The pieces' code one after another, each import statement kept only the first time."""
    seen: set[str] = set()
    lines = []
    for line in "".join(parts).splitlines(keepends=True):
        if line.startswith(("from ", "import ")):
            if line in seen:
                continue
            seen.add(line)
        lines.append(line)
    return "".join(lines)


def snippet(title: str, entry, *pieces: Piece | str, **values: Any) -> Snippet:
    """A Snippet: the lines that load `entry`'s model (None: no model), then each piece filled with
    the values it takes (a str piece is code already filled in); the checks are the last piece's."""
    unused = set(values) - {name for p in pieces if not isinstance(p, str) for name in placeholders(p)}
    if unused:
        raise TypeError(f"{title!r}: no piece takes {', '.join(sorted(unused))}")

    def taken(piece: Piece) -> dict[str, Any]:
        return {k: values[k] for k in placeholders(piece) if k in values}

    code = [load(entry)] if entry is not None else []
    code += [p if isinstance(p, str) else fill(p, **taken(p)) for p in pieces]
    last = pieces[-1]
    return Snippet(title, _join(code), {} if isinstance(last, str) else checks(last, **taken(last)))
