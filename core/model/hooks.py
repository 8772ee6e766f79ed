"""The intervention point's parts below the model (core.model.tinycharlm.TinyCharLM.run_with_hooks):
the hook points' names and shapes, Hooks (one run's edits and recorded activations), `attend` (the
lab's attention) and the held previous-token head (HoldPrevious, an edit on a pattern).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Hook points (TransformerLens names). Shapes for a run on streams [*, T, D] (* = any leading dims,
# e.g. [B] or a patch dim [G, B]):
#   hook_embed                   W_E[x]                                        [*, T, D]
#   blocks.{l}.hook_resid_pre    the stream entering block l                   [*, T, D]
#   blocks.{l}.attn.hook_q/k/v   per-head q, k, v before rotary (bias in)      [*, H, T, d_head]
#   blocks.{l}.attn.hook_smeared_k  k mixed with the previous position's k    [*, H, T, d_head]
#                                (smeared-key models only, before rotary: tinycharlm.smear_keys)
#   blocks.{l}.attn.hook_rot_q/k q, k after rotary                             [*, H, T, d_head]
#   blocks.{l}.attn.hook_pattern A (query i, key j), the hold applied          [*, H, T, T]
#   blocks.{l}.attn.hook_z       each head's mixed values A v                  [*, H, T, d_head]
#   blocks.{l}.attn.hook_result  each head's output z W_O[h] (no b_O)          [*, H, T, D]
#   blocks.{l}.hook_resid_post   the stream leaving block l                    [*, T, D]
#   hook_resid_final             the stream the unembedding reads              [*, T, D]
#   hook_logits                  logits                                        [*, T, V]

BLOCK_POINTS = ("hook_resid_pre", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q",
                "attn.hook_rot_k", "attn.hook_pattern", "attn.hook_z", "attn.hook_result", "hook_resid_post")

Edit = Callable[[torch.Tensor], torch.Tensor]


def hook_name(layer: int, point: str) -> str:
    """The name of a block's hook point: hook_name(1, "attn.hook_z") == "blocks.1.attn.hook_z"."""
    return f"blocks.{layer}.{point}"


SMEARED_POINT = "attn.hook_smeared_k"  # after hook_k in a model with smeared keys


def hook_points(n_layers: int, smeared_keys: bool = False) -> list[str]:
    """Every hook name of a model with n_layers blocks (and smeared keys or not), in the order a run meets them."""
    points = BLOCK_POINTS if not smeared_keys else \
        (*BLOCK_POINTS[:4], SMEARED_POINT, *BLOCK_POINTS[4:])
    return ["hook_embed", *(hook_name(l, p) for l in range(n_layers) for p in points),
            "hook_resid_final", "hook_logits"]


class Hooks:
    """One run's edits {name: fn(activation) -> activation} and the names it records (into .cache).

    Blocks compute on streams flattened to [N, T, D]; each edit sees, and the cache keeps, the
    activation with the run's leading dims `lead` restored (e.g. [G, B, H, T, T] for a pattern).
    An edit returns a tensor of the shape it was given; it may not write into its argument.
    """

    def __init__(self, edits: dict[str, Edit] | None = None, cache: Iterable[str] = (), lead: tuple | None = None):
        self.edits = dict(edits or {})
        self.names = frozenset(cache)
        self.lead = None if lead is None else tuple(lead)  # None: activations as the block computes them
        self.cache: dict[str, torch.Tensor] = {}
        self._touched = self.names | set(self.edits)

    def wants(self, name: str) -> bool:
        return name in self._touched

    def held(self, name: str) -> int | None:
        """The head a HoldPrevious edit at `name` (a hook_pattern) holds, when that is the whole of what
        this run does there (the fused paths then hold z instead of forming the pattern); else None."""
        edit = self.edits.get(name)
        return edit.head if isinstance(edit, HoldPrevious) and name not in self.names else None

    def fused(self, prefix: str) -> tuple[bool, int | None]:
        """Whether block `prefix` may run its fused path (nothing there edited or recorded but a held
        head), and the held head or None."""
        touched = [n for n in self._touched if n.startswith(prefix)]
        if not touched:
            return True, None
        hold = self.held(prefix + "attn.hook_pattern")
        return (True, hold) if hold is not None and len(touched) == 1 else (False, None)

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if name not in self._touched:
            return x
        y = x if self.lead is None else x.reshape(*self.lead, *x.shape[1:])
        if name in self.edits:
            y = self.edits[name](y)
        if name in self.names:
            self.cache[name] = y
        return y if self.lead is None else y.reshape(x.shape)


def eval_patterns(model, tokens: torch.Tensor, edits: dict | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(logits [B, T, V], every block's pattern [B, H, T, T]) of `model` on tokens in evaluation mode, without
    gradients and with `edits` (run_with_hooks's); the model's mode is left as it was. What a training log reads."""
    with torch.no_grad():
        was_training = model.training
        model.eval()
        names = [hook_name(layer, "attn.hook_pattern") for layer in range(model.cfg.n_layers)]
        logits, cache = model.run_with_hooks(tokens, edits=edits, cache=names)
        model.train(was_training)
    return logits, [cache[n] for n in names]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, edit_pattern: Edit | None = None) -> torch.Tensor:
    """The lab's causal softmax attention: rotated q, k and v [N, H, T, d_head] -> z = A v. Every hooked run
    and the eager training forward compute it; the compiled kernel (core.model.attention_cpp) computes the
    same where it is measured faster, and tests compare both.

    With edit_pattern None, SDPA's fused kernel (A never formed); otherwise A [N, H, T, T] is formed,
    passed through edit_pattern (the hold, edits, the cache) and z = edit_pattern(A) v.
    """
    if edit_pattern is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-1, -2)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    return edit_pattern(scores.masked_fill_(~mask, float("-inf")).softmax(-1)) @ v


# The held previous-token head (core.training.interventions): its pattern row i is one-hot on i-1 (row
# 0 on position 0). One edit, HoldPrevious, on a block's hook_pattern; where a run forms no pattern the
# same hold is applied to z (z_i = v_{i-1}, the same product: hold_z, and the compiled kernel's own);
# tests/test_hooks.py checks that the forms agree, with gradients.

def previous_token_pattern(T: int, device=None) -> torch.Tensor:
    """The held pattern [T, T]: row i one-hot on i-1, row 0 on position 0."""
    P = torch.zeros(T, T, device=device)
    P[0, 0] = 1.0
    P[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return P


def hold_pattern(pattern: torch.Tensor, head: int | None) -> torch.Tensor:
    """pattern [*, H, T, T] with head `head` held on the previous token (unchanged if None)."""
    if head is None:
        return pattern
    held = previous_token_pattern(pattern.shape[-1], pattern.device).to(pattern.dtype)
    return torch.cat([pattern[..., :head, :, :], held.expand_as(pattern[..., head:head + 1, :, :]),
                      pattern[..., head + 1:, :, :]], -3)


@dataclass(frozen=True)
class HoldPrevious:
    """The held previous-token head as an edit on a hook_pattern [*, H, T, T]: head `head`'s rows one-hot
    on the previous position. A held run's model keeps it as a standing edit (TinyCharLM.standing), so
    every run of that model, the training's included, makes it."""
    head: int

    def __call__(self, pattern: torch.Tensor) -> torch.Tensor:
        return hold_pattern(pattern, self.head)


def hold_z(z: torch.Tensor, v: torch.Tensor, head: int | None) -> torch.Tensor:
    """z [N, H, T, d_head] with head `head`'s mixed values those of the held pattern: v at i-1 (v_0 at 0).
    No in-place write: SDPA's backward keeps its output."""
    if head is None:
        return z
    held = torch.cat([v[:, head, :1], v[:, head, :-1]], 1)[:, None]
    return torch.cat([z[:, :head], held, z[:, head + 1:]], 1)
