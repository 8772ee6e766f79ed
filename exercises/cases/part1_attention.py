"""Part 1's checks (the task and attention patterns): each exercise's cases, the lab's answer and the
typical mistakes, each a wrong computation with its sentence."""
from __future__ import annotations

import math

import torch

from core.model.symbols import block_label
from exercises.cases.inputs import _patterns, batch
from exercises.engine import Case, Check

CHECKS: dict[str, Check] = {}  # exercise name -> its check, each one written below the functions it uses
PATTERN_AXES = ("B", "H", "T, the query i", "T, the key j")


def _tile_cases(model, task, label):
    if label.startswith("a small"):
        return []
    g = torch.Generator().manual_seed(1)
    periods = torch.randint(task.period_min, task.period_max + 1, (8,), generator=g)
    periods[0] = task.period_min  # at least two periods
    periods[1] = task.period_max
    patterns = torch.randint(0, model.cfg.vocab_size, (8, task.period_max), generator=g)
    return [Case(f"{label}'s task", {"patterns": patterns, "periods": periods, "seq_len": task.seq_len})]


def _gather(patterns, periods, seq_len, shift=0, fixed=None):
    L = periods[:, None] if fixed is None else fixed
    return patterns.gather(1, ((torch.arange(seq_len)[None, :] + shift) % L).expand(len(periods), -1))


CHECKS["tile_patterns"] = Check(_tile_cases, lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len),
                                ("B", "T"), [
    ("Every row is tiled with the longest period: use each sequence's own L_b (t mod periods[b])",
     lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, fixed=patterns.shape[1])),
    ("Off by one position: position t holds patterns[b, t mod L_b], so position 0 holds the pattern's "
     "first token", lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, shift=1)),
    ("Off by one position: position t holds patterns[b, t mod L_b], so position 0 holds the pattern's "
     "first token", lambda patterns, periods, seq_len: _gather(patterns, periods, seq_len, shift=-1))])


def _mask_cases(model, task, label):
    if label.startswith("a small"):
        return []
    _, periods = batch(model, task)
    return [Case(f"{label}'s task", {"periods": periods, "seq_len": task.seq_len})]


def _later(periods, seq_len, strict=False):
    t = torch.arange(1, seq_len)[None, :]
    return t > periods[:, None] if strict else t >= periods[:, None]


CHECKS["later_copy_mask"] = Check(_mask_cases, lambda periods, seq_len: _later(periods, seq_len),
                                  ("B", "t - 1, the targets t = 1..T-1"), [
    ("Off by one position: column c is the target t = c + 1, and the target t = L (the second copy's first "
     "token) is a later-copy target too, so use t >= L", lambda periods, seq_len: _later(periods, seq_len,
                                                                                        strict=True)),
    ("That is the second copy only (L <= t < 2L): the later copies run to the end of the sequence",
     lambda periods, seq_len: _later(periods, seq_len) & (torch.arange(1, seq_len)[None] < 2 * periods[:, None])),
    ("That is the first copy (t < L): the later copies are the targets t >= L",
     lambda periods, seq_len: ~_later(periods, seq_len))])


def _qk(model, tokens, layer):
    """The block's q and k [B, H, T, d_head] before rotary (bias included), as the model computes them."""
    names = [f"blocks.{layer}.attn.hook_q", f"blocks.{layer}.attn.hook_k"]
    with torch.no_grad():
        _, cache = model.run_with_hooks(tokens, cache=names)
    return cache[names[0]], cache[names[1]]


def _pattern_cases(model, task, label):
    if model.cfg.n_layers == 0 or label.startswith("a small"):
        return []
    tokens, _ = batch(model, task, n=4)
    out = []
    for layer in range(model.cfg.n_layers):
        q, k = _qk(model, tokens, layer)
        out.append(Case(f"{label}, {block_label(layer)}", {"q": q, "k": k}))
    return out


def _pattern_ref(q, k, rope=True, scale=True, axis=-1, mask=1, transpose=False):
    from core.model.rope import apply_rope, rope_cos_sin

    T, dh = q.shape[-2], q.shape[-1]
    if rope:
        cos, sin = rope_cos_sin(T, dh, 10000.0, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    s = q @ k.transpose(-1, -2) / (math.sqrt(dh) if scale else 1.0)
    if mask is not None:
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(mask), float("-inf"))
    A = s.softmax(axis)
    return A.transpose(-1, -2) if transpose else A


CHECKS["causal_pattern"] = Check(_pattern_cases, _pattern_ref, PATTERN_AXES, [
    ("No rotary positions: rotate q and k with apply_rope before the dot product",
     lambda q, k: _pattern_ref(q, k, rope=False)),
    ("The scores are not scaled: divide q . k by sqrt(d_head)", lambda q, k: _pattern_ref(q, k, scale=False)),
    ("Normalised over the wrong axis: the softmax runs over the keys j (the last axis), so that each "
     "row sums to 1", lambda q, k: _pattern_ref(q, k, axis=-2)),
    ("No causal mask: a query i may not attend to the keys j > i", lambda q, k: _pattern_ref(q, k, mask=None)),
    ("Off by one position: the mask must keep j = i (a query also attends to its own position)",
     lambda q, k: _pattern_ref(q, k, mask=0)),
    ("Rows and columns swapped: axis 2 is the query i and axis 3 the key j (A[..., i, j])",
     lambda q, k: _pattern_ref(q, k, transpose=True))])


def _exact(T: int, periods: torch.Tensor, kind: str) -> torch.Tensor:
    """A planted pattern [B, 2, T, T] with a known score: head 0 exactly `kind`, head 1 uniform over j <= i."""
    B = len(periods)
    A = torch.zeros(B, 2, T, T)
    A[:, 1] = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    for b in range(B):
        L = int(periods[b])
        for i in range(T):
            j = {"prev": i - 1, "induction": i + 1 - L}[kind]
            A[b, 0, i, j if 0 <= j <= i else 0] = 1.0
    return A


def _score_cases(model, task, label, kind="prev"):
    out = []
    if model.cfg.n_layers and not label.startswith("a small"):
        tokens, periods = batch(model, task)
        cache = _patterns(model, tokens)
        out += [Case(f"{label}, {block_label(l)}", {"pattern": cache["pattern"][l], "periods": periods})
                for l in range(model.cfg.n_layers)]
    if label.startswith("the planted"):
        _, periods = batch(model, task, n=4, seed=3)
        out.append(Case(f"a planted pattern (head 0 exactly {kind}, head 1 uniform)",
                        {"pattern": _exact(task.seq_len, periods, kind), "periods": periods}))
    return out


def _prev_cases(model, task, label):
    return [Case(c.label, {"pattern": c.args["pattern"]}) for c in _score_cases(model, task, label, "prev")]


def _ind_cases(model, task, label):
    return _score_cases(model, task, label, "induction")


def _diag(pattern, back, first=None, pooled=True, total=False):
    """Mean (or sum) of A[i, i - back] over queries i >= first (per sequence: back, first may be [B])."""
    B, H, T, _ = pattern.shape
    back = torch.as_tensor(back).expand(B) if torch.as_tensor(back).dim() == 0 else back
    if first is None:
        first = back
    elif torch.as_tensor(first).dim() == 0:
        first = torch.as_tensor(first).expand(B)
    sums, counts = [], []
    for b in range(B):
        i = torch.arange(int(first[b]), T)
        j = i - int(back[b])
        ok = (j >= 0) & (j <= i)
        vals = torch.zeros(H, len(i))
        vals[:, ok] = pattern[b][:, i[ok], j[ok]]
        sums.append(vals.sum(-1))
        counts.append(len(i))
    S, N = torch.stack(sums), torch.tensor(counts, dtype=torch.float)
    if total:
        return S.sum(0)
    return S.sum(0) / N.sum() if pooled else (S / N[:, None]).mean(0)


CHECKS["prev_token_score"] = Check(_prev_cases, lambda pattern: _diag(pattern, 1), ("H",), [
    ("Off by one position: that is A[i, i], the self score; the previous token is the key j = i - 1",
     lambda pattern: _diag(pattern, 0, 1)),
    ("Off by one position: that is two tokens back, A[i, i-2]; the previous token is the key j = i - 1",
     lambda pattern: _diag(pattern, 2)),
    ("Not normalised: average over the batch and the queries i >= 1, do not sum",
     lambda pattern: _diag(pattern, 1, total=True)),
    ("Averaged over all T queries: query 0 has no previous token, so average over the T - 1 queries i >= 1",
     lambda pattern: _diag(pattern, 1) * (pattern.shape[-1] - 1) / pattern.shape[-1]),
    ("Rows and columns swapped: A[i, i-1] is query i (axis 2) attending to key i - 1 (axis 3)",
     lambda pattern: pattern.diagonal(1, dim1=-2, dim2=-1).mean((0, 2)))])


def _heads(pattern, periods, score):
    from core.reading.heads import head_scores

    return head_scores(pattern, periods)[score]


CHECKS["induction_score"] = Check(_ind_cases, lambda pattern, periods: _heads(pattern, periods, "induction"), ("H",), [
    ("Off by one position: A[i, i-L] is the earlier copy of the current token itself (the duplicate "
     "score); induction looks at the token after it, j = i + 1 - L",
     lambda pattern, periods: _heads(pattern, periods, "duplicate")),
    ("Score on the wrong copy: this counts every earlier copy (induction_any); this exercise asks for the "
     "latest copy only, j = i + 1 - L", lambda pattern, periods: _heads(pattern, periods, "induction_any")),
    ("Averaged over the wrong queries: start at i = L, the first query whose token has an earlier copy",
     lambda pattern, periods: _diag(pattern, periods - 1, periods - 1)),
    ("Averaged per sequence first: pool every (sequence, query) pair, since sequences with a shorter period "
     "have more queries", lambda pattern, periods: _diag(pattern, periods - 1, periods, pooled=False))])


def _any(pattern, periods, offset=1, mean_over_copies=False, pooled=True):
    B, H, T, _ = pattern.shape
    sums, counts = [], []
    for b in range(B):
        L = int(periods[b])
        s = torch.zeros(H)
        for i in range(L, T):
            keys = list(range(i + offset - L, -1, -L))
            v = pattern[b, :, i, keys].sum(-1) if keys else torch.zeros(H)
            s += v / max(len(keys), 1) if mean_over_copies else v
        sums.append(s)
        counts.append(T - L)
    S, N = torch.stack(sums), torch.tensor(counts, dtype=torch.float)
    return S.sum(0) / N.sum() if pooled else (S / N[:, None]).mean(0)


CHECKS["induction_any_score"] = Check(_ind_cases, lambda pattern, periods: _heads(pattern, periods, "induction_any"),
                                      ("H",), [
    ("Score on the wrong copy: that is the latest copy only; induction_any adds the token after every "
     "earlier copy, j = i + 1 - kL", lambda pattern, periods: _heads(pattern, periods, "induction")),
    ("Off by one position: A[i, i-kL] are the earlier copies themselves; take the token after each, "
     "j = i + 1 - kL", lambda pattern, periods: _any(pattern, periods, offset=0)),
    ("Divided by the number of copies: sum the attention over the copies k, then average over the queries",
     lambda pattern, periods: _any(pattern, periods, mean_over_copies=True)),
    ("Averaged per sequence first: pool every (sequence, query) pair",
     lambda pattern, periods: _any(pattern, periods, pooled=False))])


def _hooked_cases(model, task, label):
    if model.cfg.n_layers == 0:
        return []
    tokens, periods = batch(model, task)
    return [Case(f"{label}, every block", {"model": model, "tokens": tokens, "periods": periods})]


def _hooked(model, tokens, periods, score="induction", last_only=False, per_sequence=False):
    """Each block's scores [n_layers, H] from one recorded run (core.reading.heads on hook_pattern)."""
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.cfg.n_layers)]
    _, cache = model.run_with_hooks(tokens, cache=names)
    if per_sequence:
        rows = [_diag(cache[n], periods - 1, periods, pooled=False) for n in names]
    else:
        rows = [_heads(cache[n], periods, score) for n in names]
    out = torch.stack(rows)
    if last_only:  # a hook made in a loop that reads the loop's variable when it runs: every block's row is the last
        out[:-1] = 0.0
    return out


CHECKS["hooked_induction_scores"] = Check(_hooked_cases, _hooked, ("n_layers, the block l", "H"), [
    ("Every hook wrote into the last block's row: a function defined in a loop reads the loop variable when it "
     "runs, not when it was made; give each block its own hook (a factory store(layer), or lambda A, l=l: ...)",
     lambda **a: _hooked(**a, last_only=True)),
    ("Off by one position: A[i, i-L] is the earlier copy of the current token itself (the duplicate score); "
     "induction looks at the token after it, j = i + 1 - L", lambda **a: _hooked(**a, score="duplicate")),
    ("Score on the wrong copy: this counts every earlier copy (induction_any); store the latest copy's score, "
     "j = i + 1 - L", lambda **a: _hooked(**a, score="induction_any")),
    ("Averaged per sequence first: pool every (sequence, query) pair, as induction_score does",
     lambda **a: _hooked(**a, per_sequence=True)),
    ("Stored the previous-token score: the induction key is j = i + 1 - L",
     lambda **a: _hooked(**a, score="prev_token")),
    ("Rows and columns swapped: row l is block l, so the answer is [n_layers, H]",
     lambda **a: _hooked(**a).T)])
