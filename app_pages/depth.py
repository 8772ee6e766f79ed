"""What depth can express: with the attention patterns held fixed, the logits expand exactly into
paths. Zero blocks: the Gram form (bigrams). One block: skip-trigrams. Two blocks: composition."""
import streamlit as st

from core.model import symbols
from core.model.symbols import token_char
from core.quiz import questions as quiz
from core.reading import score_groups
from ui import depth_text, numbers, share, snippets
from ui.cache import per_model
from ui.charts import depth as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import LabModel, require_model

MAX_PATH_BLOCKS = 2  # (H+1)^blocks paths: beyond two blocks the list stops being readable

st.markdown(
    "TinyCharLM has no MLPs and no LayerNorm, so once every attention pattern is **held fixed**, each "
    "block is a linear map of its input stream. Multiplying the blocks out turns the logits into an exact "
    "sum of **paths** from the embedding to the unembedding (Elhage et al. 2021). Each extra block "
    "multiplies the kinds of path available: zero blocks give one path, the current token's own "
    "embedding; one block adds a path through each head; two blocks add paths that go through a head "
    "of block 1 *and then* a head of block 2.")

entry = require_model()
task, cfg = entry.info["task"], entry.info["config"]
V, n_blocks = cfg.vocab_size, cfg.n_layers
SYMBOLS = [token_char(i) for i in range(V)]
N_MEAN_PATHS = 32  # sampled sequences behind the mean path contributions
N_SCORE_SEQS = 8  # sampled sequences behind the induction head's score split


def _signed(v: float) -> str:
    """+1.05, and +0.00 where rounding leaves nothing (never "-0.00")."""
    return f"{round(v, 2) or 0.0:+.2f}"


def _share(part: float, total: float, of: str) -> str | None:
    """"12% of the total" (never "-0%"); None without a total."""
    return f"{round(part / total, 2) or 0.0:.0%} of {of}" if total else None


@per_model(name="depth.zero_block", show_spinner="Measuring the Gram form and the task's bigrams…", max_entries=8)
def _zero_block(entry: LabModel):
    from core.reading import bigrams  # a view's computation is imported in the view: it imports torch

    out = bigrams.zero_block_summary(entry.model, entry.task)
    out["model_lr"] = bigrams.log_ratio_to_uniform(out.pop("model_probs"))
    out["task_lr"] = bigrams.log_ratio_to_uniform(out.pop("task_probs"))
    return {k: v.numpy() if hasattr(v, "detach") else v for k, v in out.items()}  # stored without torch


@per_model(name="depth.contributions", show_spinner=False, max_entries=64)
def _contributions(entry: LabModel, seed, pos, which):
    from core.reading import paths

    tokens, _ = paths.example_sequence(entry.task, V, seed)
    target = int(tokens[pos + 1])
    return paths.logit_contributions(entry.model, tokens, pos, None if which == "top" else target)


@per_model(name="depth.example", show_spinner=False, max_entries=64)
def _example(entry: LabModel, seed: int) -> tuple[list[int], int]:
    """The sequence section 2 splits: its tokens and period (core.reading.paths.example_sequence)."""
    from core.reading import paths

    tokens, period = paths.example_sequence(entry.task, entry.info["config"].vocab_size, seed)
    return tokens.tolist(), period


def _first_clear_position(entry: LabModel, seed, start: int, stop: int) -> int:
    """The first position from `start` to `stop` where one path stands out for the true next token (the
    question below then has an answer), else `start`. Not cached itself: each position's contributions
    are (a cached view that calls another would be skipped on a warm walk, which the disk cache's
    check counts on)."""
    for pos in range(start, stop + 1):
        res = _contributions(entry, seed, pos, "target")
        if quiz.biggest_path(res["labels"], res["values"]).answer is not None:
            return pos
    return start


@per_model(name="depth.mean_paths", show_spinner="Averaging the paths over sampled sequences…", max_entries=8)
def _mean_paths(entry: LabModel):
    from core.reading import paths

    res = paths.mean_target_contributions(entry.model, entry.task, n_seqs=N_MEAN_PATHS, seed=0, part="later")
    return res, paths.sum_by_kind(res)


@per_model(name="depth.composition", show_spinner=False, max_entries=8)
def _composition(entry: LabModel):
    from core.reading import composition
    from core.reading.composition import composition_baseline

    base = composition_baseline(cfg.d_model, cfg.d_head)
    k, v = (composition.composition_matrix(entry.model, kind).numpy() for kind in ("K", "V"))
    return k, v, base


@per_model(name="depth.score_terms", show_spinner="Splitting the induction head's scores into paths…", max_entries=16)
def _score_terms(entry: LabModel, head):
    from core.reading import score_terms

    out = score_terms.mean_induction_score_terms(entry.model, entry.task, 1, head, n_seqs=N_SCORE_SEQS, seed=0)
    return {**out, "terms": out["terms"].numpy()}


@per_model(name="depth.skip_trigrams", show_spinner=False, max_entries=64)
def _skip_trigrams(entry: LabModel, block, a, b) -> list[tuple]:
    """Per head of `block`: its six strongest skip-trigrams, and the top OV row of token a and QK row of b."""
    from core.reading import circuits

    return [(circuits.skip_trigrams(entry.model, block, h, k=6), circuits.ov_top(entry.model, block, h, a, k=4),
             circuits.qk_top(entry.model, block, h, b, k=4)) for h in range(entry.model.cfg.n_heads)]


@per_model(name="depth.induction", show_spinner=False, max_entries=8)
def _induction(entry: LabModel):
    from core.reading import paths

    return paths.induction_scores(entry.model, entry.task, 1)


@per_model(name="depth.roles", show_spinner=False, max_entries=8)
def _roles(entry: LabModel):
    return score_groups.head_roles(entry.model, entry.task, 0)


# ---------------------------------------------------------------------------------------------
st.header("1 · Zero blocks: bigrams in Gram form")
st.markdown(f"**With no block, a model can only learn which token follows which: the {link('direct path')}.**")
st.markdown(
    "With no block at all, position i's stream is just its token's embedding `e_a`, and the tied "
    "unembedding reads it out against every embedding: logit(b) = `e_b · e_a`. The whole model is the "
    "matrix **W_E W_Eᵀ**, so the best it can learn is a table of next-token preferences given the current "
    "token (bigram statistics), and only tables of that *Gram* form: symmetric (b after a scores like a "
    "after b) and positive semidefinite, of rank at most min(V, d_model).")
if n_blocks != 0:
    st.info(f"The picked model has {n_blocks} block{'s' if n_blocks > 1 else ''}, so its logits are more "
            "than the Gram form; the Gram form is only its *direct* path (section 2). Pick **zero-block** in the "
            "sidebar to see this section's measurements.")
else:
    z = _zero_block(entry)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("max |logits − Gram rows|", numbers.human(z["gram_max_error"], digits=1),
              help="Largest difference between the model's logits and W_E W_Eᵀ[current token] over "
                   f"{z['n_check_seqs']} sampled sequences: float rounding only.")
    c2.metric("model loss (nats)", f"{z['model_loss']:.3f}", f"{z['model_loss'] - z['ln_V']:+.3f} vs ln V",
              delta_color="off", help=f"ln V = ln {V} = {z['ln_V']:.3f}: the loss of a uniform guess.")
    c3.metric("fitted bigram table's loss", f"{z['bigram_loss']:.3f}",
              f"{z['bigram_loss'] - z['ln_V']:+.3f} vs ln V", delta_color="off",
              help="Loss on fresh sequences of a bigram table counted from sampled sequences (add-one smoothed). "
                   "The true table is uniform, so the fitted one only learns sampling noise: "
                   + ("it does worse than a uniform guess." if z["bigram_loss"] > z["ln_V"] else
                      "it comes out no better than a uniform guess."))
    c4.metric("bigram information (nats)", f"{z['mutual_info']:.4f}",
              f"≈ {z['mutual_info_bias']:.4f} if independent", delta_color="off",
              help=f"Plug-in mutual information between current and next token over {z['n_pairs']:,} adjacent "
                   "pairs (one period per sampled sequence: later copies repeat the same pairs). Even independent "
                   "tokens give a positive estimate, about (V−1)²/(2N): the figure under the value.")
    left, right = st.columns(2)
    scale = (-1.0, 1.0)
    draw(left, charts.token_heatmap(
        z["model_lr"], SYMBOLS, "The model: softmax of each Gram row", "log₂(V·p)", "current token a",
        "next token b", domain=scale), width="content")
    draw(right, charts.token_heatmap(
        z["task_lr"], SYMBOLS, "The task: estimated P(next b | current a)", "log₂(V·p)", "current token a",
        "next token b", domain=scale), width="content")
    st.caption(depth_text.gram_note(z))
    python_panel(snippets.zero_block(entry), shows={"numbers": [z["model_loss"], z["bigram_loss"], z["mutual_info"],
                                                                z["mutual_info_bias"]]})

# ---------------------------------------------------------------------------------------------
st.header("2 · One prediction, split into paths")
st.markdown("**With attention fixed, a logit is exactly a sum of paths, one per route through the heads "
            f"({link('path expansion')}).**")
st.markdown(
    "Pick a sequence and a position. The bars split the model's logit for one token into its paths: "
    "**direct** (the current token's embedding read straight out), one path per **head** (the head's "
    "attention-weighted sum of `e_{x_j} W_OV`, read out), with two blocks the **composed** paths "
    "(block-1 head output read through the *values* of a block-2 head), and with biases the **bias** "
    "terms as paths of their own. The attention patterns are the model's own on this sequence, held "
    "fixed; b_Q and b_K only shape those patterns, so they have no path.")
if n_blocks > MAX_PATH_BLOCKS:
    st.info(f"This model has {n_blocks} blocks: its path list grows as (heads+1)^blocks, so this page "
            f"expands models of up to {MAX_PATH_BLOCKS} blocks only.")
else:
    c1, c2, c3 = st.columns([1, 3, 2])
    seed = c1.number_input("Sequence seed", 0, share.SEED_MAX, 0, key="depth_seed")
    tokens, period = _example(entry, int(seed))
    T = len(tokens)
    start = min(period + 4, T - 2)
    pos = c2.slider("Position predicting the next token", 0, T - 2,
                    _first_clear_position(entry, int(seed), start, min(start + 12, T - 2)), key=f"depth_pos_{T}",
                    help="The prediction made at this position (of the token at the next position). It starts at "
                         "the first position from the second copy's fifth token where one path stands out.")
    which = c3.radio("Logit of", ["target", "top"], key="depth_which", horizontal=True,
                     format_func={"target": "the true next token", "top": "the model's top prediction"}.get)
    text = "".join(SYMBOLS[t] for t in tokens)
    st.code(f"{text[:pos + 1]} ▸ {text[pos + 1]}   (period {period}; next token '{text[pos + 1]}' "
            f"is in the {'first' if pos + 1 < period else 'later'} copies)", language=None)
    res = _contributions(entry, int(seed), pos, which)
    logit = f"the logit of '{SYMBOLS[res['token']]}' at position {pos}"
    if ask(quiz.biggest_path(res["labels"], res["values"], logit), hides="the path bars"):
        draw(st, charts.path_bars(res["labels"], res["kinds"], res["values"],  # the page's width: see section 4
                                  f"contribution to the centered logit of '{SYMBOLS[res['token']]}'"))
        left, right = st.columns(2)
        left.metric(f"model's centered logit of '{SYMBOLS[res['token']]}'", f"{res['total']:.3f}",
                    f"p = {res['prob']:.3f}", delta_color="off", delta_arrow="off")
        right.metric("sum of the path bars", f"{sum(res['values']):.3f}",
                     f"difference {numbers.human(sum(res['values']) - res['total'], digits=2)}", delta_color="off",
                     delta_arrow="off")
        st.caption(
            "**What am I looking at?** Each bar is one path's share of the logit. Logits are *centered* (the mean "
            "over all V logits subtracted, path by path): a shift shared by every logit changes no probability, so "
            "only the centered part matters. The bars add up to the model's own logit to float precision. "
            "Labels: `2.3` is block 2, head 3; `1.2→2.3` is head 1.2's output read through head 2.3's values.")
        python_panel(snippets.logit_paths(entry, int(seed), pos, which),
                     shows={"values": res["values"], "total": [res["total"], res["prob"]]})

# ---------------------------------------------------------------------------------------------
st.header("3 · Skip-trigrams read from the weights")
st.markdown("**One block can learn skip-trigrams ('a … b → c'), but not to look for what followed the current token "
            "before.**")
st.markdown(
    "A head on the direct path implements rules of the form **[a] … [b] → [c]**: at destination token b, "
    "its QK circuit prefers source tokens a (wherever they sit earlier), and its OV circuit turns "
    "attending to a into a push on logit c. Copying is the case c = a. Both halves are read from the "
    "weights alone: `W_E W_OV W_Eᵀ` for OV, and `(e_b W_Q)·(e_a W_K)/√d_head` for QK. **RoPE caveat:** "
    "the query and key are rotated by their positions, so the QK table below is the *content part at "
    "offset 0* (both at the same position, where the rotations cancel); at other offsets the same pair "
    "scores differently, and positional heads (previous-token, fixed offsets) barely show here.")
if n_blocks == 0:
    st.info("The picked model has no heads, hence no skip-trigrams: pick a model with at least one block.")
else:
    c1, c2, c3 = st.columns(3)
    block = c1.selectbox("Block", list(range(n_blocks)), format_func=symbols.block_label,
                         key=f"depth_block_{n_blocks}")
    a = c2.selectbox("Source token a (OV)", list(range(V)), format_func=SYMBOLS.__getitem__, key=f"depth_src_{V}")
    b = c3.selectbox("Destination token b (QK)", list(range(V)), format_func=SYMBOLS.__getitem__, key=f"depth_dst_{V}")
    if block > 0:
        st.caption("For block 2 and later these tables cover only the part of each head that reads raw "
                   "embeddings; what earlier heads wrote into the stream is in section 4.")
    cols = st.columns(cfg.n_heads)
    for h, (col, (tri, ov, qk)) in enumerate(zip(cols, _skip_trigrams(entry, block, a, b))):
        name = symbols.head_label(block, h)
        col.markdown(f"**head {name}**")
        col.markdown(depth_text.trigram_list(tri, SYMBOLS))
        col.caption(depth_text.top_tokens(f"attending to `{SYMBOLS[a]}` boosts", ov, SYMBOLS))
        col.caption(depth_text.top_tokens(f"at `{SYMBOLS[b]}` it prefers", qk, SYMBOLS))
    st.caption(
        "**What am I looking at?** Per head: its six strongest rules, one per source token a: the destination b "
        "that prefers a most (QK margin: b's score for a minus b's average score over all sources) and the token "
        "c that attending to a boosts most (OV, centered logit); ranked by QK margin × OV logit. "
        "Below: the OV row of the source token you picked and the QK row of "
        "the destination token you picked. One block can copy (c = a) but cannot ask *which token came after "
        "an earlier a*: the key at position j holds only token x_j, nothing about x_{j−1}.")
    python_panel(snippets.skip_trigrams(entry, block, a, b, cfg.n_heads), shows={"rules": [
        [[r["qk_margin"], r["ov_logit"]] for r in tri] for tri, _, _ in _skip_trigrams(entry, block, a, b)]})

# ---------------------------------------------------------------------------------------------
st.header("4 · Two blocks: the induction circuit through composition")
st.markdown(f"**Two blocks can: a block-2 head reads what a block-1 head wrote ({link('K-composition')}, "
            f"{link('V-composition')}), and that is the induction circuit.**")
if n_blocks < 2:
    st.info(f"The picked model has {n_blocks} block{'s' if n_blocks != 1 else ''}: no head can read another "
            "head's output, so there is no composition. Pick **variable-period-2block** to see the induction "
            "circuit split into paths.")
elif n_blocks > MAX_PATH_BLOCKS:
    st.info(f"Shown for models of up to {MAX_PATH_BLOCKS} blocks.")
else:
    st.markdown(
        "A block-2 head can read what block-1 heads wrote in three places (Elhage et al. 2021): through its "
        "**values** (V-composition: the composed paths of section 2), its **keys** (K-composition) or its "
        "**queries** (Q-composition). The last two change *where it attends*: the patterns held fixed in the "
        "path split. In the textbook induction head (Olsson et al. 2022) a block-1 previous-token head "
        "writes 'my predecessor was a' into each position (K-composition), the block-2 head's query 'I am a' "
        "matches that key, so it attends to the token right after the earlier a and copies it through its "
        "own OV circuit. Where the query's 'I am a' comes from is a question for the model at hand: the raw "
        "token, or the token as block-1 heads rewrote it (Q-composition). Two measurements below: *what* is "
        "copied (the paths of the logit), and *why there* (the paths of the attention score).")
    res, by_kind = _mean_paths(entry)
    total = res["total"]
    st.subheader("What is copied: the paths of the right token's logit")
    # the chart over the page's width and the sums under it: beside it, at 800 px, the chart lost its legend's
    # labels and axis title and the metrics their room
    draw(st, charts.path_bars(res["labels"], res["kinds"], res["values"],
                              "mean contribution to the centered logit of the right token"))
    kinds = [k for k in charts.KIND_ORDER if k in by_kind]
    for col, kind in zip(st.columns(max(len(kinds), 1)), kinds):
        col.metric(charts.KIND_TITLES[kind], _signed(by_kind[kind]), _share(by_kind[kind], total, "the total"),
                   delta_color="off", delta_arrow="off")
    block2 = sum(v for label, k, v in zip(res["labels"], res["kinds"], res["values"])
                 if k == "head" and label.startswith("2."))
    st.caption(f"Averaged over {res['n']:,} later-copy targets of {N_MEAN_PATHS} sampled sequences; "
               "mean centered logit of "
               f"the right token {total:.2f}, of which the block-2 heads reading the token itself (`2.h` "
               f"paths) carry {block2:.2f}.")
    st.caption(depth_text.mean_paths_note(by_kind))
    python_panel(snippets.mean_paths(entry), shows={"values": res["values"], "by_kind": by_kind})
    st.subheader("Why there: the paths of the attention score")
    k_scores, v_scores, base = _composition(entry)
    ind = _induction(entry)
    best = max(range(cfg.n_heads), key=lambda h: ind[h])
    if ask(quiz.k_composition_partner(k_scores, best), hides="the composition scores and the attention score split"):
        c1, c2 = st.columns(2)  # a third column for the note overlapped the heatmaps' colour legends
        draw(c1, charts.composition_heatmap(k_scores, base["K"], "K-composition"), width="content")
        draw(c2, charts.composition_heatmap(v_scores, base["V"], "V-composition"), width="content")
        st.caption(
            "**What am I looking at?** Composition scores ‖M‖/(‖A‖‖B‖) between each block-1 head's OV matrix and "
            "each block-2 head's QK (K: the reader's keys read the writer) or OV matrix (V: its values read the "
            "writer), from the weights alone; the subtitle is the mean for random "
            "matrices of the same shapes. W_QK is taken at offset 0 (RoPE).")
        python_panel(snippets.depth_composition(entry), shows={"K": k_scores, "V": v_scores})
        head = st.columns([1, 2])[0].selectbox(
            "Block-2 head to open", list(range(cfg.n_heads)), index=best, key=f"depth_head_{cfg.n_heads}",
            format_func=lambda h: f"{symbols.head_label(1, h)} (ind. {ind[h]:.2f})",
            help="Each head is listed with its induction score (latest copy) in brackets.")
        st_terms = _score_terms(entry, head)
        roles = _roles(entry)
        groups = score_groups.score_groups(st_terms, roles)
        writer = max(range(cfg.n_heads), key=lambda w: float(k_scores[w, head]))
        # the heatmap over the page's width and the split under it, three to a row (beside it, at 800 px, the
        # heatmap lost its title and right-hand columns)
        draw(st, charts.score_term_heatmap(
            st_terms["terms"], st_terms["q_labels"], st_terms["k_labels"],
            f"Why head {symbols.head_label(1, head)} attends to the induction target", "score margin"), width="content")
        cells = [("score margin at the induction target", f"{st_terms['total']:.2f}", None,
                  "Score at the induction target minus the mean score of the other visible keys.")]
        cells += [(name, _signed(v), _share(v, st_terms["total"], "the margin"), score_groups.GROUP_HELP[name])
                  for name, v in groups.items()]
        cells.append((f"K-composition {symbols.head_label(0, writer)} → {symbols.head_label(1, head)}",
                      f"{float(k_scores[writer, head]):.3f}", f"random matrices: {base['K']:.3f}", None))
        for i in range(0, len(cells), 3):
            for col, (label, value, delta, help_) in zip(st.columns(3), cells[i:i + 3]):
                col.metric(label, value, delta, delta_color="off", delta_arrow="off", help=help_)
        st.caption(depth_text.score_terms_note(head, st_terms["n"], N_SCORE_SEQS, roles, groups))
        python_panel(snippets.score_terms(entry, head), shows={"total": st_terms["total"], "groups": groups})
