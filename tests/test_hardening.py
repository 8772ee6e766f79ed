"""Hardening through AppTest: every page survives the extremes of every widget it offers, the
models a student can make with those extremes, and bad uploads.

- Widget sweep: on each page every slider, select slider, number input, select box, radio, toggle,
  checkbox, multiselect and text field is set to its low end, its high end, two alternating mixes
  of the two, and its high end with empty text; each combination must render without an exception,
  and every text field left holding the long odd text or nothing gets a warning naming the problem.
  Widgets that appear only after a change are set in the next round.
- On the Train page each combination is also trained (or refused with a message), and the models
  trained at the extremes are then analysed on every page.
- Uploads: corrupt, foreign-pickle, version-3, wrong-shape, empty and oversized files each give a
  message in the sidebar and leave the picked model as it was; no pickled code ever runs.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest

from core.model.checkpoints import checkpoint_bytes
from core.model.config import ModelConfig
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.pool.status import RunStatus
from ui.pages import ALL_PAGES, HOME
from ui.state import MAX_UPLOAD_MB, _load_shipped, shipped_files

from helpers import bad_checkpoints, open_app

PAGES = [p.file for p in ALL_PAGES]
PAGE_IDS = [p.name for p in ALL_PAGES]
SKIP_KEYS = {"picked_model", "upload_checkpoint"}  # the sidebar picker and uploader: tested on their own
KINDS = ("slider", "select_slider", "number_input", "selectbox", "radio", "toggle", "checkbox", "multiselect",
         "text_input", "text_area")
ODD_TEXT = "ünïcødé ⟨?⟩ 🙂 " + "x" * 400  # long, non-ASCII, punctuation
UNBOUNDED = 10**9  # what a number input without a bound still lets a student type




@pytest.fixture(scope="module", autouse=True)
def shipped_models_stay_untouched():
    """The shipped models are one object per server (st.cache_resource), shared by every session:
    no page may change their weights or leave them in training mode. The objects the pages get are
    snapshotted before this module's tests and compared after them."""
    before = {}
    for row in shipped_files():
        shared, _ = _load_shipped(row["file"])
        before[row["file"]] = (shared, {k: v.clone() for k, v in shared.state_dict().items()})
    yield
    for file, (shared, weights) in before.items():
        assert _load_shipped(file)[0] is shared, f"{file}: the shared model was replaced"
        assert not shared.training, f"{file}: a page left the shared model in training mode"
        for name, value in weights.items():
            assert torch.equal(shared.state_dict()[name], value), f"{file}: a page changed {name}"


def open_page(page: str | None) -> AppTest:
    """open_app (tests/helpers.py) on `page`, with this module's stricter check."""
    at = open_app(page)
    check(at, page or "home")
    return at


def go(at: AppTest, page: str | None) -> None:
    """Switch to a page file, or to the home page (None), keeping the session."""
    at.switch_page(page or HOME.file)
    at.run()


def check(at: AppTest, where: str) -> None:
    assert not at.exception, f"{where}: {at.exception[0].message}\n{''.join(at.exception[0].stack_trace)}"
    assert at.title or at.header or at.subheader or at.info, f"{where}: the page drew nothing"


# ---------------------------------------------------------------------------------------------
# Setting widgets as the browser does (by the label it shows)


def _choose_labels(w, labels: list[str], array: bool) -> None:
    """Make the widget send `labels` (formatted option labels, as the frontend sends them)."""
    class Chosen(type(w)):
        @property
        def _widget_state(self):
            ws = WidgetState()
            ws.id = self.id
            if array:
                ws.string_array_value.data[:] = labels
            else:
                ws.string_value = labels[0]
            return ws

    w.__class__ = Chosen


def set_extreme(w, end: str) -> str:
    """Set widget `w` to its low ("lo") or high ("hi") end; returns what was set, for messages."""
    lo = end == "lo"
    kind = w.type
    if kind == "slider":
        v = w.min if lo else w.max
        if isinstance(w.value, (list, tuple)):  # a range slider: both ends at once
            v = (v, v)
        w.set_value(v)
    elif kind == "number_input":
        v = w.min if lo else w.max
        if v is None:
            v = -UNBOUNDED if lo else UNBOUNDED
        w.set_value(v)
    elif kind in ("selectbox", "radio"):
        if not w.options:
            return "(no options)"
        v = w.options[0 if lo else -1]
        _choose_labels(w, [v], array=False)
    elif kind == "select_slider":
        v = [w.options[0 if lo else -1]]
        if isinstance(w.value, (list, tuple)):
            v = v * 2
        _choose_labels(w, v, array=True)
    elif kind == "multiselect":
        v = [] if lo else list(w.options[: w.max_selections or None])
        _choose_labels(w, v, array=True)
    elif kind in ("toggle", "checkbox"):
        v = not lo
        w.set_value(v)
    elif kind in ("text_input", "text_area"):
        v = "" if lo else ODD_TEXT[: w.max_chars or None]
        w.set_value(v)
    else:
        raise AssertionError(f"no extreme for {kind}")
    return f"{w.label!r}={v!r}"[:120]


def widgets(at: AppTest) -> list:
    out = []
    for kind in KINDS:
        out += [w for w in getattr(at, kind) if w.key not in SKIP_KEYS and not getattr(w, "disabled", False)]
    return out


def sweep_combination(at: AppTest, page: str, combo: str, rounds: int = 3) -> list[str]:
    """Set every widget by `combo` ("lo", "hi", "mix": alternate, "xim": the other alternation,
    "hi-blank": high with empty text fields), run, and repeat for widgets that appeared; returns
    what was set."""
    done, log = set(), []
    for _ in range(rounds):
        todo = [w for w in widgets(at) if w.id not in done]
        if not todo:
            break
        for i, w in enumerate(todo):
            if combo == "hi-blank":  # everything high, but every text field left empty
                end = "lo" if w.type in ("text_input", "text_area") else "hi"
            else:
                end = combo if combo in ("lo", "hi") else ("lo" if (i % 2 == 0) == (combo == "mix") else "hi")
            log.append(set_extreme(w, end))
            done.add(w.id)
        at.run()
        check(at, f"{page} with {combo}: {'; '.join(log)}")
    check_text_messages(at, f"{page} with {combo}: {'; '.join(log)}")
    return log


# What a page must say about a text field it shows holding an extreme: ODD_TEXT is too long for every
# field here (and not all of it is symbols), an empty field has nothing to read.
TEXT_MESSAGES = {"odd": ("the limit here is", "keep it under", "no token"), "empty": ("at least", "is empty")}


def check_text_messages(at: AppTest, where: str) -> None:
    """Every text field the page shows at an extreme gets a warning that names the problem."""
    warnings = [w.value for w in at.warning]
    for w in [*at.text_input, *at.text_area]:
        if w.key in SKIP_KEYS or getattr(w, "disabled", False):
            continue
        kind = "empty" if w.value == "" else "odd" if w.value and ODD_TEXT.startswith(w.value) else None
        if kind is not None:
            assert any(p in x for x in warnings for p in TEXT_MESSAGES[kind]), \
                f"{where}: the field {w.label!r} holds {kind} text but no warning says so: {warnings}"


# ---------------------------------------------------------------------------------------------
# The sweep


ANALYSIS = [p for p in PAGES if p not in (HOME.file, "app_pages/train.py")]


@pytest.mark.parametrize("page", [p for p in PAGES if p != "app_pages/train.py"],
                         ids=[i for i in PAGE_IDS if i != "train"])
@pytest.mark.app
def test_every_widget_extreme_renders(page):
    at = open_page(page)
    for combo in ("lo", "hi", "mix", "xim", "hi-blank"):
        sweep_combination(at, page or "home", combo)


def train_here(at: AppTest, label: str) -> str | None:
    """Press Train with the settings set now: either it trains (then Stop, keeping the model) or the
    page says why not. Returns the picked model's key after Stop, or None when refused."""
    train = at.button(key="tr_train")
    if train.disabled:
        assert at.error, f"{label}: Train is disabled but no message says why"
        return None
    train.click().run()
    check(at, f"train with {label}")
    run = at.session_state.get("train_run", None)
    assert run is not None, f"{label}: Train made no run"
    deadline = time.monotonic() + 60  # the worker process trains on its own: wait for a first step
    while run.active and run.step == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        at.run()
        check(at, f"train with {label}")
    if run.status == RunStatus.DIVERGED:  # it may have diverged after the last draw: the next one must say so
        at.run()
        check(at, f"diverged with {label}")
        assert at.error, f"{label}: a diverged run must say so"
        return None
    if run.active:
        at.button(key="tr_stop").click().run()
        check(at, f"stop with {label}")
    deadline = time.monotonic() + 120  # a large step in progress finishes before Stop takes effect
    while run.active and time.monotonic() < deadline:
        assert at.button(key="tr_stop").disabled and any("Stopping" in i.value for i in at.info), label
        time.sleep(0.2)
        at.run()
        check(at, f"stopping with {label}")
    assert not run.active
    at.run()  # the pick happens on the run after Stop
    check(at, f"after stop with {label}")
    if run.status == RunStatus.DIVERGED:  # it may diverge after its first step too (a high learning rate)
        assert at.error, f"{label}: a diverged run must say so"
        return None
    assert run.registered_key, f"{label}: {run.status} at step {run.step} but no model was kept ({run.error})"
    return at.session_state["picked_model"]


@pytest.mark.app
def test_train_page_extremes_train_or_explain_then_every_page_takes_the_models():
    at = open_page("app_pages/train.py")
    trained = {}
    for combo in ("lo", "hi", "mix", "xim"):
        log = sweep_combination(at, "train", combo)
        key = train_here(at, f"{combo}: {'; '.join(log)}")
        if key:
            trained[combo] = key
        if "train_run" in at.session_state:
            at.button(key="tr_reset").click().run()
            check(at, "reset")
    assert trained, "no extreme combination of the Train page could train at all"
    # The models at the two ends (the mixes train models in between) on every page.
    for combo in ("lo", "hi"):
        if combo not in trained:
            continue
        for page in ANALYSIS + [None]:
            at.selectbox(key="picked_model").set_value(trained[combo])  # picked and switched to in one run
            go(at, page)
            check(at, f"{page or 'home'} with the model trained at {combo}")
            assert at.session_state["picked_model"] == trained[combo], f"{page}: the pick did not reach the page"
            assert page or at.title[0].value == "Attention Lab", "the home page did not open"


# ---------------------------------------------------------------------------------------------
# Uploads


def tiny_checkpoint(n_layers: int = 1, **cfg) -> bytes:
    model = TinyCharLM(ModelConfig(**{"vocab_size": 16, "d_model": 32, "n_heads": 4, "n_layers": n_layers, **cfg}))
    return checkpoint_bytes(model, task=TaskConfig(4, 8, 24))


def bad_files(marker: Path) -> dict[str, tuple[bytes, str]]:
    """The loader's bad files (tests/helpers.py), plus one over the upload size cap."""
    return bad_checkpoints(marker) | {"oversized": (b"\0" * (MAX_UPLOAD_MB * 2**20 + 1), "MB")}


def upload(at: AppTest, name: str, data: bytes) -> None:
    at.get("file_uploader")[0].set_value((name, data, "application/octet-stream"))
    at.run()


@pytest.mark.app
@pytest.mark.parametrize("page", ["dashboard.py", "app_pages/attention.py"])
def test_bad_uploads_get_a_message_and_keep_the_model(page, tmp_path):
    at = open_page(None if page == "dashboard.py" else page)
    upload(at, "mine.pt", tiny_checkpoint())
    check(at, "good upload")
    mine = at.session_state["picked_model"]
    assert at.session_state["lab_models"][mine].label == "mine.pt (uploaded)"
    marker = tmp_path / "pickle-ran-code"
    for name, (data, phrase) in bad_files(marker).items():
        upload(at, f"{name}.pt", data)
        check(at, f"upload of {name}")
        errors = [e.value for e in at.sidebar.error]
        assert errors and "unchanged" in errors[0] and phrase in errors[0], f"{name}: sidebar shows {errors}"
        assert at.session_state["picked_model"] == mine, f"{name}: the picked model changed"
        assert list(at.session_state["lab_models"]) == [mine], f"{name}: a model was added"
        assert not marker.exists(), f"{name}: loading ran code from the file"
    upload(at, "mine-again.pt", tiny_checkpoint(n_layers=2))
    check(at, "good upload after bad ones")
    assert not at.sidebar.error, "a good upload after a bad one still shows the old error"
    assert at.session_state["picked_model"] != mine


@pytest.mark.parametrize("page", ANALYSIS + [None],
                         ids=[p.split("/")[-1][:-3] if p else "home" for p in ANALYSIS + [None]])
@pytest.mark.app
def test_unusual_but_valid_uploads_render_on_every_page(page):
    """Valid files the pages did not ship with: one head, no blocks, bias, six blocks, a short task."""
    at = open_page(page)
    for name, data in {
        "one-head": tiny_checkpoint(n_layers=2, n_heads=1),
        "zero-blocks": tiny_checkpoint(n_layers=0),
        "bias": tiny_checkpoint(n_layers=1, bias=True),
        "six-blocks": tiny_checkpoint(n_layers=6, d_model=16),
    }.items():
        upload(at, f"{name}.pt", data)
        check(at, f"{page} with the upload {name}")
        assert not at.sidebar.error, f"{name}: {at.sidebar.error[0].value}"
