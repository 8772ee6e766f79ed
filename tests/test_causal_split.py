"""The Causal page computes its experiments in two views (ui/causal_sections.py): everything but the position
sweeps first (section 1 is drawn from it), then the sweeps (sections 2-3). Together they must give what
core.causal.experiments computes in one go, and a reading the page takes before the sweeps must not need them."""
from __future__ import annotations

import re
from dataclasses import fields, replace

import numpy as np
import pandas as pd
import pytest
import torch

from core.causal import experiments, readings
from core.model.checkpoints import read_checkpoint
from core.model.config import ModelConfig
from core.model.symbols import encode_text
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM

from helpers import ROOT


def same(a, b) -> bool:
    """Equal values of an Experiments field or a reading: frames, series and arrays to float tolerance (NaN = NaN)."""
    if isinstance(a, pd.DataFrame | pd.Series):
        try:
            (pd.testing.assert_frame_equal if isinstance(a, pd.DataFrame) else pd.testing.assert_series_equal)(a, b)
        except AssertionError:
            return False
        return True
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.allclose(a, b, equal_nan=True)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (np.isnan(a) and np.isnan(b))
    return a == b


def tiny():
    torch.manual_seed(0)
    model = TinyCharLM(ModelConfig(n_layers=2, d_model=32, n_heads=2, vocab_size=16)).eval()
    return model, TaskConfig(period_min=4, period_max=6, seq_len=16)


@pytest.mark.parametrize("corruption", ["first-copy", "resample"])
@pytest.mark.parametrize("research", [False, True])
def test_the_two_parts_together_are_the_experiments_in_one_go(corruption, research):
    model, task = tiny()
    whole = experiments.task_experiments(model, task, 5, 4, 3, True, corruption=corruption, research=research)
    first = experiments.task_experiments(model, task, 5, 4, 3, False, corruption=corruption, research=research)
    assert all(getattr(first, f) is None for f in experiments.SWEEP_FIELDS)
    sweeps = experiments.task_sweeps(model, task, 5, 4, 3, True, corruption=corruption, research=research)
    assert set(sweeps) == set(experiments.SWEEP_FIELDS) and sweeps["resid"].shape == (2, 10)
    joined = replace(first, **sweeps)
    for f in fields(whole):
        assert same(getattr(joined, f.name), getattr(whole, f.name)), f.name


def test_the_typed_text_parts_too_and_the_budget_leaves_the_sweeps_out():
    model, task = tiny()
    tokens = encode_text("abcdeabcde", 16)
    whole = experiments.text_experiments(model, tokens, 4, 1, True)
    joined = replace(experiments.text_experiments(model, tokens, 4, 1, False),
                     **experiments.text_sweeps(model, tokens, 4, 1, True))
    assert joined.typed and all(same(getattr(joined, f.name), getattr(whole, f.name)) for f in fields(whole))
    over = experiments.task_sweeps(model, task, 5, 4, 0, None, budget=whole.position_cost - 1)
    assert over == dict.fromkeys(experiments.SWEEP_FIELDS)
    assert experiments.task_sweeps(model, task, 5, 4, 0, None, budget=whole.position_cost)["resid"] is not None


def test_only_the_sweep_readings_read_the_sweeps():
    """Every reading the page takes (read("...") in app_pages/causal.py and ui/causal_sections.py) gives the same
    without the sweeps unless ui.causal_sections.SWEEP_READINGS names it: those wait for the sweeps; the others
    are drawn before them. On the shipped 2-block model, researcher view, 8 sequences."""
    from ui.causal_sections import SWEEP_READINGS

    source = "".join((ROOT / f).read_text() for f in ("app_pages/causal.py", "ui/causal_sections.py"))
    names = set(re.findall(r'\bread\("(\w+)"\)', source))
    assert names >= SWEEP_READINGS and len(names) >= 8
    model, info = read_checkpoint(ROOT / "checkpoints" / "variable-period-2block.pt")
    first = experiments.task_experiments(model, info["task"], 24, 8, 0, False)
    joined = replace(first, **experiments.task_sweeps(model, info["task"], 24, 8, 0, True))
    differ = {n for n in names if not same(getattr(readings, n)(first), getattr(readings, n)(joined))}
    assert differ <= SWEEP_READINGS, f"these readings need the sweeps: {differ - SWEEP_READINGS}"
    assert differ, "no reading changed with the sweeps: the check saw nothing"


@pytest.mark.parametrize("corruption", ["first-copy", "resample"])
@torch.no_grad()
def test_the_sweeps_shortcuts_match_one_run_per_position(corruption):
    """patching's sweeps leave out the positions where a patch changes nothing (the same stream in both runs, or
    past the last scored position) and read the last block's head patches off one unembedding: each cell must
    still be what one patched run through the model gives."""
    from core.causal import patching

    model, task = tiny()
    runs = patching.task_runs(model, task, 4, 2, 5, corruption)
    T, L, H = runs.clean.shape[1], model.cfg.n_layers, model.cfg.n_heads
    tol = 2e-6 / abs(runs.m_clean - runs.m_corrupted)  # float32 noise of M (a few 1e-7 nats), as an effect

    def effect(stream, start):
        logits, _ = model.run_with_hooks(resid=stream, start=start)
        return float(runs.effect(float(patching.metric(logits, runs.clean, runs.periods))))

    resid, noised = patching.resid_patch_effects(model, runs), patching.resid_patch_effects(model, runs, True)
    heads = patching.head_position_effects(model, runs)
    for p in range(T):
        for layer in range(L):
            clean, corr = runs.clean_cache["resid"][layer].clone(), runs.corrupted_cache["resid"][layer].clone()
            one, other = corr.clone(), clean.clone()
            one[:, p], other[:, p] = clean[:, p], corr[:, p]
            assert resid[layer, p] == pytest.approx(effect(one, layer), abs=tol), (layer, p)
            assert noised[layer, p] == pytest.approx(effect(other, layer), abs=tol), (layer, p)
            delta = runs.clean_cache["head_out"][layer] - runs.corrupted_cache["head_out"][layer]
            for hd in range(H):
                stream = runs.corrupted_cache["resid"][layer + 1].clone()
                stream[:, p] += delta[:, hd, p]
                assert heads[layer, hd, p] == pytest.approx(effect(stream, layer + 1), abs=tol), (layer, hd, p)
    if corruption == "first-copy":  # the embeddings past the first copy are the same: nothing to restore there
        assert (resid[0, 5:] == 0).all() and (noised[0, 5:] == 1).all()
