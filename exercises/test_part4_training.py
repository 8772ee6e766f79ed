"""Checks your answers in exercises/part4_training.py: `python -m pytest exercises/test_part4_training.py` from the
repository's root folder. Set ATTENTION_LAB_MODEL=path/to/model.pt to check on your own model (default:
checkpoints/variable-period-2block.pt)."""
import pytest
import torch

from exercises import checks
from exercises import part4_training as mine
from exercises.catalogue import in_section

torch.set_num_threads(1)  # small tensors: one thread is faster, and fair to others on a shared machine


@pytest.mark.parametrize("name", [ex.name for ex in in_section("part4_training")])
def test_exercise(name):
    verdict = checks.check(name, getattr(mine, name))
    if not verdict.ok:
        pytest.fail(verdict.message, pytrace=False)
