"""The training-step control on the Attention and Circuits pages (ui/steps.py): moving it changes
the numbers shown, and they equal a fresh computation on that snapshot's weights."""

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.model import symbols
from core.model.checkpoints import read_checkpoint
from core.model.snapshots import snapshot_model
from core.reading import analysis

from helpers import ROOT, open_app

TWO_BLOCK = "variable-period-2block.pt"



def page(name: str) -> AppTest:
    return open_app(name, TWO_BLOCK, timeout=90)


def early_step() -> tuple[int, object, object]:
    """The first snapshot after step 0, its model, and the task."""
    model, info = read_checkpoint(ROOT / "checkpoints" / TWO_BLOCK)
    snap = info["snapshots"][1]
    return snap["step"], snapshot_model(model, snap["state_dict"]), info["task"]


@pytest.mark.app
def test_attention_page_scores_are_the_snapshots():
    at = page("app_pages/attention.py")
    final = at.dataframe[0].value.copy()
    final_metrics = [m.value for m in at.metric]
    step, snap, task = early_step()
    at.select_slider(key="att_step").set_value(step).run()
    assert not at.exception, at.exception
    shown = at.dataframe[0].value
    period, seed = at.slider(key="att_period").value, at.number_input(key="att_seed").value
    fresh = analysis.task_sequence_view(snap, task, int(period), int(seed)).scores
    assert list(shown.columns)[0] == "label"  # the page shows the label, not the 0-based layer and head
    pd.testing.assert_frame_equal(shown.reset_index(drop=True),
                                  fresh.drop(columns=["layer", "head"]).reset_index(drop=True))
    assert not shown.equals(final)
    # the probe metrics below are the snapshot's too
    probe = analysis.probe_view(snap, task, int(at.slider(key="att_probe").value))["metrics"]
    assert [m.value for m in at.metric] == [f"{probe['acc_second_copy']:.2f}", f"{probe['acc_later_copies']:.2f}",
                                            f"{probe['loss_later_copies']:.2f}"]
    assert [m.value for m in at.metric] != final_metrics
    assert any(f"Training step {step}" in c.value for c in at.caption)


@pytest.mark.app
def test_circuits_page_numbers_are_the_snapshots():
    at = page("app_pages/circuits.py")
    final = {m.label: m.value for m in at.metric}
    step, snap, task = early_step()
    at.select_slider(key="cir_step").set_value(step).run()
    assert not at.exception, at.exception
    shown = {m.label: m.value for m in at.metric}
    layer, head = symbols.parse_head_label(at.selectbox(key="cir_head").value)
    hv = analysis.head_circuit_view(snap, task, layer, head)
    assert shown["diagonal on top (this head)"] == f"{hv.copy['ov_diag_top1']:.2f}"
    assert shown["eigenvalue copying score (this head)"] == f"{hv.copy['ov_copying_eig']:+.2f}"
    table = analysis.ablation_view(snap, task, {})
    assert shown["later-copy loss (nats)"] == f"{table.loc['loss_later_copies', 'ablated']:.3f}"
    assert shown != final
    # back to the final model: its numbers again
    at.select_slider(key="cir_step").set_value(-1).run()
    assert {m.label: m.value for m in at.metric} == final
