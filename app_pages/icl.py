"""In-context learning in miniature: the model completes patterns it has never seen, recovers one
exposure after a restart, and does as well on unseen sequences as on its own training sequences."""
import streamlit as st

from core.model import symbols
from core.model.task import DEFAULT_PERIOD
from core.quiz import questions as quiz
from core.reading import restarts
from core.training import icl
from ui import snippets
from ui.cache import per_model
from ui.charts import icl as charts
from ui.charts.kept import draw
from ui.glossary import link
from ui.python_panel import python_panel
from ui.quiz import ask
from ui.state import LabModel, require_model

N_CURVE, N_CHECK = 512, 256  # sequences sampled for the restart curve and per set of the check

st.markdown(
    "Every training sequence of TinyCharLM is a freshly drawn random pattern repeated, so there is no "
    "pattern to memorise: to predict the second copy the model must *read the first one from its context*. "
    "That is in-context learning in its smallest form, and the mechanism behind it is the induction head. "
    "Olsson et al. (2022) showed induction heads doing this in small attention-only models like this one, "
    "and gave indirect evidence (the heads and in-context learning appear together during training, and "
    "change together when the architecture is changed) that they drive much of in-context learning in "
    "large language models.")

entry = require_model()
task, cfg = entry.info["task"], entry.info["config"]
V, T = cfg.vocab_size, task.seq_len
SYMBOLS = symbols.alphabet(V)
MAX_PATTERN = min(T, symbols.MAX_TEXT_LEN)  # a typed pattern must fit the model's sequence length
with st.expander("How typed symbols map to tokens"):
    st.markdown(
        f"Token *i* is the *i*-th symbol of the lab's alphabet: `a`=0 … `z`=25, `A`=26 … `Z`=51, `0`=52 … "
        "`9`=61, space=62 (shown as ␣), `.`=63, the same mapping as on every other page. Case matters; any "
        "other symbol has no token. "
        f"This model has V = {V} tokens, so it accepts `{SYMBOLS}`"
        + (" (tokens beyond 63 show as ⟨id⟩)" if V > 64 else "")
        + f", and at most {MAX_PATTERN} symbols.")
if cfg.n_layers < 2:
    st.info(f"The picked model has {cfg.n_layers} block{'s' if cfg.n_layers != 1 else ''}: it cannot build an "
            "induction circuit (see *What depth can express*), so expect its second copies to stay near chance "
            "below. Pick **variable-period-2block** in the sidebar to see the skill.")


@per_model(name="icl.random_pattern", show_spinner=False, max_entries=64)
def _random_pattern(entry: LabModel, drawn_from: tuple, length: int, seed: int) -> list[int]:
    """icl.random_pattern, a view like the others (torch draws it): stored for the defaults with the model's."""
    return icl.random_pattern(list(drawn_from), length, seed)


@per_model(name="icl.restart_example", show_spinner=False, max_entries=64)
def _restart_example(entry: LabModel, seed: int) -> dict:
    return restarts.restart_example(entry.task, entry.info["config"].vocab_size, seed)


@per_model(name="icl.predict", show_spinner=False, max_entries=64)
def _predict(entry: LabModel, tokens: tuple, period):
    return icl.predict_each(entry.model, list(tokens), period)


@per_model(name="icl.curve", show_spinner="Sampling restart sequences…", max_entries=8)
def _curve(entry: LabModel):
    return restarts.restart_curve(entry.model, entry.task, n_seqs=N_CURVE, seed=0)


@per_model(name="icl.check", show_spinner="Replaying training sequences and sampling fresh ones…", max_entries=8)
def _check(entry: LabModel):
    return icl.in_context_check(entry.model, entry.task, entry.info.get("train"), n_seqs=N_CHECK)


def _accuracy_line(rows):
    parts = []
    for part in ("first", "second", "later"):
        sel = [r["correct"] for r in rows if r.get("copy") == part]
        if sel:
            parts.append(f"**{part} cop{'y' if part != 'later' else 'ies'}**: {sum(sel)}/{len(sel)} right")
    return " · ".join(parts)


# ---------------------------------------------------------------------------------------------
st.header("1 · Your pattern")
st.markdown(f"**A model with an {link('induction head')} completes a pattern it has never seen after a single "
            "exposure.**")
mode = st.radio("Pattern", ["type", "draw"], horizontal=True, key="icl_mode",
                format_func={"type": "Type one", "draw": "Draw a random one from symbols you pick"}.get)
tokens, period = None, None
try:
    if mode == "type":
        c1, c2 = st.columns([3, 2])
        text = c1.text_input("Pattern", "Black fox jumps.Wiz7", key="icl_text",
                             help=f"Symbols from {SYMBOLS[:4]}…{SYMBOLS[-3:]}; at most {MAX_PATTERN}.")
        repeat = c2.checkbox("Repeat it", True, key="icl_repeat",
                             help=f"Repeat the pattern to fill all {T} positions. Off: the model sees exactly what "
                                  "you typed, so type the repeats yourself.")
        pattern = symbols.encode_text(text, V, max_len=MAX_PATTERN)
        pattern_code = snippets.typed_pattern(text)
    else:
        c1, c2, c3 = st.columns([3, 1, 1])
        pool = c1.text_input("Draw from these symbols", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", key="icl_pool",
                             help="Each pattern token is drawn uniformly from these (repeats allowed).")
        length = c2.number_input("Pattern length", 1, T, min(DEFAULT_PERIOD, T // 2), key=f"icl_len_{T}")
        seed = c3.number_input("Seed", 0, 100_000, 0, key="icl_seed")
        drawn_from = sorted(set(symbols.encode_text(pool, V)))
        pattern, repeat = _random_pattern(entry, tuple(drawn_from), int(length), int(seed)), True
        pattern_code = snippets.drawn_pattern(pool, int(length), int(seed))
        st.code("".join(symbols.token_char(t) for t in pattern), language=None)
    if repeat:
        tokens, period = icl.tile(pattern, T), len(pattern)
    else:
        tokens = pattern
    if len(tokens) < 2:
        raise symbols.InputProblem("One symbol leaves nothing to predict: give at least two.")
except symbols.InputProblem as e:
    st.warning(str(e))

if tokens is not None:
    if period and 2 * period > T:
        st.info(f"A pattern of {period} symbols leaves no complete second copy within {T} positions; "
                f"the model learned periods {task.period_min}–{task.period_max}.")
    rows = _predict(entry, tuple(tokens), period)
    bounds = [k * period for k in range(1, (T - 1) // period + 1)] if period else []
    draw(st, charts.prediction_strip(rows, bounds), width="content")
    line = _accuracy_line(rows)
    right = sum(r["correct"] for r in rows)
    st.markdown(line if line else f"{right}/{len(rows)} predictions right.")
    st.caption(
        "**What am I looking at?** Top: at each position, the token that actually comes next (upper row) and the "
        "model's most likely token (lower row), green when they agree and vermillion when not. Bottom: the "
        "probability the model gives its top token. Dashed lines mark where each copy of the pattern begins. "
        "Count from a dashed line how many tokens pass before the strip turns green, and ask of each of them "
        "whether anything earlier in the context could tell what comes next; section 2 puts the same question "
        "to patterns that begin in the middle of a sequence. Try a pattern in which a symbol occurs twice, such "
        "as `abcaXY`: the current symbol alone then does not decide what comes next ('a' is followed once by "
        "'b', once by 'X'). A model that matched only the current token would have to guess between the two; one "
        "that also matches the token before it would not.")
    repeats = quiz.repeated_symbols(list(pattern), rows, symbols.token_char) if period else None
    if repeats and repeats["n"]:
        named = "; ".join(f"'{t}' is followed by {' and by '.join(repr(f) for f in fs)}"
                          for t, fs in repeats["followers"].items())
        st.markdown(
            f"**Your pattern is ambiguous for a one-token reader**: {named}. On the {repeats['n']} targets after "
            f"{'that symbol' if len(repeats['symbols']) == 1 else 'those symbols'} that it could know (from the "
            f"second copy's second token on), this model was right **{repeats['right']} of {repeats['n']}**"
            + (": it tells the occurrences apart, so it finds its place with more than the current token."
               if repeats["right"] == repeats["n"] else
               ": where the current token alone does not decide, it sometimes follows the wrong occurrence."))
    python_panel(snippets.icl_predictions(entry, pattern_code, repeat),
                 shows={"p": [r["p_predicted"] for r in rows], "correct": [r["correct"] for r in rows]})

# ---------------------------------------------------------------------------------------------
st.header("2 · Restarts: how fast does it catch a new pattern?")
st.markdown("**How much of a new pattern a model must see before it predicts it tells how it reads its context.**")
st.markdown(
    "Here each sequence switches, at one random position, to a fresh pattern with its own period. The "
    "restart position is drawn first, from its own random numbers, and the tokens afterwards, so where a "
    "restart falls has nothing to do with what the tokens are. The model is never told about the switch.")
curve = _curve(entry)
s = curve["summary"]


def _from_x(c: dict, x: int) -> float:
    """Accuracy over all targets after a restart at x = k - period >= x (the aligned view)."""
    pairs = [(a, n) for k, a, n in zip(c["k_rel"], c["acc_rel_restart"], c["n_rel_restart"]) if k >= x]
    return sum(a * n for a, n in pairs) / max(sum(n for _, n in pairs), 1)


if ask(quiz.restart_recovery(s, 1 / V), hides="the accuracy after a restart, below"):
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("new pattern, 1st copy", f"{s['first_copy']:.2f}", help="Accuracy in the new pattern's first copy.")
    c2.metric("2nd copy, 1st token", f"{s['second_copy_first_token']:.2f}",
              help="Accuracy on the new pattern's second copy's first token. No context-reader can know this one: its "
                   "predecessor, the pattern's last token, has never been followed by anything yet.")
    c3.metric("2nd copy, 2nd token", f"{s['first_predictable']:.2f}", f"{s['rest']:.2f} after", delta_color="off",
              help="Accuracy on the second copy's 2nd token, the first the model could know; below it, the accuracy "
                   "on every target after that one.")
    if s["n_recovered"]:
        c4.metric("tokens to recover", f"{s['median_recovery']:.0f}", f"{s['median_lag']:+.0f} vs earliest",
                  delta_color="off",
                  help=f"The median number of tokens after a restart until {restarts.RUN} right in a row, and below it "
                       "how many more than the earliest possible (period + 1). Over "
                       f"{s['n_segments']} restarts with room to show it, {s['n_recovered']} recovered; "
                       f"{s['share_earliest']:.0%} of those at the earliest possible token.")
    else:
        c4.metric("tokens to recover", "never",
                  help=f"None of {s['n_segments']} restarts with room to show it was followed by "
                       f"{restarts.RUN} right predictions in a row.")
    relative = st.toggle("Align on the new pattern's second copy", True, key="icl_rel",
                         help="Off: x is the number of tokens since the restart. Periods vary, so the jump is smeared.")
    draw(st, charts.restart_curve_chart(curve, relative, 1 / V))
    st.caption(
        f"**What am I looking at?** Next-token accuracy over {s['n_after_restart']:,} targets that follow a restart "
        f"({N_CURVE} sampled sequences of length {T}, one restart each, uniform over positions 1–{T - 1}), against the "
        "target's place in its pattern; points with fewer than 20 targets are left out. The blue series is the "
        "pattern each sequence starts with, for comparison. A model that reads its context needs one exposure: "
        "chance through the new pattern's first copy and on the first token of its second copy (x = 0 in the "
        "aligned view, whose predecessor has not been followed by anything yet). At x = 1, the first token it "
        f"could know, this model is right {s['first_predictable']:.0%} of the time (the probe below shows why "
        f"not always); from x = 2 on, {_from_x(curve, 2):.0%}, what it has on later copies anywhere. The "
        "dotted line is chance, 1/V.")
    python_panel(snippets.restart_curve(entry, N_CURVE), shows={"summary": [
        s[k] for k in ("first_copy", "second_copy_first_token", "first_predictable", "rest")]})

    probe = s["context_probe"]
    if probe["n"]:
        p1, p2, p3 = st.columns([1, 1, 2])
        p1.metric("first knowable token", f"{probe['as_sampled']:.2f}",
                  help="Accuracy on the first token the model could know after a restart: the same targets as "
                       "'2nd copy, 2nd token' above, from the same sampled sequences.")
        p2.metric("…if the one before matched", f"{probe['two_tokens_match']:.2f}",
                  help="The same targets, with the token before the earlier copy made to match the token before the "
                       "query.")
        p3.caption(
            "**One token or two?** At the first token the model could know after a restart, the earlier copy of the "
            "current token sits right at the restart, so the token *before* it belongs to the old pattern. The "
            "right-hand number replaces that token by the new pattern's last token, so the two tokens before the "
            f"match agree with the two before the query ({probe['n']} sequences). If it is much higher, the model "
            "finds its place by matching the two tokens before the target, not only the one before it. The "
            "dip at x = 1 in the chart above is then not forgetting: it is this one mismatched token.")

    ex_seed = st.number_input("Example sequence (seed)", 0, 100_000, 0, key="icl_ex_seed")
    ex = _restart_example(entry, int(ex_seed))
    r_pos, new_period = ex["restart"], ex["new_period"]
    ex_rows = _predict(entry, tuple(ex["tokens"]), None)
    marks = [b for b in (r_pos, r_pos + new_period) if b < T]
    draw(st, charts.prediction_strip(ex_rows, marks, "restart / new pattern's second copy"), width="content")
    st.caption(f"**What am I looking at?** One sampled sequence (seed {ex['seed']}), token by token, as in section "
               f"1. The old pattern (period {ex['old_period']}) runs until position {r_pos}, where a fresh pattern "
               f"of period {new_period} begins (first dashed line); the second dashed line is where that pattern "
               "starts its second copy. Seeds whose restart leaves no room to show both patterns are skipped for "
               "this example (not for the curve).")
    python_panel(snippets.restart_example(entry, int(ex_seed)), shows={"p": [r["p_predicted"] for r in ex_rows]})

# ---------------------------------------------------------------------------------------------
st.header("3 · Is the skill really in the context?")
st.markdown("**If the skill is in the context, sequences the model trained on are no easier than new ones, and "
            "removing the context removes the skill.**")
st.markdown(
    "Training draws fresh random patterns every step, so 'the training distribution' and 'patterns never "
    "seen' are the same distribution; comparing two samples of it shows nothing. What *would* show "
    "memorisation is a gap between the very sequences the model was trained on and new ones. The checkpoint "
    "records the trainer's seed and settings, so the app **replays** training's own sequences exactly, from "
    "halfway through training and from its last steps, and compares them with fresh sequences from a seed "
    "training never used. A last set keeps the fresh sequences but swaps their first copy for another "
    "pattern: the second copy is unchanged, only the context no longer shows it.")
check = _check(entry)
if ask(quiz.swap_effect(check, 1 / V), hides="the accuracies of every set, below"):
    NAMES = {"seen_mid": "seen halfway through training", "seen_last": "seen in the last training steps",
             "fresh": "never seen (fresh seed)", "swapped": "fresh, first copy swapped"}
    rows = [{"sequences": label + (f" (step {check[name]['step']:,})" if "step" in check[name] else ""),
             "second-copy accuracy": f"{check[name]['acc_second']:.3f} ± {check[name]['acc_second_se']:.3f}",
             "first-copy loss (nats)": f"{check[name]['loss_first']:.3f}",
             "later-copy accuracy": f"{check[name]['acc_later']:.3f}", "second-copy targets": check[name]["n_second"]}
            for name, label in NAMES.items() if check[name] is not None]
    st.dataframe(rows, hide_index=True)
    draw(st, charts.check_chart(check, NAMES), width="content")


    def _said(a, b) -> str:
        c = icl.compare_sets(a, b)
        verdict = "equal within noise" if c["within_noise"] else "more than noise"
        return f"{c['gap']:.3f} apart, {c['z']:.1f} standard errors: {verdict}"


    fresh, mid, last = check["fresh"], check["seen_mid"], check["seen_last"]
    if mid is None:
        st.info("This model's file does not record the training seed, batch size and steps done, so its training "
                "sequences cannot be replayed; the fresh and swapped rows still apply.")
    else:
        said_last, trace = _said(fresh, last), icl.last_steps_trace(check)
        st.markdown(
            f"Second-copy accuracy **{fresh['acc_second']:.3f}** on sequences the model never saw against "
            f"**{mid['acc_second']:.3f}** on sequences it trained on halfway through ({_said(fresh, mid)}); "
            f"first-copy loss {fresh['loss_first']:.3f} against {mid['loss_first']:.3f} nats (ln V = "
            f"{check['ln_V']:.3f}). The sequences of the very last steps score {last['acc_second']:.3f} ({said_last}), "
            f"first-copy loss {last['loss_first']:.3f}" + (
                ": the final updates, made on exactly these sequences, leave a faint trace in the weights, gone by "
                "the time a sequence is half a training run old." if trace else ": no trace of them either.")
            + f" With {check['n_train']:,} training sequences, the chance that any fresh one repeats a training "
            f"sequence is below {check['p_fresh_in_training']:.0e}.")
    st.caption(
        f"**What am I looking at?** {N_CHECK} sequences per set, at the training length "
        f"({check['seq_len']}); ± is one binomial standard error and the chart's whiskers span two. If the model "
        "stored patterns in its weights, sequences it trained on would score higher, above all on the first copy, "
        "which no context can help with; if it reads the context, swapping the first copy must drop the second "
        "copy to chance (1/V, dotted), however familiar its tokens.")
    python_panel(snippets.in_context_check(entry, N_CHECK), shows={"acc": [
        check[n]["acc_second"] for n in ("seen_mid", "seen_last", "fresh", "swapped") if check[n] is not None]})
