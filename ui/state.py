"""Which model the student is analysing: the shared sidebar picker and the session's own models.

Shipped checkpoints are loaded once per server (st.cache_resource on the file name), and only when a page
computes a view of one: their info (config, task, training settings and history, snapshot steps) is shipped
data (ui/shipped_data.py), so a server whose pages read shipped views never imports torch. Models trained or
uploaded in a session live only in that session's st.session_state, so one user never sees another's. Every
model carries a `key` that is unique across the server (ui/model_keys.py): anything computed from the model
is cached by it (ui/cache.py's `per_model`); a shipped checkpoint's entry also carries its file and sha256,
the key of its views in the shipped data.
"""
from __future__ import annotations

import functools
import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from core.model.info import info_view
from core.training.presets import DEFAULT_PRESET
from ui import shipped_data
from ui.model_keys import shipped_key, step_key

if TYPE_CHECKING:
    from core.model.tinycharlm import TinyCharLM

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT_DIR = ROOT / "checkpoints"
MAX_UPLOAD_MB = 10  # a version-2 file with snapshots is up to 10 MB


@dataclass(eq=False)
class LabModel:
    key: str  # unique on the server; the cache key for anything derived from this model
    label: str  # what the picker shows
    model: TinyCharLM
    info: dict  # config, task (TaskConfig), train, history, snapshots (core.model.checkpoints.read_checkpoint)
    source: str  # "shipped", "trained" or "uploaded"
    file: str | None = None  # a shipped checkpoint's file (relative to checkpoints/), None for a session's own
    step: int | None = None  # the snapshot of its training this entry is at (at_step), None: as trained
    sha256: str | None = None  # of the shipped file's bytes: with the step, where its views are in the shipped data

    @property
    def task(self):
        """The model's TaskConfig (info["task"])."""
        return self.info["task"]

    @property
    def held_head(self) -> int | None:
        """The block-1 head (0-based) held on the previous position during training, part of the model as
        trained (core.model.checkpoints restores the hold from info["train"]), or None."""
        from core.training.config import TrainConfig

        hold = TrainConfig.from_dict(self.info.get("train") or {}).head("hold")
        return None if hold is None else hold[1]

    @property
    def full_info(self) -> dict:
        """info with every snapshot's weights ({"step", "state_dict"}), for a computation over the training."""
        return self.info

    def at_step(self, step: int) -> LabModel:
        """This model as it was at snapshot `step`, under a key that names the step (ui.steps), so every
        view of it is cached apart. ValueError names the steps there are."""
        from core.model.snapshots import model_at_step

        return LabModel(step_key(self.key, step), f"{self.label} at step {step}",
                        model_at_step(self.model, self.full_info, step), self.info, self.source, self.file, step,
                        self.sha256)


class ShippedModel(LabModel):
    """A shipped checkpoint: its info is shipped data (each snapshot its step alone), its weights are read
    from the file on first use (st.cache_resource, once per server). A page that only reads shipped views
    never touches `model`, and the server never imports torch."""

    def __init__(self, file: str, label: str):
        self.key, self.label, self.source, self.file = shipped_key(file), label, "shipped", file
        self.step, self.sha256 = None, shipped_digest(file)

    def __repr__(self) -> str:  # the dataclass's would load the weights to show them
        return f"ShippedModel({self.file!r})"

    @property
    def model(self) -> TinyCharLM:
        return _load_shipped(self.file)[0]

    @functools.cached_property
    def info(self) -> dict:
        return _shipped_info(self.file, self.sha256)

    @property
    def full_info(self) -> dict:
        return _load_shipped(self.file)[1]


class TrainedModel(LabModel):
    """A model this session trained: its info (without weights) came with the run's end, its weights are read from
    the checkpoint's bytes when a page first needs them (strictly, as any file: read_checkpoint). The worker read
    the file back already (core.pool.worker.info_of), so a server that watches a run to its end, and shows how it
    ended, imports no torch for it."""

    def __init__(self, key: str, label: str, data: bytes, info: dict):
        self.key, self.label, self.source, self.file = key, label, "trained", None
        self.step, self.sha256, self.info, self._data = None, None, info, data

    def __repr__(self) -> str:  # the dataclass's would load the weights to show them
        return f"TrainedModel({self.label!r})"

    @functools.cached_property
    def _read(self) -> tuple[TinyCharLM, dict]:
        from core.model.checkpoints import read_checkpoint

        return read_checkpoint(self._data, name="The trained model")

    @property
    def model(self) -> TinyCharLM:
        return self._read[0]

    @property
    def full_info(self) -> dict:
        return self._read[1]


_MANIFESTS: dict[str, tuple] = {}  # manifest path -> ((mtime_ns, size), the rows read from it then)


def manifest_rows(folder: str = "") -> list[dict]:
    """The rows of checkpoints/<folder>/manifest.json, read again only when the file changes (every script
    run asks, several times); [] without a readable manifest."""
    manifest = CHECKPOINT_DIR / folder / "manifest.json"
    try:
        stat = manifest.stat()
    except OSError:
        return []
    now = (stat.st_mtime_ns, stat.st_size)
    seen = _MANIFESTS.get(str(manifest))
    if seen is None or seen[0] != now:
        try:
            seen = (now, json.loads(manifest.read_text()).get("checkpoints", []))
        except (OSError, ValueError, AttributeError):
            return []
        _MANIFESTS[str(manifest)] = seen  # one assignment: another thread sees both or neither
    return [dict(r) for r in seen[1] if isinstance(r, dict)]


def shipped_files() -> list[dict]:
    """Manifest rows (at least {"file", "preset"}) of the shipped checkpoints that exist on disk."""
    rows = manifest_rows()
    if not rows:
        rows = [{"file": p.name, "preset": p.stem} for p in sorted(CHECKPOINT_DIR.glob("*.pt"))]
    return [r for r in rows if (CHECKPOINT_DIR / r["file"]).is_file()]


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_SHIPPED_DIGESTS: dict[str, str] = {}  # file -> sha256 of its bytes (those _load_shipped read, once it has)


@st.cache_resource(show_spinner=False)
def _load_shipped(file: str) -> tuple[TinyCharLM, dict]:
    """The file's tensors (its snapshots: about 14 MB for the four shipped files) stay pages of the file,
    mapped (read_checkpoint's mmap), not copies in the server's heap: clean pages the kernel can drop and
    read again, shared by every server process on the machine.
    A file is replaced, never rewritten in place (core.shipped writes beside it and renames), so a mapping
    keeps the bytes it was read from; the digest is taken before and after, and a file that changed in
    between is read again from one copy of its bytes."""
    from core.model.checkpoints import read_checkpoint

    path = CHECKPOINT_DIR / file
    try:
        digest = file_digest(path)
    except OSError:
        return read_checkpoint(path)  # raises the CheckpointError that says why
    out = read_checkpoint(path, name=file, mmap=True)
    try:
        same = file_digest(path) == digest
    except OSError:
        same = False
    if not same:
        data = path.read_bytes()
        digest, out = hashlib.sha256(data).hexdigest(), read_checkpoint(data, name=file)
    _SHIPPED_DIGESTS[file] = digest
    return out


def _info_of(file: str) -> dict:
    return info_view(_load_shipped(file)[1])


@st.cache_data(show_spinner=False)
def _shipped_info(file: str, digest: str | None) -> dict:
    """The info of the file whose bytes have `digest`: shipped data (a view like the others, of no arguments),
    else read from the file."""
    if digest is None:  # a file that cannot be read: read_checkpoint says why
        return _info_of(file)
    return shipped_data.first(shipped_data.INFO, shipped_data.INFO_VERSION, file, digest, "[]", _info_of, (file,))


def shipped_digest(file: str) -> str | None:
    """sha256 of a shipped `file` (its shipped data names it): of the bytes the server's model
    was read from once it is loaded, else of the file as it is (read once, without loading it: a reader
    of shipped views needs no model); None when the file cannot be read. A file regenerated while a server
    runs (core.shipped, on a developer's machine) is a new digest after a restart."""
    if file not in _SHIPPED_DIGESTS:
        try:
            _SHIPPED_DIGESTS[file] = file_digest(CHECKPOINT_DIR / file)
        except OSError:
            return None
    return _SHIPPED_DIGESTS[file]


MARKOV_DIR = "markov"  # checkpoints/markov/: the Markov-chain runs, with their own manifest (core.training.markov)


def markov_files() -> list[dict]:
    """Manifest rows of the shipped Markov-chain checkpoints that exist, "file" relative to checkpoints/
    ("markov/markov-2block.pt"); their views are shipped data like shipped_files' (shipped_models has both)."""
    rows = [{**r, "file": f"{MARKOV_DIR}/{r['file']}"} for r in manifest_rows(MARKOV_DIR) if "file" in r]
    return [r for r in rows if (CHECKPOINT_DIR / r["file"]).is_file()]


def shipped_models() -> list[LabModel]:
    """The shipped checkpoints, none of them loaded (ShippedModel): the repeat task's, then the Markov runs."""
    return [ShippedModel(row["file"], f"{row.get('preset', row['file'])} (shipped)")
            for row in [*shipped_files(), *markov_files()]]


def session_models() -> dict[str, LabModel]:
    """This session's trained and uploaded models, by key."""
    return st.session_state.setdefault("lab_models", {})


def new_session_key() -> str:
    return f"session:{uuid.uuid4().hex}"


def add_session_model(model: TinyCharLM, info: dict, label: str, source: str, select: bool = True) -> LabModel:
    """Register a model in this session (and make it the picked one)."""
    return add_session_entry(LabModel(new_session_key(), label, model, info, source), select)


def add_session_entry(entry: LabModel, select: bool = True) -> LabModel:
    """Register an entry (a LabModel, or a TrainedModel not yet read) in this session (and pick it)."""
    session_models()[entry.key] = entry
    if select:
        st.session_state["picked_model"] = entry.key
    return entry


def pick_on_next_run(key: str) -> None:
    """Make `key` the picked model from the next script run on. Safe to call after the sidebar's
    selectbox exists in this run (setting "picked_model" directly then is a Streamlit error)."""
    st.session_state["pending_pick"] = key


def all_models() -> dict[str, LabModel]:
    models = {m.key: m for m in shipped_models()}
    models.update(session_models())
    return models


def selected_model() -> LabModel | None:
    """The model picked in the sidebar, or None when there is none."""
    models = all_models()
    if not models:
        return None
    key = st.session_state.get("picked_model")
    if key not in models:
        preferred = [k for k in models if DEFAULT_PRESET in k]
        key = preferred[0] if preferred else next(iter(models))
        st.session_state["picked_model"] = key
    return models[key]


def require_model() -> LabModel:
    """The picked model; stops the page with a message if there is none."""
    entry = selected_model()
    if entry is None:
        st.info("No model to analyse yet: train one on the **Train** page or upload a checkpoint in the sidebar.")
        st.stop()
    return entry


def _on_upload():
    upload = st.session_state.get("upload_checkpoint")
    if upload is None:
        return
    data = upload.getvalue()
    if len(data) > MAX_UPLOAD_MB * 2**20:
        st.session_state["upload_error"] = (
            f"{upload.name} is {len(data) / 2**20:.1f} MB; checkpoints here are at most {MAX_UPLOAD_MB} MB. "
            "Your current model is unchanged.")
        return
    from core.model.checkpoints import CheckpointError, read_checkpoint

    try:
        model, info = read_checkpoint(data, name=upload.name)
    except CheckpointError as e:
        st.session_state["upload_error"] = f"{e} Your current model is unchanged."
        return
    st.session_state.pop("upload_error", None)
    add_session_model(model, info, f"{upload.name} (uploaded)", "uploaded")


def model_summary(entry: LabModel) -> str:
    cfg, task = entry.info["config"], entry.info["task"]
    from core.training.overview import initial_embedding_label

    smeared = ", smeared keys" if getattr(cfg, "smeared_keys", False) else ""
    blocks = f"{cfg.n_layers} block{'s' if cfg.n_layers != 1 else ''} × {cfg.n_heads} heads"
    if task.name != "repeat":  # the repeat task's line also gives the bias, V and the initial embedding
        return f"{blocks}{smeared}, d_model {cfg.d_model}; {task.summary()}"
    bias = (", bias" if cfg.bias else "") + smeared
    return (f"{blocks}{bias}, d_model {cfg.d_model}, V={cfg.vocab_size}; {task.summary()}; "
            f"initial embedding {_start(initial_embedding_label(entry.info.get('train') or {}))}")


PICKER_CHARS = 30  # what the sidebar's picker shows whole: the rest of a model's label goes in its caption


def picker_label(entry: LabModel, models: dict[str, LabModel]) -> str:
    """The picker's short entry for a model: a shipped one's preset name, a trained one's number, seed and
    step, an upload's file name (shortened in the middle); its full label is the caption below the picker."""
    if entry.source == "shipped":
        return entry.label.removesuffix(" (shipped)")
    if entry.source == "trained":
        from core.training.config import TrainConfig

        train = entry.info.get("train") or {}
        n = 1 + [k for k, m in models.items() if m.source == "trained"].index(entry.key)
        step = entry.step if entry.step is not None else train.get("steps_done")
        at = f", step {step}" if step is not None else ""
        return f"trained #{n}, seed {TrainConfig.from_dict(train).seed}{at}"
    name, room = entry.label.removesuffix(" (uploaded)"), PICKER_CHARS - len(" (uploaded)")
    return f"{name if len(name) <= room else name[:room // 2] + '…' + name[1 - room // 2:]} (uploaded)"


def _start(label: str) -> str:
    return label if label in ("plain", "not stored") else f"enlarged ({label})"


def sidebar_picker() -> LabModel | None:
    """The sidebar shared by every page: pick the analysed model, or upload one."""
    with st.sidebar:
        st.markdown("### Model under study")
        models = all_models()
        pending = st.session_state.pop("pending_pick", None)
        if pending in models:
            st.session_state["picked_model"] = pending
        if models:
            selected_model()  # makes sure the picked key is valid
            keys = list(models)
            st.selectbox("Analyse", keys, key="picked_model", format_func=lambda k: picker_label(models[k], models),
                         help="Shipped checkpoints, models you trained in this session (#number, seed and last "
                              "step), and uploads; the full description is under the picker.")
            entry = models[st.session_state["picked_model"]]
            st.caption(f"**{entry.label}**: {model_summary(entry)}")
        else:
            entry = None
            st.caption("No model yet.")
        st.file_uploader("Upload a checkpoint (.pt)", type=["pt"], key="upload_checkpoint",
                         on_change=_on_upload,
                         help=f"A TinyCharLM file, format version 1 or 2, at most {MAX_UPLOAD_MB} MB.")
        if st.session_state.get("upload_error"):
            st.error(st.session_state["upload_error"])
    return entry


def require_heads(entry: LabModel, explanation: str) -> None:
    """Stop a heads-only page for a 0-block model: show `explanation` and point to the depth page."""
    if entry.info["config"].n_layers == 0:
        st.info(explanation)
        st.page_link("app_pages/depth.py", label="What depth can express", icon="🧱")
        st.stop()
