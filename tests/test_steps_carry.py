"""ui/steps.py: a training step picked on one model does not silently apply to another model (issue 58). Another
run's snapshots are other weights, even where its steps share numbers, so the slider starts at the new model's
finished weights and its caption says which step was left behind."""

import pytest

from ui.model_keys import shipped_key
from ui.steps import FINAL

from helpers import ROOT, open_app

TWO, ONE = "variable-period-2block.pt", "variable-period-1block.pt"


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


@pytest.mark.app
def test_a_step_picked_on_one_model_does_not_carry_to_another():
    from core.model.checkpoints import read_checkpoint
    from ui.state import LabModel

    at = open_app("app_pages/attention.py", TWO, timeout=120)
    at.select_slider(key="att_step").set_value(210).run()
    assert "Training step 210" in captions(at)
    at.selectbox(key="picked_model").set_value(shipped_key(ONE)).run()  # its snapshots are every 50 steps
    assert not at.exception, at.exception
    assert at.select_slider(key="att_step").value == FINAL
    assert "step 210 was picked on the model you looked at before" in captions(at)
    # a session copy of the same run has step 210 too, and is still another model: the slider starts at FINAL
    model, info = read_checkpoint(ROOT / "checkpoints" / TWO)
    at.select_slider(key="att_step").set_value(100).run()
    at.session_state["lab_models"] = {"session:mine": LabModel("session:mine", "mine (uploaded)", model, info,
                                                               "uploaded")}
    at.session_state["pending_pick"] = "session:mine"
    at.run()
    assert at.select_slider(key="att_step").value == FINAL
    assert "step 100 was picked on the model you looked at before" in captions(at)
    # on the same model the step stays, run after run
    at.select_slider(key="att_step").set_value(210).run()
    at.run()
    assert at.select_slider(key="att_step").value == 210 and "Training step 210" in captions(at)
    assert "was picked on the model you looked at before" not in captions(at)
