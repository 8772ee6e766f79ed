"""TinyCharLM: an attention-only transformer with rotary embeddings and a tied unembedding.

Semantics (docs/DESIGN.md): residual stream h0 = W_E[x], no positional embedding; each block adds
sum_h (A_h v_h) W_O[h] (+ b_O) where A_h is a causal softmax over rotary-rotated q.k / sqrt(d_head);
logits = h_L W_E^T. No MLP, no LayerNorm. Parameters are stored in the per-head form used by files
and analysis (W_Q [H, D, d_head], W_O [H, d_head, D]); the training forward fuses them on the fly.

One intervention point (docs/DESIGN.md "The intervention point"): TinyCharLM.run_with_hooks takes edits
{hook name: fn(activation) -> activation} at TransformerLens-named activations (core.model.hooks), records
any of them, may start at a block from a given stream and stop at one, and takes any leading batch
dims (a patch dim G: streams [G, B, T, D] run G patches in one call). Ablation, the held head (kept
by the model as a standing edit, applied before a run's own), patching, path patching, noising,
attribution and the logit lens are all edits on it; the attention
is computed in `attend` (core.model.hooks), the one definition of the lab's attention. With nothing
edited or recorded and the compiled kernel measured faster here (core.model.attention), a block runs
the compiled path instead (one QKV product, then rotary, attention and the hold in C++ with a
hand-written backward), which is then the training forward; tests check it against `attend`.
A model with smeared keys (ModelConfig.smeared_keys, smear_keys) always trains on the hook points' path.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from core.model import attention
from core.model.attention import fused_qkv, project
from core.model.attention_cpp import causal_attention
from core.model.config import ModelConfig
from core.model.hooks import SMEARED_POINT, Edit, HoldPrevious, Hooks, attend, hold_z, hook_name, hook_points
from core.model.rope import apply_rope, rope_cos_sin


def smear_keys(k: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Olsson et al.'s (2022) smeared keys: k [N, H, T, d_head] -> k' with k'_j = sigma(a_h) k_j +
    (1 - sigma(a_h)) k_{j-1} for each head h (k'_0 = k_0), a [H] one trained scalar per head. Applied before
    rotary, so the mixed key is rotated at its own position j. a_h starts at 0 (sigma 0.5, an even mix; the
    paper's starting value was not found); sigma(a_h) = 1 is the plain key."""
    previous = torch.cat([k[..., :1, :], k[..., :-1, :]], -2)
    return k + (1 - torch.sigmoid(a).to(k.dtype))[:, None, None] * (previous - k)  # k'_0 = k_0 exactly


class AttentionBlock(nn.Module):
    """One attention-only block: n_heads heads, each q/k/v of width d_head, summed into the stream."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        H, D, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        self.cfg = cfg
        self.W_Q = nn.Parameter(torch.empty(H, D, dh))
        self.W_K = nn.Parameter(torch.empty(H, D, dh))
        self.W_V = nn.Parameter(torch.empty(H, D, dh))
        self.W_O = nn.Parameter(torch.empty(H, dh, D))
        if cfg.smeared_keys:
            self.smear = nn.Parameter(torch.zeros(H))  # a_h: see smear_keys
        if cfg.bias:
            self.b_Q = nn.Parameter(torch.zeros(H, dh))
            self.b_K = nn.Parameter(torch.zeros(H, dh))
            self.b_V = nn.Parameter(torch.zeros(H, dh))
            self.b_O = nn.Parameter(torch.zeros(D))

    def _project(self, h: torch.Tensor, embedded=None):
        """Fused projection: h [N, T, D] -> q, k, v each [N, H, T, d_head], before rotary (embedded: see
        core.model.attention.project)."""
        N, T, D = h.shape
        H, dh = self.cfg.n_heads, self.cfg.d_head
        W = torch.cat([self.W_Q, self.W_K, self.W_V], 0).permute(1, 0, 2).reshape(D, 3 * H * dh)
        b = torch.cat([self.b_Q, self.b_K, self.b_V], 0).reshape(-1) if self.cfg.bias else None
        return project(h, W, b, embedded).view(N, T, 3, H, dh).permute(2, 0, 3, 1, 4)

    def forward(self, h: torch.Tensor, hooks: Hooks | None = None, name: str = "",
                embedded: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """h [N, T, D] -> h + attention output [N, T, D]. `hooks` edit and record this block's hook
        points, named name + point (name = "blocks.{l}."). With none touched but a held head
        (Hooks.fused) and the compiled kernel chosen (core.model.attention.kernel_choice), the fused
        compiled path; else the hook points' own. embedded=(W_E, tokens) says h is W_E[tokens]: the
        projection is then taken over the vocabulary (core.model.attention.project), unless a hook
        touches this block."""
        fused, hold = (True, None) if hooks is None else hooks.fused(name)
        if fused and not self.cfg.smeared_keys and attention.compiled_trains(h, self.cfg.n_heads):
            return self._compiled(h, hold, embedded)
        return self._hooked(h, hooks if hooks is not None else Hooks(), name, embedded if fused else None)

    def _compiled(self, h: torch.Tensor, hold: int | None = None, embedded=None) -> torch.Tensor:
        """The same block through core.model.attention_cpp: one fused QKV product, then rotary, attention
        and the held head `hold` in the compiled kernel with its own backward."""
        c = self.cfg
        qkv = fused_qkv(h, self.W_Q, self.W_K, self.W_V, *((self.b_Q, self.b_K, self.b_V) if c.bias else ()),
                        embedded=embedded)
        cos, sin = rope_cos_sin(h.shape[1], c.d_head, c.rope_base, h.dtype)
        z = causal_attention(qkv, c.n_heads, cos, sin, hold)  # [N, T, H d_head]
        out = z @ self.W_O.reshape(-1, h.shape[-1])
        return h + (out + self.b_O if c.bias else out)

    def _hooked(self, h: torch.Tensor, hooks: Hooks, name: str, embedded=None) -> torch.Tensor:
        """The same block, per head, through its hook points. The pattern is formed only when it is edited
        (beyond a held head, which holds z instead) or recorded, each head's output only when hook_result is."""
        h = hooks(name + "hook_resid_pre", h)
        q, k, v = (hooks(f"{name}attn.hook_{n}", x) for n, x in zip("qkv", self._project(h, embedded)))
        if self.cfg.smeared_keys:
            k = hooks(name + SMEARED_POINT, smear_keys(k, self.smear))
        cos, sin = rope_cos_sin(h.shape[1], self.cfg.d_head, self.cfg.rope_base, h.dtype)
        q = hooks(name + "attn.hook_rot_q", apply_rope(q, cos, sin))
        k = hooks(name + "attn.hook_rot_k", apply_rope(k, cos, sin))
        pattern = name + "attn.hook_pattern"
        hold = hooks.held(pattern)
        if hold is not None:
            z = hold_z(attend(q, k, v), v, hold)
        elif hooks.wants(pattern):
            z = attend(q, k, v, lambda A: hooks(pattern, A))
        else:
            z = attend(q, k, v)
        z = hooks(name + "attn.hook_z", z)
        if hooks.wants(name + "attn.hook_result"):
            out = hooks(name + "attn.hook_result", torch.einsum("bhtd,hdm->bhtm", z, self.W_O)).sum(1)
            out = out + self.b_O if self.cfg.bias else out
        else:
            out = self._write(z)
        return hooks(name + "hook_resid_post", h + out)

    def _write(self, z: torch.Tensor) -> torch.Tensor:
        """Fused output of all heads: z [N, H, T, d_head] -> sum_h z_h W_O[h] (+ b_O), [N, T, D]."""
        N, H, T, dh = z.shape
        out = z.transpose(1, 2).reshape(N, T, H * dh) @ self.W_O.reshape(H * dh, -1)
        return out + self.b_O if self.cfg.bias else out

    def forward_with_cache(self, h: torch.Tensor):
        """This block alone with its pattern, v and per-head outputs recorded (the exercises use it).

        Returns (h_out [B, T, D], pattern [B, H, T, T], head_out [B, H, T, D], v [B, H, T, d_head]);
        head_out is each head's contribution (A_h v_h) W_O[h].
        """
        hooks = Hooks(cache=["attn.hook_pattern", "attn.hook_v", "attn.hook_result"])
        out = self(h, hooks)
        c = hooks.cache
        return out, c["attn.hook_pattern"], c["attn.hook_result"], c["attn.hook_v"]


def with_standing(standing: dict[str, Edit], edits: dict[str, Edit] | None) -> dict[str, Edit]:
    """A run's edits after the model's standing ones: where both edit a point, the run's edit sees the
    standing edit's result (a patch of a held model's pattern starts from the held pattern)."""
    out = dict(standing)
    for name, edit in (edits or {}).items():
        out[name] = edit if name not in standing else (lambda x, first=standing[name], then=edit: then(first(x)))
    return out


class TinyCharLM(nn.Module):
    """Attention-only character LM. model(tokens [B, T]) -> logits [B, T, V]."""

    def __init__(self, cfg: ModelConfig | None = None):
        super().__init__()
        self.cfg = cfg or ModelConfig()
        self.W_E = nn.Parameter(torch.empty(self.cfg.vocab_size, self.cfg.d_model))
        self.blocks = nn.ModuleList(AttentionBlock(self.cfg) for _ in range(self.cfg.n_layers))
        self.standing: dict[str, Edit] = {}  # edits every run of this model makes (hold_previous)
        self.reset_parameters()

    def hold_previous(self, head: int | None, layer: int = 0) -> None:
        """Hold (head None: release) a head's pattern on the previous position in every run of this
        model, as the standing edit HoldPrevious at blocks.{layer}.attn.hook_pattern. A training
        experiment (core.training.interventions): a held run's checkpoint records it, and reading the
        checkpoint holds it again."""
        name = hook_name(layer, "attn.hook_pattern")
        self.standing.pop(name, None)
        if head is not None:
            if not (0 <= layer < self.cfg.n_layers and 0 <= head < self.cfg.n_heads):
                raise ValueError(f"no head {head} in block {layer} of this model to hold.")
            self.standing[name] = HoldPrevious(int(head))

    @property
    def held_head(self) -> int | None:
        """The head of block 0 held on the previous position, or None."""
        edit = self.standing.get(hook_name(0, "attn.hook_pattern"))
        return edit.head if isinstance(edit, HoldPrevious) else None

    def reset_parameters(self, generator: torch.Generator | None = None):
        """Initialise so that the embedding has unit-scale rows and each block starts near identity.

        W_E ~ N(0, 1/D) gives rows of norm about 1 (logits start near uniform but not flat);
        W_Q, W_K, W_V ~ N(0, 1/D) keep q, k, v at unit scale; W_O ~ N(0, 1/(H d_head)) / sqrt(2 L)
        keeps the summed head outputs small next to the embedding at the start.
        """
        D, H, dh, L = self.cfg.d_model, self.cfg.n_heads, self.cfg.d_head, max(self.cfg.n_layers, 1)
        with torch.no_grad():
            self.W_E.normal_(0.0, D ** -0.5, generator=generator)
            for block in self.blocks:
                for W in (block.W_Q, block.W_K, block.W_V):
                    W.normal_(0.0, D ** -0.5, generator=generator)
                block.W_O.normal_(0.0, (H * dh) ** -0.5 / math.sqrt(2 * L), generator=generator)
                if self.cfg.smeared_keys:
                    block.smear.zero_()  # drawn from no generator: W_* are those of the plain model's seed
                if self.cfg.bias:
                    for b in (block.b_Q, block.b_K, block.b_V, block.b_O):
                        b.zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] (long) -> logits [B, T, V]. The training path: every block fused."""
        h = self.W_E[tokens]
        hooks = Hooks(self.standing) if self.standing else None
        for layer, block in enumerate(self.blocks):
            h = block(h, hooks, f"blocks.{layer}.", embedded=(self.W_E, tokens) if layer == 0 else None)
        return h @ self.W_E.T

    def run_with_hooks(self, tokens: torch.Tensor | None = None, *, edits: dict[str, Edit] | None = None,
                       cache: Iterable[str] = (), start: int = 0, resid: torch.Tensor | None = None,
                       stop: int | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The intervention point: (out, cache {name: activation}) for tokens [*, T] or, from block
        `start`, the stream resid [*, T, D] entering it (* = any leading dims, e.g. a patch dim [G, B]).

        edits {hook name: fn(activation) -> activation} (hook_points; shapes above) replace activations
        as the run meets them; `cache` names the activations to record (after any edit). out is the
        logits [*, T, V], or with stop=l the stream entering block l [*, T, D] (blocks from l not run;
        stop=n_layers: the final stream, before hook_resid_final).
        """
        L = self.cfg.n_layers
        end = L if stop is None else stop
        if (tokens is None) == (resid is None) or (resid is None and start):
            raise ValueError("give tokens (start=0) or the stream `resid` entering block `start`.")
        if not 0 <= start <= end <= L:
            raise ValueError(f"need 0 <= start <= stop <= {L}, got start={start}, stop={stop}.")
        cache = list(cache)
        unknown = (set(edits or {}) | set(cache)) - set(hook_points(L, self.cfg.smeared_keys))
        if unknown:
            raise ValueError(f"no hook point {', '.join(sorted(unknown))} in this model (see hook_points).")
        edits = with_standing(self.standing, edits)
        if resid is None:
            lead = tokens.shape[:-1]
            hooks = Hooks(edits, cache, lead)
            h = hooks("hook_embed", self.W_E[tokens.reshape(-1, tokens.shape[-1])])
        else:
            lead = resid.shape[:-2]
            hooks = Hooks(edits, cache, lead)
            h = resid.reshape(-1, *resid.shape[-2:])
        for layer in range(start, end):
            h = self.blocks[layer](h, hooks, f"blocks.{layer}.")
        if stop is not None:
            return h.reshape(*lead, *h.shape[1:]), hooks.cache
        h = hooks("hook_resid_final", h)
        logits = hooks("hook_logits", h @ self.W_E.T)
        return logits.reshape(*lead, *logits.shape[1:]), hooks.cache

    def run_with_cache(self, tokens: torch.Tensor, per_head: bool = True):
        """Same model, per head: returns (logits [B, T, V], cache), recorded through run_with_hooks.

        cache["resid"][l] is the stream entering block l ([B, T, D]; index n_layers is the final
        stream), cache["pattern"][l] is [B, H, T, T] (query i, key j), cache["head_out"][l] is
        [B, H, T, D] (None with per_head=False, for callers that need only patterns and logits) and
        cache["v"][l] is [B, H, T, d_head].
        """
        L = self.cfg.n_layers
        points = ["hook_resid_pre", "attn.hook_pattern", "attn.hook_v"] + (["attn.hook_result"] if per_head else [])
        logits, c = self.run_with_hooks(tokens, cache=[hook_name(l, p) for l in range(L) for p in points]
                                        + ["hook_resid_final"])
        return logits, {
            "resid": [c[hook_name(l, "hook_resid_pre")] for l in range(L)] + [c["hook_resid_final"]],
            "pattern": [c[hook_name(l, "attn.hook_pattern")] for l in range(L)],
            "head_out": [c.get(hook_name(l, "attn.hook_result")) for l in range(L)],
            "v": [c[hook_name(l, "attn.hook_v")] for l in range(L)],
        }

    @property
    def d_head(self) -> int:
        return self.cfg.d_head
