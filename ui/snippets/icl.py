"""Snippets of the In-context learning page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.fill import fill
from ui.snippets.load import snippet


def _typed(model, task, TEXT):
    from core.model import symbols
    pattern = symbols.encode_text(TEXT, model.cfg.vocab_size, max_len=min(task.seq_len, symbols.MAX_TEXT_LEN))
    return pattern


def typed_pattern(text: str) -> str:
    """The code that makes the typed pattern (for icl_predictions)."""
    return fill(_typed, TEXT=text)


def _drawn(model, POOL, LENGTH, SEED):
    from core.model import symbols
    from core.training import icl
    drawn_from = sorted(set(symbols.encode_text(POOL, model.cfg.vocab_size)))
    pattern = icl.random_pattern(drawn_from, LENGTH, seed=SEED)
    return pattern


def drawn_pattern(pool: str, length: int, seed: int) -> str:
    """The code that draws the pattern from the symbols in `pool` (for icl_predictions)."""
    return fill(_drawn, POOL=pool, LENGTH=length, SEED=seed)


def _repeated(task, pattern):
    from core.training import icl
    tokens, period = icl.tile(pattern, task.seq_len), len(pattern)
    return tokens, period


def _once(pattern):
    tokens, period = pattern, None
    return tokens, period


def _predictions(model, tokens, period):
    from core.model import symbols
    from core.training import icl
    rows = icl.predict_each(model, tokens, period)
    for r in rows:
        print(r["position"], symbols.token_char(r["target"]), symbols.token_char(r["predicted"]),
              round(r["p_predicted"], 3), r.get("copy"))
    return {"p": [r["p_predicted"] for r in rows], "correct": [r["correct"] for r in rows]}


def icl_predictions(entry, pattern_code: str, repeat: bool) -> Snippet:
    """pattern_code: typed_pattern's or drawn_pattern's code; repeat: the pattern is tiled to the
    sequence length."""
    return snippet("The model's guess at every position of your pattern.", entry, pattern_code,
                   _repeated if repeat else _once, _predictions)


def _restart_curve(model, task, N_SEQS):
    from core.reading import restarts
    curve = restarts.restart_curve(model, task, n_seqs=N_SEQS, seed=0)
    print(curve["summary"])
    return {"summary": [curve["summary"][k]
                        for k in ("first_copy", "second_copy_first_token", "first_predictable", "rest")]}


def restart_curve(entry, n_seqs: int) -> Snippet:
    return snippet("Accuracy after a restart to a fresh pattern, and the one-token-or-two probe.", entry,
                   _restart_curve, N_SEQS=n_seqs)


def _restart_example(model, task, SEED):
    from core.model import symbols
    from core.reading import restarts
    from core.training import icl
    ex = restarts.restart_example(task, model.cfg.vocab_size, seed=SEED)
    rows = icl.predict_each(model, ex["tokens"])
    print("restart at", ex["restart"], "old period", ex["old_period"], "new period", ex["new_period"])
    print("".join(symbols.token_char(r["predicted"]) for r in rows))
    return {"p": [r["p_predicted"] for r in rows]}


def restart_example(entry, seed: int) -> Snippet:
    return snippet("One sampled sequence with a restart, predicted token by token.", entry, _restart_example,
                   SEED=seed)


def _in_context_check(model, info, task, N_SEQS):
    from core.training import icl
    check = icl.in_context_check(model, task, info.get("train"), n_seqs=N_SEQS)
    for name in ("seen_mid", "seen_last", "fresh", "swapped"):
        print(name, check[name])
    return {"acc": [check[n]["acc_second"] for n in ("seen_mid", "seen_last", "fresh", "swapped")
                    if check[n] is not None]}


def in_context_check(entry, n_seqs: int) -> Snippet:
    return snippet("Training sequences replayed from the checkpoint against fresh and swapped ones.", entry,
                   _in_context_check, N_SEQS=n_seqs)
