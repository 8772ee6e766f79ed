"""Attention Lab: entry point. `streamlit run dashboard.py`

Sets up navigation, the sidebar model picker shared by every page, and the home page.
"""
import streamlit as st

from ui.setup import lab_script
from ui.state import sidebar_picker

st.set_page_config(page_title="Attention Lab", page_icon="🔎", layout="wide")
lab_script()


PATH = [  # (page file, title, icon, what the student does there)
    ("pages/train.py", "Train", "🏋️",
     "Train a model live and watch the later-copy loss fall while a previous-token head and induction heads form."),
    ("pages/attention.py", "Attention", "👀",
     "Look at the attention patterns of the picked model, head by head, on sequences you choose."),
    ("pages/circuits.py", "Circuits & ablations", "🔌",
     "Read the QK and OV circuits straight from the weights, and knock heads out to see what breaks."),
    ("pages/depth.py", "What depth can express", "🧱",
     "Compare 0, 1 and 2 blocks: bigram statistics, skip-trigrams, and the two-step induction circuit."),
    ("pages/icl.py", "In-context learning", "🔁",
     "Feed never-seen patterns and watch the model copy them after a single exposure."),
    ("pages/archetypes.py", "Head archetypes & IOI", "🧭",
     "Meet the head types known from GPT-2 small and the circuit behind indirect-object identification."),
]


@st.cache_data(show_spinner="Measuring the picked model on 64 fresh sequences…", max_entries=32)
def _overview(key: str, _model, _task) -> dict:
    from core.overview import model_overview
    return model_overview(_model, _task, n_seqs=64, seed=0)


def _home_path():
    st.subheader("A path through the lab")
    for i, (path, title, icon, what) in enumerate(PATH, 1):
        link, text = st.columns([1, 3], vertical_alignment="center")
        with link:
            st.page_link(path, label=f"{i}. {title}", icon=icon)
        text.markdown(what)


def _home_ideas():
    st.subheader("Two ideas to carry through every page")
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
        "looks for the position whose predecessor matches the current token and copies what follows it "
        "(Olsson et al., 2022).")


def _num(v) -> str:
    """A metric for st.metric: "–" when there is none (a period-1 task has no first-copy targets)."""
    return "–" if v is None or v != v else f"{v:.2f}"


def _home_model():
    from core.overview import settings_rows, top_head
    from ui.state import selected_model

    st.subheader("The model you picked")
    entry = selected_model()
    if entry is None:
        st.info("No model yet: train one on the **Train** page or upload a checkpoint in the sidebar.")
        return
    ov = _overview(entry.key, entry.model, entry.info["task"])
    m, heads = ov["metrics"], ov["heads"]
    st.markdown(f"**{entry.label}** — measured now on {ov['n_seqs']} fresh sequences of its own task (seed "
                f"{ov['seed']}). Change the model in the sidebar; every page follows.")
    cols = st.columns(4)
    cols[0].metric("first-copy loss (nats)", _num(m["loss_first_copy"]), help="Targets nothing before them predicts.")
    cols[1].metric("later-copy loss (nats)", _num(m["loss_later_copies"]), help="Targets readable from an earlier copy.")
    cols[2].metric("later-copy accuracy", _num(m["acc_later_copies"]),
                   help=f"Top-1 accuracy; guessing gives 1/{entry.info['config'].vocab_size}.")
    best = top_head(heads, "induction")
    cols[3].metric("strongest induction head", "–" if best is None else f"{best[0]}.{best[1]}",
                   None if best is None else f"induction score {best[2]:.2f}", delta_color="off", delta_arrow="off",
                   help="Written block.head, both counted from 1: the head whose attention goes most to the token "
                        "after the previous occurrence of the current one.")
    left, right = st.columns([1, 2])
    left.dataframe(settings_rows(entry.info), hide_index=True, width="stretch", height="content")
    if heads.empty:
        right.info("This model has no attention blocks: its logits are W_E W_Eᵀ applied to the current "
                   "token, so it can only learn which token tends to follow which.")
        return
    labels = {"prev_token": "prev-token", "induction": "induction", "duplicate": "duplicate",
              "first_token": "first-token", "ov_diag_top1": "OV copies", "ablation_loss_later_delta": "ablation Δ"}
    right.dataframe(heads, hide_index=True, width="stretch", height="content", column_config={
        c: st.column_config.NumberColumn(label, format="%.2f") for c, label in labels.items()})
    right.caption(
        "**What am I looking at?** One row per head (blocks and heads counted from 1). The first four scores "
        "are the head's average attention on the previous position, on the induction target (the token after "
        "the previous occurrence of the current one), on that previous occurrence itself, and on position 0. "
        "*OV copies* is the share of tokens whose OV circuit raises that same token's logit most (chance 1/V). "
        "*Ablation Δ* is how much the later-copy loss rises when the head's output is set to zero.")


def home():
    st.title("Attention Lab")
    st.markdown(
        "Train **TinyCharLM**, a small transformer made only of attention, on your own CPU, watch it "
        "discover how to look things up in its context, and then take it apart. Every number and chart "
        "here is computed by the app from a model you can pick in the sidebar.")
    _home_path()
    _home_ideas()
    _home_model()


PAGES = [
    st.Page(home, title="Home", icon="🏠", default=True),
    st.Page("pages/train.py", title="Train", icon="🏋️"),
    st.Page("pages/attention.py", title="Attention", icon="👀"),
    st.Page("pages/circuits.py", title="Circuits & ablations", icon="🔌"),
    st.Page("pages/depth.py", title="What depth can express", icon="🧱"),
    st.Page("pages/icl.py", title="In-context learning", icon="🔁"),
    st.Page("pages/archetypes.py", title="Head archetypes & IOI", icon="🧭"),
]

page = st.navigation(PAGES)
sidebar_picker()
page.run()
