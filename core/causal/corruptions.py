"""The corrupted runs of activation patching: what the clean task sequences are compared with.

- "first-copy": positions 0..L-1 replaced by a fresh random pattern; a second-copy target can no
  longer be read from the context, but what sits at the second-copy positions is unchanged.
- "resample": the donor is another task sequence of the same period (Heimersheim & Nanda, 2024), so
  every position is drawn afresh, the queries' own tokens included (equal to the clean token only by chance).
- "another-chain" (the Markov-chain task, core.model.markov): the donor is a sequence of the same length
  drawn from another chain, a transition table drawn afresh from the same prior; every position is drawn
  afresh, as in "resample". The corrupted run's context holds another chain's transition counts, so a
  model that counts in context predicts that chain's next tokens, not the clean one's.
"""
from __future__ import annotations

import torch

from core.model.task import TaskConfig


def corrupt(tokens: torch.Tensor, periods: torch.Tensor, vocab_size: int,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """tokens [B, T] -> the same with positions 0..L-1 of each row replaced by a fresh random pattern."""
    fresh = torch.randint(0, vocab_size, tokens.shape, generator=generator)
    first = torch.arange(tokens.shape[1])[None, :] < periods[:, None]
    return torch.where(first, fresh, tokens)


CORRUPTIONS = TaskConfig.corruptions  # the repeat task's: ("first-copy", "resample")


def resample(tokens: torch.Tensor, periods: torch.Tensor, vocab_size: int,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """The resample donor (Heimersheim & Nanda, 2024): for each row, another task sequence of the same
    period L, a fresh random pattern of length L repeated over the whole row. Every position differs
    from the clean run (except where the two patterns agree by chance), the second copy included."""
    patterns = torch.randint(0, vocab_size, (tokens.shape[0], int(periods.max())), generator=generator)
    return patterns.gather(1, torch.arange(tokens.shape[1])[None, :] % periods[:, None])


def corrupted_tokens(tokens: torch.Tensor, periods: torch.Tensor, vocab_size: int, corruption: str,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """The corrupted run of `corruption`: "first-copy" (corrupt) or "resample" (resample)."""
    if corruption == "first-copy":
        return corrupt(tokens, periods, vocab_size, generator)
    if corruption == "resample":
        return resample(tokens, periods, vocab_size, generator)
    raise ValueError(f"corruption must be one of {', '.join(CORRUPTIONS)}, got {corruption!r}.")


def another_chain(tokens: torch.Tensor, task, generator: torch.Generator | None = None) -> torch.Tensor:
    """The "another-chain" donor of Markov-chain sequences tokens [B, T]: for each row a sequence of the
    same length from a freshly drawn chain of the same task (core.model.markov.MarkovTask)."""
    from core.model.markov import sample_markov

    if tokens.dim() != 2 or tokens.shape[1] != task.seq_len:
        raise ValueError(f"tokens must be [B, {task.seq_len}] sequences of this task, got {tuple(tokens.shape)}.")
    return sample_markov(task, tokens.shape[0], generator)[0]
