"""Home: what the lab shows, the path through it, two ideas to carry through every page, and the picked
model's settings and measured headline numbers."""
import streamlit as st

from core.model.metrics import later_copy_floor
from core.quiz import questions as quiz
from core.training.overview import model_overview, settings_rows, top_head
from ui import python_panel, snippets
from ui.cache import per_model
from ui.glossary import link
from ui.pages import PATH
from ui.quiz import ask
from ui.state import LabModel, selected_model

N_OVERVIEW = 64  # fresh task sequences behind the home page's headline numbers


@per_model(name="home.overview",
           show_spinner=f"Measuring the picked model on {N_OVERVIEW} fresh sequences…", max_entries=32)
def _overview(entry: LabModel) -> dict:
    return model_overview(entry.model, entry.task, n_seqs=N_OVERVIEW, seed=0)


@per_model(name="home.fixed_distance", show_spinner="Running the period-shift probe…", max_entries=32)
def _fixed_distance(entry: LabModel) -> dict | None:
    from core.reading.probes import fixed_distance_verdict  # imported on a miss only: it imports torch

    return fixed_distance_verdict(entry.model, entry.task)


def fixed_distance_caveat(verdict: dict | None) -> str | None:
    """The caveat on attention-mass scores when the period-shift probe says the model copies from a fixed
    distance back (core.reading.probes.fixed_distance_verdict); None otherwise."""
    if not verdict or not verdict["fixed"]:
        return None
    return (f"**Caveat: this model copies from a fixed distance back.** The period-shift probe (Attention page) "
            f"finds its later-copy accuracy {verdict['acc_trained']:.2f} at its training period "
            f"{verdict['trained']} but {verdict['acc_shifted']:.2f} at period {verdict['shifted']}. So the low "
            "later-copy loss is not a look-up in the earlier copy, and the induction scores below (attention mass "
            "one period back, which a fixed offset puts there too) do not make a head an induction head.")


def _home_path():
    st.subheader("A path through the lab")
    st.markdown(f"**Watch an {link('induction head')} form, find it in the weights, then prove it matters by "
                "switching it off: each page builds on the one before.**")
    for i, page in enumerate(PATH, 1):
        go, what = st.columns([1, 2], vertical_alignment="center")
        with go:
            st.page_link(page.file, label=f"{i}. {page.title}", icon=page.icon)
        what.markdown(page.what)


def _home_ideas():
    st.subheader("Two ideas to carry through every page")
    st.markdown(f"**Every head adds its output to one shared {link('residual stream')}, and does two separate jobs: "
                f"where to look (its {link('QK circuit')}) and what to move (its {link('OV circuit')}).**")
    st.markdown(
        "**The residual stream.** Each position holds one vector of width d_model from the embedding to the "
        "logits. A block never overwrites it; every head *adds* its output to it. TinyCharLM has only "
        "attention (no MLP, no LayerNorm), so, once the attention patterns are fixed, everything from "
        "embedding to logits is linear and can be read off term by term (Elhage et al., 2021).")
    st.latex(r"h^{(0)}_i = W_E[x_i], \qquad h^{(\ell)}_i = h^{(\ell-1)}_i + \sum_{\text{heads } h}\;"
             r"\sum_{j \le i} A^{\ell h}_{ij}\; h^{(\ell-1)}_j\, W_V^{\ell h} W_O^{\ell h}, "
             r"\qquad \text{logits}_i = h^{(L)}_i\, W_E^{\top}")
    st.markdown(
        "**Where to look, and what to move.** A head does two separate jobs. Its *QK circuit* scores each "
        "earlier position j from the point of view of position i and decides where the head looks; its "
        "*OV circuit* decides what it writes once it has looked. Both are d_model × d_model matrices of rank "
        "at most d_head (Elhage et al., 2021; scaled dot-product attention from Vaswani et al., 2017).")
    st.latex(r"A^{h}_{ij} = \operatorname{softmax}_{j \le i}\!\left(\frac{h_i\, W_{QK}^{h}\, h_j^{\top}}"
             r"{\sqrt{d_{\text{head}}}}\right), \qquad W_{QK}^{h} = W_Q^{h} W_K^{h\top}, \qquad "
             r"W_{OV}^{h} = W_V^{h} W_O^{h}")
    st.markdown(
        "TinyCharLM has no position embedding: it rotates queries and keys by their position instead "
        "(rotary embeddings, Su et al., 2021), so the score also depends on the distance i − j, and "
        "W_QK above is its content part at distance 0. An **induction head** needs both jobs and two "
        "blocks: a block-1 head copies each token's predecessor into its stream, and a block-2 head then "
        "looks for the position whose predecessor matches the current token and copies the token at that "
        "position, the one that followed the earlier occurrence (Olsson et al., 2022).")


def _num(v) -> str:
    """A metric for st.metric: "–" when there is none (a period-1 task has no first-copy targets)."""
    return "–" if v is None or v != v else f"{v:.2f}"


def _home_model():
    st.subheader("The model you picked")
    st.markdown("**Two numbers tell whether a model looks tokens up: its loss on the "
                f"{link('later-copy loss', 'later copies')} against its loss on the {link('first copy')}, which "
                "nothing predicts.**")
    entry = selected_model()
    if entry is None:
        st.info("No model yet: train one on the **Train** page or upload a checkpoint in the sidebar.")
        return
    if not entry.task.offers("overview"):
        st.info(f"**{entry.label}** was trained on {entry.task.title}: {entry.task.why_not('overview')}.")
        return
    ov = _overview(entry)
    m, heads = ov.metrics, ov.heads
    st.markdown(f"**{entry.label}** — measured now on {ov.n_seqs} fresh sequences of its own task (seed "
                f"{ov.seed}). Change the model in the sidebar; every page follows.")
    verdict = _fixed_distance(entry)
    if ask(quiz.later_vs_first(m, verdict), hides="the measured losses"):
        caveat = fixed_distance_caveat(verdict)
        if caveat:  # it says how this model copies, which the question asks
            st.warning(caveat)
        _metrics(entry, m)
    python_panel.python_panel(snippets.overview(entry, ov.n_seqs, ov.seed), shows={
        "metrics": [m[k] for k in ("loss_first_copy", "loss_later_copies", "acc_later_copies")],
        "heads": heads.select_dtypes("number")})
    shown = ask(quiz.induction_head_count(heads, verdict), hides="the score of every head")
    left, right = st.columns([1, 2.4])
    left.table(settings_rows(entry.info), hide_index=True)  # wraps in a narrow column, where a dataframe cuts
    if shown:
        best = top_head(heads, "induction_any")
        right.metric("strongest induction head", "–" if best is None else best.label,
                     None if best is None else f"induction score {best.value:.2f}", delta_color="off",
                     delta_arrow="off", help="Written block.head, both counted from 1: the head whose attention goes "
                     "most to the token after an earlier occurrence of the current one (any earlier copy).")
    if heads.empty:
        right.info("This model has no attention blocks: its logits are W_E W_Eᵀ applied to the current "
                   "token, so it can only learn which token tends to follow which.")
    elif shown:
        _head_table(right, heads)


def _metrics(entry: LabModel, m: dict) -> None:
    """The picked model's losses and accuracy (what answers the first question)."""
    cols = st.columns(3)
    cols[0].metric("first-copy loss (nats)", _num(m["loss_first_copy"]), help="Targets nothing before them predicts.")
    task = entry.info["task"]
    floor = later_copy_floor(task.period_min, task.period_max, task.seq_len, entry.info["config"].vocab_size)
    cols[1].metric("later-copy loss (nats)", _num(m["loss_later_copies"]), help=(
        "Targets t ≥ L, readable from an earlier copy, except one per sequence: the second copy's first token "
        "(t = L) follows the pattern's last token, which nothing has followed yet, so when the period varies "
        f"no model can know it (this model: accuracy {_num(m.get('acc_second_copy_first_token'))} there). "
        f"Those targets are {floor['share']:.1%} of the later copies: guessed at chance they cost "
        f"{floor['loss']:.3f} nats of this loss, a floor no model gets under." if task.period_min != task.period_max
        else "Targets t ≥ L, readable from an earlier copy."))
    cols[2].metric("later-copy accuracy", _num(m["acc_later_copies"]),
                   help=f"Top-1 accuracy; guessing gives 1/{entry.info['config'].vocab_size}.")


def _head_table(right, heads) -> None:
    """Every head's scores (what answers the second question)."""
    labels = {"prev_token": "prev", "induction": "ind. latest", "induction_any": "ind. any", "duplicate": "dup.",
              "first_token": "first", "ov_diag_top1": "OV W_E", "ov_diag_top1_effective": "OV recv.",
              "ov_copying_eig_effective": "OV eig", "ablation_loss_later_delta": "abl. Δ"}
    number_columns = {c: st.column_config.NumberColumn(label, format="%.2f") for c, label in labels.items()}
    right.dataframe(heads.drop(columns=["layer", "head"]), hide_index=True, width="stretch", height="content",
                    column_config=number_columns)
    right.caption(
        "**What am I looking at?** One row per head, labelled block.head (both counted from 1). The attention scores "
        "are the head's average attention on the previous position (*prev*); on the token after the latest "
        "earlier occurrence of the current one (*ind. latest*) or after any earlier occurrence (*ind. any*: "
        "with three to six copies in a sequence, induction heads also read older copies); on the latest "
        "occurrence itself (*dup.*); and on position 0 (*first*). *OV W_E* is the share of tokens whose OV "
        "circuit raises that same token's logit most (chance 1/V), reading the token as it enters the model; "
        "*OV recv.* reads it as the head receives it, after the earlier blocks (see the Circuits page); *OV "
        "eig* is the eigenvalue copying score of what it receives (+1 copies, −1 suppresses). *Abl. Δ* is "
        "how much the later-copy loss rises when the head's output is set to zero.")


st.markdown(
    "Train **TinyCharLM**, a small transformer made only of attention, on your own CPU, watch it "
    "discover how to look things up in its context, and then take it apart. Every number and chart "
    "here is computed by the app from a model you can pick in the sidebar.")
_home_path()
_home_ideas()
_home_model()
