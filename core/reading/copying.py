"""What a head's OV circuit copies: the OV copying matrix, its diagonal and eigenvalue scores, and
the effective embedding a later block's heads actually read (docs/DESIGN.md "Metrics").

C = X W_V[h] W_O[h] W_E^T [V, V]: row = attended token a, column = boosted logit b. X is W_E, or
for a later block the effective embedding (what earlier blocks have made of each token's stream).

Centring. The softmax ignores a shift common to a row of logits, so a row-constant part of C (an
amount added to every logit whatever is attended) cannot change a prediction. The shared direction
of W_E puts a large one there; uncentred, the eigenvalue score of the shipped block-2 heads is
dominated by it. ov_copying_eig therefore scores C (I - 11^T/V), every row minus its mean.
A column-constant part 1 u^T (logit b boosted by u_b whatever token is attended) is not copying:
the centred eigenvalue score ignores it exactly, because eig(C (I - J)) = eig((I - J) C (I - J))
with J = 11^T/V idempotent, and (I - J) 1 = 0. The diagonal scores read C's rows as they are, so a
column-constant preference does lower them: they answer "is the attended token the logit this head
raises most", which such a preference really changes. Row centring leaves them unchanged.
"""
from __future__ import annotations

import pandas as pd
import torch

from core.model.symbols import ALL_HEADS, with_labels
from core.model.tinycharlm import TinyCharLM


@torch.no_grad()
def effective_embedding(model: TinyCharLM, layer: int, self_attention=None) -> torch.Tensor:
    """[V, D]: the stream each token carries into block `layer` if every earlier head looked at the
    token's own position: X_0 = W_E, X_{l+1} = X_l + sum_h s[l][h] (X_l W_V[h]) W_O[h] + biases.

    self_attention: None (s = 1: each earlier head attends only to itself -- exact at position 0,
    an approximation elsewhere), or the measured mean self-attention A[i, i] per [layer][head]
    (core.reading.heads "self"), which keeps only the part of each head's output that reads its own token
    (a previous-token head, looking at itself 1-2 % of the time, then adds almost nothing).
    b_V and b_O are added in full: with attention summing to 1 they do not depend on where it goes.

    Wang et al. (2022) read GPT-2's copy scores from W_E passed through the first MLP; here there is
    no MLP, and a block-1 head that attends to itself plays that role (a per-token map).
    """
    X = model.W_E
    for l, block in enumerate(model.blocks[:layer]):
        s = torch.ones(model.cfg.n_heads) if self_attention is None else torch.as_tensor(
            self_attention[l], dtype=X.dtype)
        out = torch.einsum("h,vd,hdk,hkm->vm", s, X, block.W_V, block.W_O)
        if model.cfg.bias:
            out = out + torch.einsum("hk,hkm->m", block.b_V, block.W_O) + block.b_O
        X = X + out
    return X


def block_ov(model: TinyCharLM, layer: int, head: int | None) -> torch.Tensor:
    """W_V W_O [D, D] of one head, or summed over the block's heads (head=None)."""
    b = model.blocks[layer]
    if head is None:
        return torch.einsum("hdk,hkm->dm", b.W_V, b.W_O)
    return b.W_V[head] @ b.W_O[head]


@torch.no_grad()
def ov_copying_matrix(model: TinyCharLM, layer: int, head: int | None = None, effective: bool = False,
                      self_attention=None) -> torch.Tensor:
    """C = X W_V W_O W_E^T: [V, V], row = attended token a, column = boosted logit b.

    head=None sums the OV circuits of all the block's heads. X = W_E, or with effective=True
    effective_embedding(model, layer, self_attention) (the same as W_E for block 1).
    """
    rows = effective_embedding(model, layer, self_attention) if effective else model.W_E
    return rows @ block_ov(model, layer, head) @ model.W_E.T


def centre_rows(C: torch.Tensor) -> torch.Tensor:
    """C (I - 11^T/V): every row minus its mean [V, V]."""
    return C - C.mean(-1, keepdim=True)


def ov_diag_top1(C: torch.Tensor) -> float:
    """Share of rows whose largest entry is on the diagonal (chance 1/V; row centring changes nothing)."""
    return float((C.argmax(-1) == torch.arange(C.shape[0])).float().mean())


def ov_diag_topk(C: torch.Tensor, k: int = 5) -> float:
    """Share of rows whose diagonal entry is among the row's k largest (chance k/V)."""
    k = min(k, C.shape[-1])
    top = C.topk(k, dim=-1).indices
    return float((top == torch.arange(C.shape[0])[:, None]).any(-1).float().mean())


def ov_copying_eig(C: torch.Tensor, centred: bool = True) -> float:
    """Re(sum of eigenvalues) / sum |eigenvalues| of C (I - 11^T/V) (of C itself with centred=False):
    +1 for pure copying, -1 for anti-copying."""
    C = C.detach().double()
    eig = torch.linalg.eigvals(centre_rows(C) if centred else C)
    total = eig.abs().sum()
    return float(eig.sum().real / total) if total > 0 else 0.0


def copying_scores(C: torch.Tensor) -> dict[str, float]:
    """ov_diag_top1, ov_diag_top5 and the centred ov_copying_eig of one copying matrix C [V, V]."""
    return {"ov_diag_top1": ov_diag_top1(C), "ov_diag_top5": ov_diag_topk(C, 5), "ov_copying_eig": ov_copying_eig(C)}


COPY_COLUMNS = ("ov_diag_top1", "ov_diag_top5", "ov_copying_eig")
EFFECTIVE_COLUMNS = ("ov_diag_top1_effective", "ov_copying_eig_effective")


@torch.no_grad()
def ov_copying_table(model: TinyCharLM, self_attention=None) -> pd.DataFrame:
    """One row per head, then one per block for the sum of its heads (head = "all", label "2.all").

    Columns: label, layer, head (core.model.symbols), ov_diag_top1, ov_diag_top5, ov_copying_eig (rows from W_E), and
    ov_diag_top1_effective, ov_copying_eig_effective (rows from effective_embedding(model, layer,
    self_attention); equal to the plain ones in block 1).
    """
    rows, E = [], model.W_E
    for layer in range(model.cfg.n_layers):
        X = effective_embedding(model, layer, self_attention)  # W_E itself for block 1
        for head in [*range(model.cfg.n_heads), None]:
            ov = block_ov(model, layer, head)
            C = E @ ov @ E.T
            Ce = X @ ov @ E.T if layer else C
            rows.append({"layer": layer, "head": ALL_HEADS if head is None else head,
                         **copying_scores(C), "ov_diag_top1_effective": ov_diag_top1(Ce),
                         "ov_copying_eig_effective": ov_copying_eig(Ce)})
    return with_labels(pd.DataFrame(rows, columns=["layer", "head", *COPY_COLUMNS, *EFFECTIVE_COLUMNS]))


@torch.no_grad()
def measured_self_attention(model: TinyCharLM, tokens: torch.Tensor, periods: torch.Tensor) -> list[list[float]]:
    """Each head's mean A[i, i] over i >= 1 on tokens [B, T]: [layer][head] (core.reading.heads "self")."""
    from core.reading.heads import head_scores

    _, cache = model.run_with_cache(tokens, per_head=False)
    return [head_scores(p, periods)["self"].tolist() for p in cache["pattern"]]
