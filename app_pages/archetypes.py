"""Head archetypes & the IOI circuit: six routing patterns, the detectors that recognise them, the same
detectors on the student's model, the IOI circuit of GPT-2 small, and what attention weights do not say."""
import streamlit as st

from core.archetypes import catalogue as arc
from core.archetypes import head_matches, ioi
from core.model import symbols
from core.model.task import DEFAULT_PERIOD
from core.quiz import questions as quiz
from core.reading.detectors import SCORE_ROWS
from ui import share, snippets, state, task_pages
from ui.cache import per_code, per_model
from ui.charts import archetypes as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.pins import pinnable, pinned
from ui.python_panel import python_panel
from ui.quiz import ask

st.markdown(
    "Trained transformers keep reinventing a handful of attention **routing patterns**. Below, six of them "
    "are generated on a sentence of your choice, a set of detectors is checked against them, and the same "
    "detectors are then run on the heads of your own TinyCharLM. The section after that shows how such heads "
    "combine into the indirect-object circuit found in GPT-2 small (Wang et al. 2022).")

# ---------------------------------------------------------------------------------------------
st.header("1 · Six routing patterns")
st.markdown(f"**Each {link('archetype')} is a rule for where a head looks; the patterns here are generated from the "
            "rules, not learned.**")
CUSTOM = share.CUSTOM_PROMPT  # the prompt radio's option for a typed sentence
controls, info = st.columns([2, 3])
with controls:
    choice = st.radio("Prompt", list(arc.PRESET_PROMPTS) + [CUSTOM], key="arch_prompt", horizontal=True)
    if choice == CUSTOM:
        text = st.text_input("Your sentence", value="Alice met Bob at the cafe, and Bob thanked", key="arch_custom",
                             help=f"Up to {arc.MAX_PROMPT_WORDS} words and punctuation marks.")
    else:
        text = arc.PRESET_PROMPTS[choice]
    name = st.selectbox("Archetype", arc.ARCHETYPES, format_func=arc.ARCHETYPE_LABELS.get, key="arch_name")
    sharpness = st.slider("Sharpness (softmax inverse temperature)", 0.0, 12.0, 6.0, 0.5, key="arch_sharp",
                          help="Score given to the keys the archetype looks for; all other keys score 0.")
    rest = st.slider("Rest on BOS when there is nothing to find", 0.0, 1.0, 0.8, 0.05, key="arch_rest",
                     disabled=name not in arc.RESTING,
                     help="Share of attention parked on the first token on rows where this head has no "
                          "target; the rest is spread evenly. Applies to induction, duplicate-token and name-mover.")
with info:
    st.markdown(f"**{arc.ARCHETYPE_LABELS[name]}**: {arc.ARCHETYPE_RULES[name]}.")
    st.caption(
        "Tokenisation: a `<bos>` marker, then words (letters, digits, underscores, with inner apostrophes kept) "
        "and each punctuation mark as its own token; case matters. Each row i is a softmax over keys j ≤ i that "
        "scores the archetype's targets at the sharpness above and everything else at 0. These are generated "
        "patterns, not read from GPT-2 small: they show the shape each archetype has in real models. A "
        "'name' is a capitalised word that is not a common opener such as *When* or *The*.")


@per_code(name="archetypes.pattern", max_entries=32)
def _pattern(name: str, text: str, sharpness: float, rest: float):
    """The generated pattern of archetype `name` on `text` (the same for everyone, whatever model is picked)."""
    return arc.archetype_pattern(name, arc.tokenize(text), arc.ArchetypeSettings(sharpness, rest)).numpy()


@per_code(name="archetypes.detectors", max_entries=32)
def _detectors(text: str, sharpness: float, rest: float, score_rows: str):
    """Every archetype scored by every detector on `text`, with what section 2 reads from the table."""
    table = arc.detector_table(arc.tokenize(text), arc.ArchetypeSettings(sharpness, rest), score_rows)
    return table, arc.own_detector_wins(table), arc.detector_rivals(table)


try:
    tokens = arc.tokenize(text)
except symbols.InputProblem as e:
    tokens = None
    st.warning(f"{e} The sections that need a sentence are skipped until then.")

if tokens is not None:
    labels = arc.token_labels(tokens)
    pattern = _pattern(name, text, sharpness, rest)
    focus_options = [None] + list(range(len(tokens)))
    focus = st.selectbox("Flow view: focus on one query token", focus_options, key=f"arch_focus_{len(tokens)}",
                         format_func=lambda k: "all queries" if k is None else labels[k])
    st.markdown("##### Matrix view and flow view")
    pinnable(charts.pattern_views(pattern, labels, focus, pinned("arch_pin", len(tokens))), "arch_views_pin", "i",
             "arch_pin", "archetypes")  # one chart: a query pinned in either view is lit in both
    left, right = st.columns(2)
    with left:
        st.caption("**What am I looking at?** Row = the token doing the reading (query), column = the token "
                   "read (key). Colour = attention weight; each row sums to 1. The upper triangle is empty "
                   "because a position cannot see the future (causal mask).")
    with right:
        st.caption("**What am I looking at?** The same numbers as lines, as in BertViz's head view: each token "
                   "on the left reads the tokens on the right it is joined to; thicker, darker lines carry more "
                   "attention (lines under 0.01 are left out). Focus on one query to read it alone.")
    st.caption("Click a query (a row, a token on the left of the flow, or a cell of the strip) to pin it in both "
               "views: the strip's bars and the numbers after the keys are the attention it gives each key, "
               "summed over the pinned queries (shift-click adds one; a click above the diagonal releases; "
               "hover to preview). The pin stays when you change the archetype or the sharpness.")
    python_panel(snippets.archetype_pattern(text, name, sharpness, rest), shows={"pattern": pattern})

    # -----------------------------------------------------------------------------------------
    st.header("2 · Do the detectors mean what they say?")
    st.markdown(f"**A {link('detector')} score means a behaviour only when the prompt tells the candidates apart.**")
    score_rows = st.radio("Average each score over", SCORE_ROWS, key="arch_rows", horizontal=True,
                          format_func={"target": "rows with something to find",
                                       "all": "the whole pattern (TransformerLens's detect_head)"}.get,
                          help="Also used for your model's heads in section 3.")
    table, wins, rivals = _detectors(text, sharpness, rest, score_rows)
    table = table.assign(  # a copy: the view itself is the cached (and stored) one
        archetype_label=table["archetype"].map({**arc.ARCHETYPE_LABELS, "uniform": "uniform head (baseline)"}))
    order = [arc.ARCHETYPE_LABELS[a] for a in arc.ARCHETYPES] + ["uniform head (baseline)"]
    own = {arc.ARCHETYPE_LABELS[a]: a for a in arc.ARCHETYPES}
    if ask(quiz.top_detector(table, name, arc.DETECTOR_LABELS), hides="every detector's score"):
        st.markdown("##### Every archetype scored by every detector")
        draw(st, charts.score_heatmap(table, "archetype_label", order, list(arc.ARCHETYPES),
                                             arc.DETECTOR_LABELS, "generated pattern", own=own), width="content")
        n_won = sum(bool(v) for v in wins.values())
        n_scored = sum(v is not None for v in wins.values())
        st.caption(
            "**What am I looking at?** A detector is a 0/1 template of where one archetype would look; a head's "
            "score is the share of its attention on the template's 1s, either averaged over the rows where the "
            "template has a target, or over the whole pattern, where idle rows count as 0 (so a perfect induction "
            "head scores low on a prompt with few repeats). A dash: this prompt gives that detector nothing to "
            "find. Outlined cells: each "
            "archetype on its own detector. The bottom row is a head that spreads evenly, the score you get for free.")
        python_panel(snippets.detector_table(text, sharpness, rest, score_rows),
                     shows={"table": table.select_dtypes("number")})
        empty = [arc.DETECTOR_LABELS[d] for d, v in wins.items() if v is None]
        if rivals:
            lost = "; ".join(f"on the {arc.DETECTOR_LABELS[d]} detector the {arc.ARCHETYPE_LABELS[r]} pattern scores "
                             f"{rs:.2f} against its own {own:.2f}" for d, (r, own, rs) in rivals.items())
            st.warning(f"Here {n_won} of {n_scored} detectors rank their own archetype first: {lost}. Two reasons this "
                       "happens: the archetypes' targets coincide on this prompt (a word repeated two apart makes "
                       "'the token after its last occurrence' the previous token), or a blunt pattern: a head that "
                       "parks its idle rows on BOS *is* mostly a sink, and at low sharpness it out-scores a diffuse "
                       "sink. A detector score is evidence of a behaviour only when the prompt separates the "
                       "candidates.")
        else:
            st.success(f"Each of the {n_scored} detectors with something to find scores its own archetype highest "
                       "on this prompt, so a high score can be read as that behaviour.")
        if empty:
            st.info(f"No target on this prompt for: {', '.join(empty)} (needs repeated words or names).")

    # ---------------------------------------------------------------------------------------------
st.header("3 · Which of your model's heads fit an archetype?")
st.markdown("**The same detectors on your model's heads: one prompt is one experiment.**")


@per_model(name="archetypes.model_scores", show_spinner=False, max_entries=32)
def _model_scores(entry: state.LabModel, text: str, rows: str):
    table, patterns = head_matches.text_detector_table(entry.model, text, rows)
    return table, [p.numpy() for p in patterns]  # [H, T, T] per block


@per_code(name="archetypes.char_prompt", max_entries=32)
def _char_prompt(period: int, copies: int, seed: int, vocab_size: int) -> str:
    return head_matches.random_char_prompt(period, copies, seed, vocab_size)


if not state.all_models():
    st.info("No model to score yet: train one on the **Train** page or upload a checkpoint in the sidebar.")
else:
    entry = state.require_model()
    cfg = entry.info["config"]
    if not task_pages.offered(entry, "head archetypes"):
        pass  # the note says why
    elif cfg.n_layers == 0:
        st.info(f"**{entry.label}** has 0 blocks, so it has no attention heads to score: its prediction comes "
                "from the token embedding alone (bigram statistics). Pick a model with blocks in the sidebar.")
    else:
        alphabet = symbols.alphabet(cfg.vocab_size)
        st.markdown(
            f"TinyCharLM reads characters. Character *c* is token number *k* where *c* is the *k*-th character "
            f"of `a…z A…Z 0…9`, space, full stop ({len(alphabet)} used by this model's vocabulary of "
            f"{cfg.vocab_size}). The model has no BOS token, so the first-token detector watches position 0. "
            "By default the prompt is a random string repeated, the kind of sequence this model was trained "
            "on, so the induction and duplicate-token detectors have something to find.")
        a, b, c, d = st.columns(4)
        mode = a.radio("Character prompt", ["Repeated random string", "Your own characters"], key="arch_char_mode")
        if mode == "Repeated random string":
            task = entry.info["task"]
            start = task.period_min if task.period_min == task.period_max else DEFAULT_PERIOD  # fixed period: its own
            period = b.number_input("Period", 2, 64, max(2, min(start, 64)), key=f"arch_period_{entry.key}",
                                    help="Length of the random string that is repeated.")
            copies = c.number_input("Copies", 1, 6, 3, key="arch_copies")
            seed = d.number_input("Seed", 0, share.SEED_MAX, 0, key="arch_seed")
            chars = _char_prompt(int(period), int(copies), int(seed), cfg.vocab_size)
        else:
            chars = st.text_input("Characters", value="the cat sat. the cat sat. the cat sat.", key="arch_chars")
        st.code(chars, language=None)
        try:
            head_table, patterns = _model_scores(entry, chars, st.session_state.get("arch_rows", "target"))
        except symbols.InputProblem as e:
            st.warning(f"{e} Your model is unchanged.")
            head_table = None
        if head_table is not None:
            best = head_matches.best_matches(head_table)
            if ask(quiz.head_archetype(best, *head_matches.strongest_head(best), arc.DETECTOR_LABELS),
                   hides="every head's detector scores"):
                labelled = head_matches.label_heads(head_table)
                rows = list(dict.fromkeys(labelled["head_label"]))
                st.markdown(f"##### Detector scores of {entry.label}")
                draw(st, charts.score_heatmap(labelled, "head_label", rows, arc.MODEL_DETECTORS,
                                                     arc.DETECTOR_LABELS, "head"), width="content")
                st.caption("**What am I looking at?** The same five token detectors as above (the name-mover detector "
                           "needs words, so it is left out), now on every head of the picked model reading the "
                           "character prompt. Blocks and heads are numbered from 1. One prompt is one experiment: a "
                           "head that always looks a fixed distance back scores as an induction head whenever the "
                           "period happens to fit that distance. Change the period: an induction head follows it, a "
                           "positional shortcut does not.")
                python_panel(snippets.model_detectors(entry, chars, st.session_state.get("arch_rows", "target")),
                             shows={"table": head_table.select_dtypes("number")})
                lines = [f"- {symbols.long_head_label(r.layer, r.head)}: "
                         + (f"**{arc.DETECTOR_LABELS[r.best]}** ({r.score:.2f}; a uniform head scores {r.uniform:.2f})"
                            if r.matches else f"no clear archetype (best: {arc.DETECTOR_LABELS[r.best]} {r.score:.2f})")
                         for r in best.itertuples()]
                st.markdown("Closest archetype per head (a clear fit needs a score of at least "
                            f"{head_matches.MATCH_SCORE} and "
                            f"{head_matches.MATCH_RATIO:g} times a uniform head's):\n" + "\n".join(lines))
                head_keys = [(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
                pick = st.selectbox("Look at one head", head_keys, key=f"arch_head_{cfg.n_layers}x{cfg.n_heads}",
                                    index=head_keys.index(head_matches.strongest_head(best)),
                                    format_func=lambda k: symbols.long_head_label(*k))
                st.markdown(f"##### {symbols.long_head_label(*pick).capitalize()} on the prompt")
                char_labels = head_matches.char_labels(chars)
                pinnable(charts.pattern_matrix(patterns[pick[0]][pick[1]], char_labels, size=640,
                                               pin=pinned("arch_head_pin", len(char_labels))),
                         "arch_head_views_pin", "i", "arch_head_pin")
                st.caption("**What am I looking at?** This head's real attention on the prompt (rows = query, "
                           "columns = key). A previous-token head is a line just under the diagonal; an induction "
                           "head is a line one period back, plus one; a sink is a bright first column.")

# ---------------------------------------------------------------------------------------------
st.header("4 · The IOI circuit in GPT-2 small")
st.markdown(f"**In a large model the same {link('archetype', 'archetypes')} combine into circuits: in GPT-2 small, "
            f"{sum(len(g.heads) for g in ioi.GROUPS)} heads in {len(ioi.GROUPS)} groups pick the right name.**")
st.info("GPT-2 small is **not run here**. The heads below are the ones Wang et al. (2022) report; the lab "
        "shows where they sit and what each group does, and computes nothing about them.")
st.markdown(
    "Given *“When John and Mary went to the store, John gave a drink to”*, GPT-2 small continues with "
    "*Mary*. Wang et al. traced how: about two dozen heads in seven groups pass a signal from the repeated "
    "name (John, the subject S) to the final position, where it stops the model from copying S and lets it "
    "copy the other name (the indirect object, IO).")


@st.cache_resource(show_spinner=False)
def _ioi_diagram():  # the same for everyone: build the chart once per server
    return charts.ioi_diagram(ioi.heads_frame(), ioi.edges_frame(), [g.label for g in ioi.GROUPS], ioi.LOGITS_X)


draw(st, _ioi_diagram())
st.caption("**What am I looking at?** One row per functional group; each dot is a head at its layer, labelled "
           "layer.head (both from 0, as in the paper). Dashed lines: which group feeds which, and into which "
           "input (hover for it). Information flows left to right, ending in the logits.")
roles = ioi.roles_on_prompt(arc.tokenize(ioi.IOI_PROMPT))
st.markdown("**Where each group acts on the example sentence** (positions computed from the tokenised prompt):")
st.dataframe(roles, hide_index=True)
for g in ioi.GROUPS:
    st.markdown(f"- **{g.label}** ({', '.join(f'{l}.{h}' for l, h in g.heads)}), at {g.query}, attending to {g.reads}: "
                f"{g.role} *Evidence:* {g.evidence}")
st.expander("How the roles were established: path patching, from the logits backwards").markdown(
    f"{link('path patching', 'Path patching')} reruns the model on the real sentence but swaps in, "
    "along one chosen path only (say, from one head into another head's queries), the activation from a "
    "sentence with different names. If the model's preference for IO over S (the logit difference) drops, that "
    "path carries the information. Wang et al. worked backwards from the logits: first the heads with a direct "
    "effect, then the heads feeding those heads' queries, then the heads feeding the keys and values of *those*, "
    "checking attention patterns and OV circuits along the way.")

# ---------------------------------------------------------------------------------------------
st.header("5 · Reading attention with care")
st.markdown(f"**A pattern shows where a head reads, not whether that matters: only an {link('ablation')} or a "
            f"{link('activation patching', 'patch')} shows that.**")
st.subheader("Why sinks appear")
st.markdown(
    "A softmax always hands out a total of 1. A head whose pattern has nothing relevant on a row cannot say "
    "“nothing”: the weight must land somewhere. Heads learn to dump it on a position every query can see and "
    "whose value is small or uninformative, usually the first token, which makes the head's write close to a "
    "no-op. Xiao et al. (2023) showed how much models lean on this: dropping the first tokens from a sliding "
    "attention window wrecks generation, and keeping a few “sink” tokens restores it. In section 1, set the rest "
    "share to 0 on the induction archetype to see the alternative: the idle rows smear over the whole context, "
    "so the head would write a blurred average of everything.")
st.subheader("Many heads, many routings at once")
st.markdown(
    "Each head has its own query/key map (where to look) and value/output map (what to copy), and a layer adds "
    "all its heads' writes to the residual stream. So one layer can move the previous token forward in one "
    "head, look up an earlier occurrence in another and idle on a sink in a third, without the three competing "
    "for one pattern (Vaswani et al. 2017; Elhage et al. 2021). Compare the heads of one block in section 3: some "
    "do different jobs side by side, and several can share one job, as the induction heads of a two-block model "
    "often do.")
st.subheader("What attention weights do not tell you")
st.markdown(
    "A pattern says where a head reads, not how much that reading matters. A razor-sharp head can write a tiny "
    "vector, or one that nothing downstream uses; a diffuse head can write a large vector that decides the "
    "answer. Jain & Wallace (2019) found attention weights often disagree with other importance measures, and "
    "that quite different patterns can give the same prediction; Wiegreffe & Pinter (2019) replied that whether "
    "attention “explains” depends on what you ask of it, and proposed tests. Either way, the evidence that a "
    "head matters is an intervention: remove it and measure the damage.")
st.page_link("app_pages/circuits.py", label="Ablate your model's heads on the Circuits & ablations page", icon="🔌")
