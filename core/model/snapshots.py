"""Snapshots of the weights during training (checkpoint format version 2; docs/DESIGN.md
"Checkpoint format v2").

The trainer offers a snapshot every EVERY steps (and at step 0) together with the later-copy loss of
that step's training batch, which comes free with the step. A SnapshotRecorder keeps them in float16
(half the bytes of float32; docs/DESIGN.md has the measured effect on the scores) and, whenever they
would exceed a byte budget, thins them with `keep_indices`:

- the *drop window* is protected: from MARGIN steps before the last snapshot whose loss is at least
  HIGH (3 nats) that precedes the first one below LOW (1 nat), to MARGIN steps after that first one
  below LOW (core.model.drop's HIGH and LOW);
- while no loss has yet fallen below LOW (the drop may still come), everything from MARGIN steps
  before the last snapshot at or above HIGH is protected, so the 50 steps before a drop are still
  there when it comes;
- everything else is kept on a sparse grid (multiples of 50 steps, coarsened to 100, 200, ... until
  the budget holds); step 0 is always kept.

MARGIN is 60, not 50, because the batch loss is a noisy stand-in for the evaluation-batch loss that
defines the drop. Snapshotting only copies tensors: it draws no random numbers, so a run's trajectory
is the same with or without it.
"""
from __future__ import annotations

import mmap
import tempfile

import torch

from core.model.drop import HIGH, LOW
from core.model.tinycharlm import TinyCharLM

EVERY = 10  # steps between offered snapshots
MARGIN = 60  # steps protected on each side of the drop
SPARSE = 50  # the sparse grid's first spacing
DTYPE = torch.float16
MEMORY_BUDGET = 30 * 2**20  # bytes of snapshots a live run keeps
FILE_BUDGET = int(8.5 * 2**20)  # bytes of snapshots written to a file (the whole file stays under 10 MB)
MAX_SNAPSHOTS = 400  # more than this in a file is refused (at EVERY=10, 4,000 steps' worth)
DTYPES = (torch.float16, torch.float32)


def pack(model: TinyCharLM) -> dict[str, torch.Tensor]:
    """A float16 copy of the model's state_dict (same keys and shapes), every tensor a view of one buffer
    mapped on its own (mmap), outside malloc's heap. A training keeps its freed heap to reuse for the next
    step (core.training.heap); snapshots kept for hundreds of steps in it sat between the step's buffers,
    which then could not reuse those holes: in a pool worker with the compiled attention the free heap grew
    from 87 to 137 MB over 400 steps, and stayed at 49-53 MB with no snapshots (bench/README.md, "A training
    process's memory")."""
    state = model.state_dict()
    out = _views(_mapped(state), ((k, v.shape) for k, v in state.items()))
    for k, v in state.items():
        out[k].copy_(v.detach())
    return out


def _mapped(state: dict[str, torch.Tensor]) -> torch.Tensor:
    """A flat DTYPE buffer for all of `state`'s elements, mapped on its own (the tensor holds the mapping)."""
    n = sum(v.numel() for v in state.values())
    return torch.frombuffer(mmap.mmap(-1, max(n, 1) * DTYPE.itemsize), dtype=DTYPE)


def _views(flat: torch.Tensor, layout) -> dict[str, torch.Tensor]:
    """{key: a view of `flat`'s next shape.numel() elements} for (key, shape) in `layout`, in order."""
    out, at = {}, 0
    for k, shape in layout:
        numel = shape.numel()
        out[k] = flat[at:at + numel].view(shape)
        at += numel
    return out


def state_bytes(state_dict: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in state_dict.values())


def snapshot_model(model: TinyCharLM, state_dict: dict[str, torch.Tensor]) -> TinyCharLM:
    """A new TinyCharLM of `model`'s config holding a snapshot's weights (as float32), in eval mode.
    The model's standing edits (a held head, core.training.interventions) are part of it and carry over."""
    out = TinyCharLM(model.cfg)
    out.load_state_dict({k: v.float() for k, v in state_dict.items()})
    out.standing = dict(model.standing)
    return out.eval()


def model_at_step(model: TinyCharLM, info: dict, step: int) -> TinyCharLM:
    """The model as it was at training step `step`, one of the checkpoint's snapshot steps
    (info["snapshots"], as read_checkpoint returns it). ValueError names the steps there are."""
    snaps = info.get("snapshots") or []
    for snap in snaps:
        if snap["step"] == step:
            return snapshot_model(model, snap["state_dict"])
    have = ", ".join(str(s["step"]) for s in snaps[:8]) + (", …" if len(snaps) > 8 else "")
    raise ValueError(f"This checkpoint has no snapshot at step {step}" + (f" (it has {have})." if snaps else
                                                                          " (it has no snapshots)."))


def _high(loss: float) -> bool:
    return not loss < HIGH  # NaN (step 0 has no batch loss yet) counts as the plateau


def drop_window(steps: list[int], losses: list[float], pending: bool) -> tuple[int, int] | None:
    """The steps [lo, hi] to keep dense (see the module docstring), or None."""
    end_i = next((i for i, l in enumerate(losses) if l < LOW), None)
    if end_i is None:
        if not pending:
            return None
        last_high = max((i for i, l in enumerate(losses) if _high(l)), default=0)
        return steps[last_high] - MARGIN, steps[-1]
    start_i = max((i for i in range(end_i) if _high(losses[i])), default=0)
    return steps[start_i] - MARGIN, steps[end_i] + MARGIN


def keep_indices(steps: list[int], losses: list[float], max_count: int, pending: bool = False) -> list[int]:
    """Which of the snapshots (steps increasing, with their batch losses) to keep, at most max_count
    (at least 1): the drop window densely, a sparse grid elsewhere, step 0 always."""
    n = len(steps)
    if n <= max_count:
        return list(range(n))
    window = drop_window(steps, losses, pending)
    protected = [i for i in range(n) if window and window[0] <= steps[i] <= window[1]]
    if len(protected) > max_count - 1:  # a slow fall that does not fit: thin it evenly
        pick = torch.linspace(0, len(protected) - 1, max(max_count - 1, 1)).round().long().unique().tolist()
        protected = [protected[j] for j in pick]
    spacing = SPARSE
    while True:
        chosen = set(protected) | {0} | {i for i in range(n) if steps[i] % spacing == 0}
        if len(chosen) <= max_count or spacing > steps[-1]:
            return sorted(chosen)[:max_count]
        spacing *= 2


class SpillFile:
    """Snapshots of one model's state_dict kept in an unnamed temporary file instead of memory:
    a pool worker held about 22 MB of live snapshots by step 800 of a default run, resident until the
    checkpoint was written, though only the export at the end reads them. Each snapshot is the same
    float16 buffer `pack` makes, written to a slot of the file; a slot freed by thinning is reused, so
    the file stays at most one slot over the live budget. `read` gives the snapshot back as `pack` made
    it (one buffer, every tensor a view of it, same keys and shapes): the checkpoint's bytes are the same
    (tests/test_snapshots.py). The page cache holds the file's pages, not the process: they are not in its
    PSS, and the kernel may write them out under pressure."""

    def __init__(self):
        # unbuffered (seek, write and readinto go straight to the file); open for the recorder's life
        self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 -- unlinked already where it can be
        self._layout: list[tuple[str, torch.Size]] | None = None
        self._scratch: torch.Tensor | None = None  # one packed copy, reused for every write
        self._free: list[int] = []
        self._slots = 0

    @property
    def slot_bytes(self) -> int:
        return self._scratch.numel() * DTYPE.itemsize if self._scratch is not None else 0

    def write(self, model: TinyCharLM) -> tuple[int, tuple[str, ...]]:
        """Copy the model's weights (as `pack` does) into a free slot; returns the slot and the state_dict's
        keys. The keys are kept as the objects state_dict made (a few hundred bytes): torch.save's pickle
        writes a string once per object, so a checkpoint is byte-identical only if its snapshots' keys are
        the same objects as `pack`'s would have been."""
        state = model.state_dict()
        if self._layout is None:
            self._layout = [(k, v.shape) for k, v in state.items()]
            self._scratch = _mapped(state)
        for view, v in zip(_views(self._scratch, self._layout).values(), state.values()):
            view.copy_(v.detach())
        slot = self._free.pop() if self._free else self._slots
        self._slots = max(self._slots, slot + 1)
        self._file.seek(slot * self.slot_bytes)
        if self._file.write(memoryview(self._scratch.numpy()).cast("B")) != self.slot_bytes:
            raise OSError("a snapshot could not be written in full to its temporary file")
        return slot, tuple(state)

    def read(self, slot: int, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The snapshot in `slot` (its state_dict's `keys`, as `write` returned them), as `pack` made it."""
        buf = bytearray(self.slot_bytes)
        self._file.seek(slot * self.slot_bytes)
        if self._file.readinto(buf) != len(buf):
            raise OSError("a snapshot could not be read back from its temporary file")
        return _views(torch.frombuffer(buf, dtype=DTYPE), zip(keys, (shape for _, shape in self._layout)))

    def free(self, slot: int) -> None:
        self._free.append(slot)

    def close(self) -> None:
        self._file.close()


def _spill_file() -> SpillFile | None:
    """A SpillFile, or None where no temporary file can be made (no writable temporary folder): the
    snapshots are then held in memory, as before there was a spill file."""
    try:
        return SpillFile()
    except OSError:
        return None


class SnapshotRecorder:
    """Snapshots of one run: offer(step, model, batch_loss) every step; keeps float16 copies at
    multiples of EVERY within `budget` bytes. With spill=True (the default) they live in a temporary
    file (SpillFile) until `export` reads the ones a file keeps; spill=False keeps them in memory
    (`pack`). Which snapshots are kept, and their bytes, are the same either way."""

    def __init__(self, budget: int = MEMORY_BUDGET, spill: bool = True):
        self.budget = budget
        self.steps: list[int] = []
        self.losses: list[float] = []
        self._spill = _spill_file() if spill else None
        self._held: list = []  # per snapshot: (its slot in the spill file, its keys), or its packed state_dict
        self._bytes = 0  # one snapshot's bytes

    def offer(self, step: int, model: TinyCharLM, batch_loss: float) -> None:
        if step % EVERY or (self.steps and step <= self.steps[-1]):
            return
        self.steps.append(step)
        self.losses.append(float(batch_loss))
        if self._spill is not None:
            try:
                self._held.append(self._spill.write(model))
                self._bytes = self._spill.slot_bytes
            except OSError:  # a full disk mid-run: the snapshots so far, and the rest, in memory instead
                self._unspill()
        if self._spill is None:
            self._held.append(pack(model))
            self._bytes = state_bytes(self._held[0])
        cap = max(self.budget // self._bytes, 1)
        if len(self.steps) > cap:
            self._keep(keep_indices(self.steps, self.losses, cap, pending=True))

    def _unspill(self) -> None:
        """Hold every live snapshot in memory from now on (the spill file could not take another)."""
        spill, self._spill = self._spill, None
        self._held = [spill.read(*held) for held in self._held]
        spill.close()

    def _keep(self, idx: list[int]) -> None:
        if self._spill is not None:
            for i in sorted(set(range(len(self._held))) - set(idx)):
                self._spill.free(self._held[i][0])
        self.steps = [self.steps[i] for i in idx]
        self.losses = [self.losses[i] for i in idx]
        self._held = [self._held[i] for i in idx]

    def _state(self, i: int) -> dict[str, torch.Tensor]:
        held = self._held[i]
        return held if self._spill is None else self._spill.read(*held)

    @property
    def states(self) -> list[dict[str, torch.Tensor]]:
        """Every live snapshot's state_dict (read back from the spill file: a copy each time)."""
        return [self._state(i) for i in range(len(self._held))]

    def export(self, final_step: int | None = None) -> list[dict]:
        """The snapshots for a file: [{"step", "state_dict"}], at most FILE_BUDGET bytes, thinned as in
        keep_indices; the final step itself is left out (the file's top-level state_dict holds it)."""
        items = [i for i, s in enumerate(self.steps) if s != final_step]
        if not items:
            return []
        cap = max(FILE_BUDGET // self._bytes, 1)
        idx = keep_indices([self.steps[i] for i in items], [self.losses[i] for i in items], cap)
        return [{"step": self.steps[items[i]], "state_dict": self._state(items[i])} for i in idx]


def check_snapshots(snaps, name: str, shapes: dict[str, tuple[int, ...]], error) -> list[dict]:
    """Check a file's `snapshots` entry as strictly as its state_dict; raise error(one sentence) for
    the first problem. Returns [{"step", "state_dict"}] with tensors as stored (float16 or float32)."""
    if not isinstance(snaps, list):
        raise error(f"{name} has a snapshots entry that is not a list.")
    if len(snaps) > MAX_SNAPSHOTS:
        raise error(f"{name} holds {len(snaps)} snapshots; at most {MAX_SNAPSHOTS} are allowed.")
    out, last = [], -1
    for n, snap in enumerate(snaps):
        if not isinstance(snap, dict) or set(snap) != {"step", "state_dict"}:
            raise error(f"{name}: snapshot {n} is not a dict with exactly the entries step and state_dict.")
        step, sd = snap["step"], snap["state_dict"]
        if type(step) is not int or step < 0:
            raise error(f"{name}: snapshot {n} has a step that is not a whole number of 0 or more.")
        if step <= last:
            raise error(f"{name}: snapshot steps must increase, but snapshot {n} (step {step}) follows step {last}.")
        if not isinstance(sd, dict) or set(sd) != set(shapes):
            raise error(f"{name}: the snapshot at step {step} does not hold exactly the weights of the model.")
        for key, shape in shapes.items():
            t = sd[key]
            if not isinstance(t, torch.Tensor) or t.dtype not in DTYPES:
                raise error(f"{name}: weight {key} of the snapshot at step {step} is not a float16 or float32 tensor.")
            if tuple(t.shape) != shape:
                raise error(f"{name}: weight {key} of the snapshot at step {step} has shape {tuple(t.shape)}, "
                            f"the model needs {shape}.")
            if not torch.isfinite(t).all():
                raise error(f"{name}: weight {key} of the snapshot at step {step} holds NaN or infinite values.")
        out.append({"step": step, "state_dict": dict(sd)})
        last = step
    return out


def nearest(steps: list[int], target: float) -> int:
    """Index of the step closest to target (ties: the earlier)."""
    return min(range(len(steps)), key=lambda i: (abs(steps[i] - target), i)) if steps else -1

