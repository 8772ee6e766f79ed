"""The film strip's pin (ui/charts/timeline.py): the live strip's PNG tiles with queries pinned keep the pinned rows
as they were and dim exactly the others (blended towards white as the finished strip's opacity pins.DIM dims them on
white), and the finished strip's chart starts from the pin with its selection shared by every frame of both heads."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from ui.charts import pins, timeline
from ui.charts.kept import sent_form

from helpers import address, open_app, open_link, spec_params


def _strip(n: int = 12, frames: int = 3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    patterns = {}
    for name in ("previous-token", "induction"):
        P = rng.random((frames, n, n)) * np.tril(np.ones((n, n)))
        patterns[name] = (P / P.sum(-1, keepdims=True)).astype(np.float32)
    return {"patterns": patterns, "heads": {"previous-token": (0, 1), "induction": (1, 0)},
            "frames": [0, 50, 100][:frames], "tokens": rng.integers(0, 20, n).tolist(), "positions": n, "period": 4}


def _decoded(png: bytes, scale: int = 2) -> np.ndarray:
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return img[::scale, ::scale]  # one pixel per weight (each is a scale x scale square)


def test_live_tiles_with_a_pin_dim_exactly_the_other_rows():
    t = _strip()
    n = t["positions"]
    plain, pinned = timeline.strip_pngs(t), timeline.strip_pngs(t, (3, 8))
    assert plain.keys() == pinned.keys() and len(plain) == 2
    mark = np.array([int(timeline.MARK[i:i + 2], 16) for i in (1, 3, 5)])
    causal = np.tril(np.ones((n, n), bool))
    for label in plain:
        assert len(plain[label][0]) == len(pinned[label][0]) == 3
        for before_png, after_png in zip(plain[label][0], pinned[label][0]):
            before, after = _decoded(before_png), _decoded(after_png)
            assert before.shape == after.shape == (n, n, 3)
            for i in range(n):
                row = causal[i]
                if i in (3, 8):  # pinned: its cells as they were, its future marked
                    assert (after[i, row] == before[i, row]).all()
                    assert (after[i, ~row] == mark).all()
                else:  # dimmed towards white, the future left white
                    want = np.round(pins.DIM * before[i] + (1 - pins.DIM) * 255)
                    assert np.abs(after[i] - want).max() <= 1, i
                    assert (after[i, row] > before[i, row]).any() and (after[i, ~row] == 255).all()
    assert timeline.strip_pngs(t, ()) == plain and timeline.strip_pngs(t, (99,)) == plain  # off the strip: none


def test_a_tile_is_kept_per_content_and_pin():
    P = _strip()["patterns"]["induction"][0]
    assert timeline._tile_png(P, 2, (3,)) is timeline._tile_png(P.copy(), 2, (3,))
    assert timeline._tile_png(P, 2, (3,)) != timeline._tile_png(P, 2, (4,)) != timeline._tile_png(P, 2)



def test_the_finished_strip_starts_from_its_pin_and_names_the_tokens():
    t = _strip()
    spec = sent_form(timeline.strip.uncached(t, (5,)))
    text = json.dumps({k: v for k, v in spec.items() if k != "datasets"})
    assert spec["facet"]["row"]["field"] == "head" and spec["facet"]["column"]["field"] == "frame"
    pin = [p for p in spec_params(spec) if p.get("name") == pins.PIN]
    assert pin and all(p.get("value") == [{"query": 5}] for p in pin)  # one selection, shared by every panel
    from core.model.symbols import token_char
    assert f"'{token_char(t['tokens'][5])}'" in text and "query token" in text  # the tooltip's token lookup
    unpinned = sent_form(timeline.strip.uncached(t))
    assert all("value" not in p for p in spec_params(unpinned) if p.get("name") == pins.PIN)


def _live_picker_script():
    import streamlit as st

    from ui.timeline import live_pin_picker

    st.write(f"pin {list(live_pin_picker(64))}")


def test_the_live_picker_and_the_finished_strip_share_one_pin():
    """The live strip's picker starts from the film strips' pin (st.session_state[STRIP_PIN], which a click on the
    finished strip sets), and what it picks becomes that pin."""
    from streamlit.testing.v1 import AppTest

    from ui.timeline import LIVE_PICK, STRIP_PIN

    at = AppTest.from_function(_live_picker_script)
    at.session_state[STRIP_PIN] = [12, 80]  # 80: past this strip's 64 positions, not pinned here
    at.run()
    assert at.multiselect(key=LIVE_PICK).value == [12] and at.markdown[0].value == "pin [12]"
    at.multiselect(key=LIVE_PICK).set_value([30, 12]).run()
    assert at.session_state[STRIP_PIN] == [12, 30] and at.markdown[0].value == "pin [12, 30]"
    at.session_state[STRIP_PIN] = [5]  # a click on the finished strip
    at.run()
    assert at.multiselect(key=LIVE_PICK).value == [5] and at.markdown[0].value == "pin [5]"
    assert not at.exception


@pytest.mark.app
def test_the_train_pages_shipped_film_strip_starts_from_the_pin():
    from ui.timeline import STRIP_PIN

    at = open_app("app_pages/train.py", timeout=120)
    at.session_state[STRIP_PIN] = [12, 30]
    at.run()
    assert not at.exception, at.exception
    started = [p.get("value") for c in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart")
               for p in spec_params(c.proto.spec) if p.get("name") == pins.PIN and "facet" in c.proto.spec]
    assert started and all(v == [{"query": 12}, {"query": 30}] for v in started), started
    assert any(c.value.startswith("Pinned: query 12 (") and ", 30 (" in c.value for c in at.caption)


def test_an_exported_strip_shows_the_pin_the_browser_holds():
    """The strip's figure for the pin the browser reports (its selection, ui.charts.export) is the figure of the strip
    built pinned there: the other rows dimmed in every frame."""
    import re

    from ui.charts import export

    def svg(spec, **kwargs) -> str:
        return re.sub(r"gradient_\d+", "gradient", export.svg(spec, **kwargs).decode())

    t = _strip(n=8, frames=2)
    plain, pinned = sent_form(timeline.strip.uncached(t)), sent_form(timeline.strip.uncached(t, (5,)))
    chosen = svg(plain, selected={"pin": [{"query": 5}]})
    assert chosen == svg(pinned) and chosen != svg(plain)
    assert len(re.findall(rf'opacity="{pins.DIM:g}"', chosen)) > 0 == len(re.findall(rf'opacity="{pins.DIM:g}"',
                                                                                     svg(plain)))


@pytest.mark.app
def test_a_link_pins_the_train_pages_film_strips_and_the_address_keeps_the_pin():
    """The film strips' pin goes into links (ui/share.py PAGE_PARAMS["train"]): a link's pin starts the shipped
    run's strip pinned, and the address the page writes back still carries it."""
    from ui.timeline import STRIP_PIN

    at = open_link("app_pages/train.py", {"pin": "12,30"})
    assert at.session_state[STRIP_PIN] == [12, 30]
    assert address(at).get("pin") == "12,30", address(at)
    started = [p.get("value") for c in at.get("arrow_vega_lite_chart") + at.get("vega_lite_chart")
               for p in spec_params(c.proto.spec) if p.get("name") == pins.PIN and "facet" in c.proto.spec]
    assert started and all(v == [{"query": 12}, {"query": 30}] for v in started), started
    holds = [c.value for c in at.sidebar.caption]
    assert any("film strip's pinned queries" in c for c in holds), holds
