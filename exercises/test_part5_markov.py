"""Checks your answers in exercises/part5_markov.py: `python -m pytest exercises/test_part5_markov.py` from the
repository's root folder. Set ATTENTION_LAB_MODEL=path/to/model.pt to check on your own Markov-chain model
(default: checkpoints/markov/markov-2block.pt, also when the model set is one of the repeat task)."""
import pytest
import torch

from exercises import checks
from exercises import part5_markov as mine
from exercises.catalogue import in_section

torch.set_num_threads(1)  # small tensors: one thread is faster, and fair to others on a shared machine


@pytest.mark.parametrize("name", [ex.name for ex in in_section("part5_markov")])
def test_exercise(name):
    verdict = checks.check(name, getattr(mine, name))
    if not verdict.ok:
        pytest.fail(verdict.message, pytrace=False)
