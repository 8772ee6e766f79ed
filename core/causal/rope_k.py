"""K-composition with and without the rotary rotation, for the Circuits page: why the weight-based score can rank
a block-1 head above the previous-token head.

The weight-based score (core.reading.composition, Elhage et al., 2021) multiplies a writer's W_OV into a reader's
W_Q W_Kᵀ at offset 0: it reads every key as if it sat at the query's own position. An induction head's keys sit
L − 1 back, and rotary embeddings turn the query-key product by that offset. core.causal.composition's RoPE-aware
score puts the rotation back at the offsets the reader attends to; here those offsets are weighted by each
block-2 head's attention by offset on sampled task sequences (no patching run needed)."""
from __future__ import annotations

import torch

from core.causal.composition import rope_composition
from core.model.task import TaskConfig
from core.model.tinycharlm import TinyCharLM
from core.reading.attention import task_sequences
from core.reading.composition import composition_matrix


@torch.no_grad()
def k_composition_with_rotation(model: TinyCharLM, task: TaskConfig, n_seqs: int = 32, seed: int = 0) -> dict:
    """For a model of two or more blocks, block 1 into block 2: plain [H, H] (writer, reader) weight-based
    K-composition, rope [H, H] the RoPE-aware score, prev [H] each block-1 head's mean attention on the previous
    position and induction [H] each block-2 head's on the token after the latest earlier copy (later-copy
    queries), both over n_seqs sampled task sequences. ValueError for fewer than two blocks."""
    if model.cfg.n_layers < 2:
        raise ValueError("K-composition needs two blocks: this model has fewer.")
    tokens, periods = task_sequences(task, model.cfg.vocab_size, n_seqs, seed=seed)
    _, cache = model.run_with_cache(tokens)
    p1, p2 = cache["pattern"][0].double(), cache["pattern"][1].double()  # [B, H, T, T]
    B, H, T, _ = p2.shape
    i = torch.arange(1, T)
    prev = p1[:, :, i, i - 1].mean(dim=(0, 2))
    mass = torch.zeros(H, T, dtype=torch.float64)  # each reader's attention by offset i - j, later-copy queries
    ind, n = torch.zeros(H, dtype=torch.float64), 0
    for b in range(B):
        L = int(periods[b])
        q = torch.arange(L, T)
        for qi in q.tolist():
            mass.index_add_(1, qi - torch.arange(qi + 1), p2[b, :, qi, :qi + 1])
        ind += p2[b, :, q, q + 1 - L].sum(1)
        n += len(q)
    return {"plain": composition_matrix(model, "K", 0, 1).double(), "rope": rope_composition(model, mass),
            "prev": prev, "induction": ind / n}


def rotation_sentence(res: dict) -> str:
    """What the two scores say about the previous-token head (the block-1 head with the most attention on the
    previous position) as the keys' writer for the strongest induction head (k_composition_with_rotation's
    res), and how many block-2 heads each score gives it first place for; "" with one head per block."""
    from core.model.symbols import head_label

    plain, rope, prev, ind = res["plain"], res["rope"], res["prev"], res["induction"]
    H = plain.shape[0]
    if H < 2:
        return ""  # one block-1 head: nothing to rank
    w, r = int(prev.argmax()), int(ind.argmax())
    pw, ir = head_label(0, w), head_label(1, r)
    top_plain = int(plain[:, r].argmax())
    first_plain = sum(int(plain[:, h].argmax()) == w for h in range(H))
    first_rope = sum(int(rope[:, h].argmax()) == w for h in range(H))
    lead = (f"The previous-token head is {pw} ({float(prev[w]):.2f} of its attention one position back); the "
            f"strongest induction head is {ir} ({float(ind[r]):.2f} on the token after the earlier copy). ")
    if top_plain == w:
        said = (f"The weight-based K-composition score already ranks {pw} first as the writer of {ir}'s keys "
                f"({float(plain[w, r]):.3f})")
    else:
        said = (f"The weight-based K-composition score ranks {head_label(0, top_plain)} first as the writer of "
                f"{ir}'s keys ({float(plain[top_plain, r]):.3f}), above {pw} ({float(plain[w, r]):.3f}). It leaves the "
                "rotary rotation out: it reads every key as if it sat at the query's own position, while an "
                "induction head's keys sit L − 1 positions back, where the rotation changes which directions a "
                "query matches")
    other = max((h for h in range(H) if h != w), key=lambda h: float(rope[h, r]))
    return (lead + said + f"; it puts {pw} first for {first_plain} of the {H} block-2 heads. With the rotation put "
            f"back at the offsets each block-2 head attends to (the RoPE-aware score of the Causal page), {pw} "
            f"scores {float(rope[w, r]):.3f} for {ir}, against {float(rope[other, r]):.3f} for the best other "
            f"writer, {head_label(0, other)}, and comes first for {first_rope} of the {H}.")
