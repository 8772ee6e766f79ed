"""The repeated-sequence sampler and the copy masks (docs/DESIGN.md "The task")."""
from __future__ import annotations

import pytest
import torch

from core.model.task import TaskConfig, copy_masks, sample_batch


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _chi_square(counts: torch.Tensor) -> float:
    expected = counts.sum() / counts.numel()
    return float(((counts - expected) ** 2 / expected).sum())


def test_periods_cover_the_range_uniformly():
    task = TaskConfig(period_min=16, period_max=32, seq_len=96)
    _, periods = sample_batch(task, 17_000, vocab_size=64, generator=_gen(1))
    assert periods.shape == (17_000,) and periods.dtype == torch.long
    assert int(periods.min()) == 16 and int(periods.max()) == 32
    counts = torch.bincount(periods - 16, minlength=17).double()
    assert counts.numel() == 17
    # 16 degrees of freedom: the 99.9th percentile is 39.3; a skew of a few percent gives > 100
    assert _chi_square(counts) < 45


def test_pattern_tokens_are_uniform_over_the_vocabulary():
    tokens, _ = sample_batch(TaskConfig(8, 8, 16), 4000, vocab_size=10, generator=_gen(2))
    first_copies = tokens[:, :8].reshape(-1)
    assert int(first_copies.min()) == 0 and int(first_copies.max()) == 9
    assert _chi_square(torch.bincount(first_copies, minlength=10).double()) < 35  # 9 dof, 99.99th pct 33.7


def test_sequences_are_exact_repeats_of_their_first_period():
    task = TaskConfig(period_min=5, period_max=20, seq_len=60)
    tokens, periods = sample_batch(task, 300, vocab_size=7, generator=_gen(3))
    assert tokens.shape == (300, 60) and tokens.dtype == torch.long
    for row, L in zip(tokens, periods.tolist()):
        assert torch.equal(row[L:], row[:-L])  # x[t] == x[t - L] for every t >= L
    # the first copy is a random pattern, not a constant run
    assert all(len(set(row[:L].tolist())) > 1 for row, L in zip(tokens, periods.tolist()) if L >= 10)


def test_fixed_period_probe():
    task = TaskConfig(period_min=32, period_max=32, seq_len=96)
    tokens, periods = sample_batch(task, 50, vocab_size=64, generator=_gen(4), period=24)
    assert torch.equal(periods, torch.full((50,), 24))
    assert torch.equal(tokens[:, 24:], tokens[:, :-24])
    assert not torch.equal(tokens[:, 32:], tokens[:, :-32])  # the training period is not used
    for bad in (0, 96):
        with pytest.raises(ValueError, match="probe period"):
            sample_batch(task, 2, 64, period=bad)


def test_sampling_is_seeded():
    task = TaskConfig()
    a = sample_batch(task, 8, 64, generator=_gen(5))
    b = sample_batch(task, 8, 64, generator=_gen(5))
    c = sample_batch(task, 8, 64, generator=_gen(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize(
    "task, vocab, batch, words",
    [
        (TaskConfig(period_min=40, period_max=32), 64, 4, ["period_min", "period_max", "lower", "raise"]),
        (TaskConfig(period_min=16, period_max=32, seq_len=63), 64, 4, ["seq_len", "64", "period_max", "31"]),
        (TaskConfig(period_min=16, period_max=60, seq_len=96), 64, 4, ["second copy", "120", "48"]),
        (TaskConfig(), 1, 4, ["vocab_size", "at least 2"]),
        (TaskConfig(period_min=0, period_max=8, seq_len=24), 64, 4, ["period_min", "at least 1"]),
        (TaskConfig(), 64, 0, ["batch_size", "at least 1"]),
    ],
    ids=["min-above-max", "no-second-copy", "period-max-too-long", "vocab-1", "period-min-0", "batch-0"],
)
def test_impossible_tasks_are_refused_saying_what_to_change(task, vocab, batch, words):
    with pytest.raises(ValueError) as err:
        sample_batch(task, batch, vocab)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_second_copy_that_just_fits_is_allowed():
    tokens, periods = sample_batch(TaskConfig(period_min=32, period_max=32, seq_len=64), 3, 64)
    assert tokens.shape == (3, 64) and torch.equal(tokens[:, 32:], tokens[:, :32])


def test_copy_masks_partition_the_targets():
    T = 96
    periods = torch.tensor([16, 23, 32, 47])
    masks = copy_masks(periods, T)
    assert set(masks) == {"first", "second", "later"}
    for name, mask in masks.items():
        assert mask.shape == (4, T - 1) and mask.dtype == torch.bool, name
    for b, L in enumerate(periods.tolist()):
        for col in range(T - 1):
            t = col + 1  # mask column col is the target x_t, predicted at position t-1
            assert masks["first"][b, col] == (t < L)
            assert masks["second"][b, col] == (L <= t < 2 * L)
            assert masks["later"][b, col] == (t >= L)
    # first and later copies split every target; the second copy is the start of the later copies
    assert torch.all(masks["first"] ^ masks["later"])
    assert torch.all(~masks["second"] | masks["later"])
    assert masks["first"][0].sum() == 15 and masks["second"][0].sum() == 16 and masks["later"][0].sum() == 80


def test_sequence_length_above_the_limit_is_refused_with_what_to_do():
    from core.model.task import MAX_SEQ_LEN

    with pytest.raises(ValueError, match="lower it"):
        TaskConfig(period_min=16, period_max=32, seq_len=MAX_SEQ_LEN + 1).validate(64)
    TaskConfig(period_min=16, period_max=32, seq_len=MAX_SEQ_LEN).validate(64)
