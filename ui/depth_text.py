"""Sentences the "What depth can express" page builds from measured figures (the figures come from
core.reading.bigrams, core.reading.circuits, core.reading.paths and core.reading.score_groups)."""
from __future__ import annotations

from core.model import symbols
from core.reading import score_groups


def gram_note(z: dict) -> str:
    """The zero-block section's note; z: core.reading.bigrams.zero_block_summary."""
    fitted = "worse than" if z["bigram_loss"] > z["ln_V"] else "no better than"
    return (
        "**What am I looking at?** Each row is a next-token distribution given the current token, drawn as "
        "log₂(V·p): 0 (white) means exactly uniform, ±1 means twice or half as likely as uniform. Left: what "
        "the zero-block model predicts (a row of W_E W_Eᵀ, softmaxed). Right: the same table counted from "
        "sampled task sequences. Pattern tokens are drawn independently, so the true table is flat and the "
        f"speckle on the right is sampling noise (the fitted bigram table's loss above is {fitted} uniform "
        "because it fits that noise). The model has nothing to learn here: its loss sits at ln V, which is also "
        "why every model's *first copy* stays near ln V. The diagonal is what resists going flat: the Gram form "
        "forces |e_a|² + |e_b|² ≥ 2 e_a·e_b, so unless all token embeddings coincide, repeating the current token "
        f"gets an edge on average (here {z['repeat_bits']:+.2f} on the log₂ scale).")


def trigram_list(rules: list[dict], chars: list[str]) -> str:
    """A markdown list of skip-trigram rules (core.reading.circuits.skip_trigrams): `a` … `b` → `c`."""
    return "\n".join(f"- `{chars[r['source']]}` … `{chars[r['dest']]}` → `{chars[r['boosted']]}` "
                     f"(QK +{r['qk_margin']:.1f}, OV +{r['ov_logit']:.1f})" for r in rules)


def top_tokens(lead: str, pairs: list[tuple[int, float]], chars: list[str]) -> str:
    """'<lead>: `x` +1.2, `y` +0.8' for (token, value) pairs."""
    return f"{lead}: " + ", ".join(f"`{chars[t]}` {v:+.1f}" for t, v in pairs)


def mean_paths_note(by_kind: dict) -> str:
    """The note under the mean path split; by_kind: core.reading.paths.sum_by_kind."""
    if by_kind.get("composed", 0.0) > by_kind.get("head", 0.0):
        where = ("Here most of it rides on *composed* paths `1.a→2.b`: the block-2 heads' values read what block-1 "
                 "heads wrote at the attended position rather than the raw embedding. A block-1 head that attends "
                 "to its own position rewrites every token this way, and block 2 then copies the rewritten token "
                 "(the Circuits page's *effective embedding* score shows the same from the weights). ")
    else:
        where = ("Here the copied token rides on the block-2 heads' own paths (`2.h`: their values read the raw "
                 "token embedding). ")
    return ("**What am I looking at?** The path split of section 2, averaged over every later-copy target: which "
            "paths push up the logit of the token that actually comes next. " + where
            + "The composition that makes an induction head look in the right place is not on this chart: it acts "
            "on the queries and keys, which held-fixed patterns hide. The next charts open them.")


def score_terms_note(head: int, n_queries: int, n_seqs: int, roles: dict[str, str], groups: dict[str, float]) -> str:
    """The note under one block-2 head's score split; roles: core.reading.score_groups.head_roles, groups:
    core.reading.score_groups.score_groups."""
    label = symbols.head_label(1, head)
    selfs = ", ".join(k for k, r in roles.items() if r == "self") or "none"
    prevs = ", ".join(k for k, r in roles.items() if r == "previous") or "none"
    g = [groups[score_groups.GROUPS[i]] for i in (1, 2, 3)]
    return (
        f"**What am I looking at?** Head {label}'s attention score at the induction target (the token after the "
        "previous occurrence of the current token) minus its mean score over the other visible keys, split "
        f"exactly into (path into the query) × (path into the key) terms and averaged over {n_queries:,} later-copy "
        f"queries of {n_seqs} sequences; the cells add up to the margin. Block 1's heads are grouped by where "
        f"they attend on sampled sequences (self-attending: {selfs}; previous-token: {prevs}). A large cell under "
        "a previous-token head's column means the key wins because of the previous token that head wrote there "
        "(K-composition). The row says what the query matched it with: the raw token (`direct` row: "
        f"{g[0]:+.2f} in total under the block-1 heads' columns), or the current token as a self-attending "
        f"block-1 head rewrote it (here {g[1]:+.2f}): the query side is Q-composition as well. A previous-token "
        "head's row under another head's column matches the query's previous token against the key's token two "
        f"back, a match on two tokens instead of one (here {g[2]:+.2f}). Beside the groups, the weight-only "
        "K-composition score of the block-1 head that composes most with this one.")
