"""Checks your answers in exercises/part1_attention.py: `python -m pytest exercises/test_part1_attention.py` from the
repository's root folder. Set ATTENTION_LAB_MODEL=path/to/model.pt to check on your own model (default:
checkpoints/variable-period-2block.pt)."""
import pytest
import torch

from exercises import checks
from exercises import part1_attention as mine
from exercises.catalogue import in_section

torch.set_num_threads(1)  # small tensors: one thread is faster, and fair to others on a shared machine


@pytest.mark.parametrize("name", [ex.name for ex in in_section("part1_attention")])
def test_exercise(name):
    verdict = checks.check(name, getattr(mine, name))
    if not verdict.ok:
        pytest.fail(verdict.message, pytrace=False)
