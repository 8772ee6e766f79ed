"""Snippets of the What depth can express page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from core.model.symbols import block_label, head_label
from ui.python_panel import Snippet
from ui.snippets.fill import Code
from ui.snippets.load import snippet


def _zero_block(model, task):
    from core.reading import bigrams
    z = bigrams.zero_block_summary(model, task)
    print({k: round(v, 4) for k, v in z.items() if isinstance(v, float)})
    return {"numbers": [z["model_loss"], z["bigram_loss"], z["mutual_info"], z["mutual_info_bias"]]}


def zero_block(entry) -> Snippet:
    return snippet("The zero-block model against the Gram form and the task's bigram statistics.", entry, _zero_block)


def _logit_paths(model, task, SEED, POS, TOKEN, MEANING):
    """TOKEN: the expression for the token whose logit is split (None: the model's top prediction)."""
    from core.reading import paths
    tokens, period = paths.example_sequence(task, model.cfg.vocab_size, seed=SEED)
    pos = POS  # predicting the token at pos + 1
    token = TOKEN  # MEANING
    res = paths.logit_contributions(model, tokens, pos, token)
    for label, value in zip(res["labels"], res["values"]):
        print(f"{label:>10} {value:+.3f}")
    print("model's logit", round(res["total"], 3), "p =", round(res["prob"], 3),
          "sum of paths", round(sum(res["values"]), 3))
    return {"values": res["values"], "total": [res["total"], res["prob"]]}


def logit_paths(entry, seed: int, pos: int, which: str) -> Snippet:
    target = which == "target"
    return snippet("One prediction's logit split into paths (centered logits; the bars add up to the total).", entry,
                   _logit_paths, SEED=seed, POS=pos, TOKEN=Code("int(tokens[pos + 1])") if target else None,
                   MEANING="the true next token" if target else "None: the model's top prediction")


def _skip_trigrams(model, BLOCK, N_HEADS, TOKEN_A, TOKEN_B):
    from core.model import symbols
    from core.reading import circuits
    for h in range(N_HEADS):
        print("head", symbols.head_label(BLOCK, h))
        for rule in circuits.skip_trigrams(model, BLOCK, h, k=6):
            print("  ", rule)
        print("   OV, attending to token", TOKEN_A, "boosts:", circuits.ov_top(model, BLOCK, h, TOKEN_A, k=4))
        print("   QK, at token", TOKEN_B, "it prefers:", circuits.qk_top(model, BLOCK, h, TOKEN_B, k=4))
    return {"rules": [[[r["qk_margin"], r["ov_logit"]] for r in circuits.skip_trigrams(model, BLOCK, h, k=6)]
                      for h in range(N_HEADS)]}


def skip_trigrams(entry, block: int, a: int, b: int, n_heads: int) -> Snippet:
    return snippet(f"{block_label(block).capitalize()}'s skip-trigram rules, OV row of token {a} and QK row of token "
                   f"{b}, per head.",
                   entry, _skip_trigrams, BLOCK=block, N_HEADS=n_heads, TOKEN_A=a, TOKEN_B=b)


def _mean_paths(model, task):
    from core.reading import paths
    res = paths.mean_target_contributions(model, task, n_seqs=32, seed=0, part="later")
    by_kind = paths.sum_by_kind(res)
    for label, value in zip(res["labels"], res["values"]):
        print(f"{label:>10} {value:+.3f}")
    print(by_kind, "total", round(res["total"], 3))
    return {"values": res["values"], "by_kind": by_kind}


def mean_paths(entry) -> Snippet:
    return snippet("The right token's logit split into paths, averaged over later-copy targets.", entry, _mean_paths)


def _composition(model):
    from core.reading import composition
    K = composition.composition_matrix(model, "K")  # [writer head in block 1, reader head in block 2]
    V = composition.composition_matrix(model, "V")
    print(K.numpy().round(3))
    print(V.numpy().round(3))
    return {"K": K, "V": V}


def depth_composition(entry) -> Snippet:
    return snippet("K- and V-composition between every block-1 and block-2 head, from the weights.", entry,
                   _composition)


def _score_terms(model, task, HEAD):
    from core.reading import score_groups, score_terms
    terms = score_terms.mean_induction_score_terms(model, task, 1, HEAD, n_seqs=8, seed=0)
    roles = score_groups.head_roles(model, task, 0)  # block 1's heads: self-attending, previous-token or other
    groups = score_groups.score_groups(terms, roles)
    print("margin", round(terms["total"], 3))
    print(groups)
    return {"total": terms["total"], "groups": groups}


def score_terms(entry, head: int) -> Snippet:
    return snippet(f"Head {head_label(1, head)}'s attention score at the induction target, split into query × key "
                   "paths.", entry, _score_terms, HEAD=head)
