"""Experiments on the training itself (in the spirit of Singh et al., 2024, who clamp parts of the
induction circuit and watch the phase change move). Set by TrainConfig's head fields, each a head label as the pages
write it ("1.2": block 1, head 2, counted from 1) or None (off).

The hold is a held previous-token pattern on one block-1 head, the counterpart of their code's
`opto_prev_token_heads` option (one head's pattern set on the previous token). It is not their "layer 1
clamp": that one (their code's `perfect_prev_token_input`) replaces block 1 as a whole, computing layer 2's
patterns from a residual stream that holds each position's previous token's embedding, and its values
from the embeddings alone, so no block-1 head computes anything. Here the other block-1 heads, and the
held head's values and output, still train. The clamp is the counterpart of their
`opto_induction_heads` (one layer-2 head given the ideal induction pattern).

- hold = "1.h": block 1's head h has its attention pattern held on the previous position
  (row i one-hot on i-1, row 0 on itself) for the whole run; its W_V and W_O train as usual, its
  W_Q and W_K get no gradient. The hold is a change to the head's computation, not to its weights: a
  softmax head never puts exactly all of its attention on one key, so no weights would reproduce it.
  It is an edit like any other, core.model.hooks.HoldPrevious on blocks.0.attn.hook_pattern, which the
  model keeps as a standing edit (TinyCharLM.hold_previous) so that every run of it, the training
  forward's included, makes it; the fused paths hold z instead of forming the pattern (hooks.hold_z,
  and the compiled attention's own). As in Singh
  et al.'s code (one clamped forward for training and evaluation), the hold stays part of the model:
  the checkpoint's train entry records the hold, read_checkpoint and snapshot_model restore it,
  and the history rows, the Train page's banner, the timeline and every other page measure that same
  held model. `release` switches it off, for comparing with the weights alone.
- clamp = "2.h": the induction clamp. Block 2's head h has its pattern replaced by the ideal
  induction pattern of the tokens in every forward the Trainer runs (training steps, logs, stop checks; the
  sweeps' measurements): row i uniform over the positions right after an earlier occurrence of token i
  (core.reading.detectors' induction mask), a row with no earlier occurrence on i itself (the hold's choice
  for row 0). Singh et al. (2024; their code's `opto_induction_heads`) clamp one layer-2 head's pattern at
  the query, where their task always has one match; here every position is a target, so every row is
  clamped and the head's W_Q and W_K get no gradient. The pattern depends on the tokens, so it is not part
  of the model: it is an edit at blocks.1.attn.hook_pattern (TinyCharLM.run_with_hooks, differentiable),
  applied by the Trainer (`Trainer.logits`). The checkpoint's train entry records the field, but a saved
  model computes its own pattern for that head (read_checkpoint does not restore the clamp), so the pages
  measure the weights alone; `describe` says so.
- knockout = "b.h": that head's W_O starts at zero and its gradient is masked to zero
  every step, so it writes nothing for the whole run (AdamW with a zero gradient and zero weights
  leaves them zero). The knockout is in the weights, so the saved model keeps it.
- Plain against enlarged initial embedding is embed_scale = 1, embed_shared = 0 (no new field).

Torch is imported by the functions that use it (core/model/lazy.py): a page reads the rest without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from core.model.config import ModelConfig
from core.model.lazy import no_grad
from core.reading.detectors import detector_mask
from core.training.config import TrainConfig

if TYPE_CHECKING:
    import torch

    from core.model.tinycharlm import TinyCharLM


def check_interventions(model_cfg: ModelConfig, train) -> None:
    """ValueError (one sentence) when an experiment names a head the model does not have."""
    H, L = model_cfg.n_heads, model_cfg.n_layers
    hold, knock, clamp = train.head("hold"), train.head("knockout"), train.head("clamp")
    if hold is not None and not (hold[0] == 0 and L >= 1 and 0 <= hold[1] < H):
        raise ValueError(f"the held head {train.hold} is not a head of block 1 of this model "
                         f"({L} blocks of {H} heads).")
    if knock is not None and not (0 <= knock[0] < L and 0 <= knock[1] < H):
        raise ValueError(f"the knocked-out head {train.knockout} is not in this model "
                         f"({L} blocks of {H} heads).")
    if knock is not None and knock == hold:
        raise ValueError("the held head and the knocked-out head must differ.")
    if clamp is not None and not (clamp[0] == 1 and L >= 2 and 0 <= clamp[1] < H):
        raise ValueError(f"the clamped head {train.clamp} is not a head of block 2 of this model "
                         f"({L} blocks of {H} heads).")
    if clamp is not None and knock == clamp:
        raise ValueError("the clamped head and the knocked-out head must differ.")


@no_grad
def apply_interventions(model: TinyCharLM, train) -> list[tuple[torch.nn.Parameter, torch.Tensor]]:
    """Set up the experiments on a freshly initialised model; returns (parameter, gradient mask)
    pairs the trainer multiplies into the gradients before every optimizer step."""
    import torch

    frozen = []
    if train.hold is not None:
        model.hold_previous(train.head("hold")[1])
    if train.knockout is not None:
        layer, h = train.head("knockout")
        block = model.blocks[layer]
        block.W_O[h] = 0.0
        mask = torch.ones_like(block.W_O)
        mask[h] = 0.0
        frozen.append((block.W_O, mask))
    return frozen


def induction_pattern(tokens: torch.Tensor) -> torch.Tensor:
    """The ideal induction pattern [*, T, T] (float32) of token sequences [*, T]: row i uniform over the keys
    j <= i with token j-1 == token i; a row with no such key (no earlier occurrence) one-hot on i."""
    import torch

    mask = detector_mask("induction", tokens).float()
    none = mask.sum(-1) == 0
    mask = mask + torch.diag_embed(none.float())
    return mask / mask.sum(-1, keepdim=True)


def clamp_edits(train, tokens: torch.Tensor) -> dict:
    """The edits of the induction clamp on a run of `tokens` [*, T] (run_with_hooks's `edits`); {} when off."""
    import torch

    if train.clamp is None:
        return {}
    head = train.head("clamp")[1]
    ideal = induction_pattern(tokens)

    def clamp(pattern: torch.Tensor) -> torch.Tensor:  # [*, H, T, T]
        held = ideal.to(pattern.dtype).unsqueeze(-3)
        return torch.cat([pattern[..., :head, :, :], held, pattern[..., head + 1:, :, :]], -3)

    return {"blocks.1.attn.hook_pattern": clamp}


def release(model: TinyCharLM) -> TinyCharLM:
    """The model as its weights alone compute it: any held pattern switched off (in place). Not the
    model a held run keeps (that one keeps the hold); for comparing the two."""
    for layer in range(model.cfg.n_layers):
        model.hold_previous(None, layer)
    return model


def describe(train: dict | None) -> str | None:
    """One line naming the experiments in a stored train entry (a checkpoint's, of any age), or None."""
    if not train:
        return None
    cfg = TrainConfig.from_dict(train)
    parts = []
    if cfg.hold is not None:
        parts.append(f"head {cfg.hold} held as a previous-token head")
    if cfg.clamp is not None:
        parts.append(f"head {cfg.clamp} clamped to the ideal induction pattern "
                     "while it trained (the saved weights compute without the clamp)")
    if cfg.knockout is not None:
        parts.append(f"head {cfg.knockout} knocked out")
    if train.get("embed_scale") == 1.0 and train.get("embed_shared") == 0.0:
        parts.append("plain initial embedding")
    return "; ".join(parts) or None
