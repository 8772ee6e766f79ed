"""The reading pages' Markov-chain parts: what the Attention and Causal pages show of a model trained on the
Markov-chain task (core.model.markov), computed by core.reading.markov and core.causal.experiments."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import streamlit as st

from core.model import symbols
from ui import share
from ui.cache import per_model
from ui.charts import attention as charts
from ui.layout import chart_and_note
from ui.markov_train import comparison_table, paper_run_panel
from ui.pins import pinnable, pinned
from ui.state import LabModel
from ui.steps import heads_at_step

PIN = "att_mk_pin"  # the queries pinned on a Markov model's Attention page (its grid and its one head)


@per_model(name="markov.attention_view", show_spinner="Running the model on fresh chains…", max_entries=64,
           version=2)
def attention_view(entry: LabModel, seed: int):
    from core.reading.markov import markov_view  # here, not at the top: it imports torch

    return markov_view(entry.model, entry.task, seed)


@per_model(name="markov.patch_view", show_spinner="Patching every head…", max_entries=16)
def patch_view(entry: LabModel, seed: int) -> dict:
    from core.causal.experiments import markov_patch_view  # here, not at the top: it imports torch

    return markov_patch_view(entry.model, entry.task, seed=seed)


def paper_panel(entry: LabModel) -> None:
    """This model's settings beside Edelman et al.'s (the Train page's table, for this checkpoint)."""
    train = entry.info.get("train") or {}
    settings = (entry.info["config"], entry.task, SimpleNamespace(lr=train.get("lr", float("nan")),
                                                                  batch_size=train.get("batch_size", "?")))
    with st.expander("This model's task and training beside the paper's"):
        st.dataframe(comparison_table(settings), hide_index=True, width="stretch")
        st.caption("The same table as on the Train page, filled in from this checkpoint. Where the lab and "
                   "Edelman et al. (2024) differ, both are shown.")
    if isinstance(train.get("batch_size"), int):
        paper_run_panel(entry.info.get("history"), entry.task, train["batch_size"])


def _bump(key: str) -> None:
    st.session_state[key] = min(int(st.session_state.get(key, 0)) + 1, share.SEED_MAX)


def attention_page(entry: LabModel) -> None:
    """The Attention page of a Markov-chain model (ui.task_pages): its step slider, then the section."""
    attention_section(heads_at_step("att"))  # every number below is this step's


def causal_page(entry: LabModel) -> None:
    """The Causal page of a Markov-chain model (ui.task_pages)."""
    st.markdown("Patching runs the model twice, on a **clean** input and a **corrupted** one, copies one activation "
                "from the clean run into the corrupted one and measures how much of the clean behaviour comes back "
                "(Vig et al., 2020; Meng et al., 2022; Heimersheim & Nanda, 2024).")
    causal_section(entry)


def attention_section(entry: LabModel) -> None:
    task, cfg = entry.task, entry.info["config"]
    st.markdown(
        "This model was trained on **Markov chains**: every sequence comes from its own transition table, drawn "
        "afresh, so the best next-token guess counts, in this sequence, which states followed the current one "
        "(the bigram strategy; Edelman et al. 2024). A model does that with a *statistical induction head*: a "
        "block-1 head that attends to the previous position, feeding a block-2 head that attends to the tokens "
        "that followed earlier occurrences of the current token.")
    if getattr(cfg, "smeared_keys", False):
        st.markdown(
            "This model's keys are **smeared** (Olsson et al. 2022): each head's key at position j is "
            "σ(a)·k_j + (1 − σ(a))·k_{j−1}, with one trained weight a per head (the **smear** column below is its "
            "σ(a), the share of the key from its own position). A head whose key is mostly the previous "
            "position's matches on the token before each key itself, so one block can do both heads' jobs.")
    c1, c2 = st.columns([1, 3])
    seed = c1.number_input("Sample seed", 0, share.SEED_MAX, 0, key="att_mk_seed",
                           help="Each seed draws new chains (one per sequence) and a sequence from each.")
    c1.button("Draw another chain", key="att_mk_redraw", on_click=_bump, args=("att_mk_seed",))
    try:
        view = attention_view(entry, int(seed))
    except ValueError as e:
        st.error(f"This model cannot be read on its task's sequences: {e}")
        return
    c2.markdown(f"**Which heads count transitions?** {view.sentence}")
    kl = ", ".join(f"{r.strategy} {r.kl:.3f}" for r in view.kl.itertuples())
    near = view.kl.sort_values("kl")
    c2.caption(f"KL(strategy ‖ model) over these {view.n_seqs} sequences, nats: {kl}. The model's predictions are "
               f"nearest {near['strategy'].iloc[0]}, {near['kl'].iloc[1] - near['kl'].iloc[0]:.3f} nats closer than "
               f"to {near['strategy'].iloc[1]}; an untrained model is nearest some strategy too, so the nearest "
               "says which the model resembles most, and the margin how clearly.")

    st.subheader("Every head")
    st.caption("**What am I looking at?** One heatmap per head (rows: blocks, columns: heads), on the first of the "
               f"sampled sequences ({task.seq_len} tokens over states 0–{task.n_states - 1}). Row *i* is a query, "
               "column *j* a key; brighter = more attention; weights under 0.01 are not drawn. A previous-token "
               "head is a line just below the diagonal; a successor head's attention is scattered over the keys "
               "whose previous token is the query's token, which move with the sequence. Click a row (or a state "
               "in the strip below) to pin that query in every head and read where they look (shift-click adds "
               "one; a click above a diagonal releases).")
    pin = pinned(PIN, len(view.tokens))  # kept in the session: it survives a change of head, step or seed
    pinnable(charts.pattern_grid(view.raw, view.labels, pin), "att_mk_grid_pin", "query", PIN)

    st.subheader("One head, up close")
    labels = symbols.head_labels(cfg.n_layers, cfg.n_heads)
    pick = st.columns([1, 3])[0].selectbox("Head (block.head)", labels, key="att_mk_head",
                                           index=min(len(labels) - 1, cfg.n_heads))
    layer, head = symbols.parse_head_label(pick)
    left, right = chart_and_note()
    with left:
        pinnable(charts.head_heatmap(view.raw[layer, head], view.labels, pin=pin), "att_mk_head_pin", "qi", PIN)
    right.caption("**What am I looking at?** The same pattern with each position's state on the axes (position · "
                  "state). Hover a cell for the query and key and the weight.")
    right.markdown(f"**Sequence** ({len(view.tokens)} states):")
    right.code(" ".join(str(int(x)) for x in view.tokens), language=None, wrap_lines=True)

    st.subheader("Head scores")
    cols = ["prev_token", "successor"]
    table = charts.styled_scores(view.scores.drop(columns=["layer", "head"]), cols)
    if "smear" in view.scores:
        table = table.format("{:.3f}", subset=["smear"])
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(
        f"**What am I looking at?** Averaged over {view.n_seqs} sequences, each from its own chain. **prev_token** = "
        "mean A[i, i−1]; **successor** = the attention a query puts on the keys j whose previous token equals its "
        "own token (x_{j−1} = x_i: the tokens that followed earlier occurrences of it), over the queries that have "
        f"such a key. A head attending evenly scores {view.even:.2f} on successor here (about 1/{task.n_states} of "
        "the keys qualify), so that, not 0, is the baseline. The repeat task's scores (induction at a period, "
        "duplicate, the period-shift probe) need a repeated pattern, which these sequences do not have."
        + (" **smear** = σ(a), the weight of each head's key on its own position (1 − σ(a) on the previous one)."
           if getattr(cfg, "smeared_keys", False) else ""))
    st.download_button("Download the scores (CSV)", view.scores.to_csv(index=False).encode(),
                       file_name="head_scores_markov.csv", mime="text/csv", key="att_mk_csv")
    paper_panel(entry)


def causal_section(entry: LabModel) -> None:
    task = entry.task
    st.markdown(
        "**Corruption: another chain.** Each clean sequence comes from its own fresh chain; its corrupted run is a "
        "sequence of the same length from *another* chain, drawn afresh from the same prior. The corrupted "
        "context holds another chain's transition counts, so a model that counts in context predicts that chain's "
        "next states. **Metric:** minus the KL from the clean sequence's bigram strategy (the Bayes-optimal "
        "counter) to the model, over every position (0 = the model predicts exactly what counting the clean "
        "context gives); the clean next state's log-probability is shown beside it.")
    seed = st.number_input("Sample seed", 0, share.SEED_MAX, 0, key="cau_mk_seed",
                           help="Each seed draws new clean and corrupted chains.")
    try:
        out = patch_view(entry, int(seed))
    except ValueError as e:
        st.error(f"This model cannot be patched on its task's sequences: {e}")
        return
    a, b = st.columns(2)
    a.metric("−KL to bigram, clean run (nats)", f"{out['clean']['neg_kl_bigram']:.3f}")
    b.metric("−KL to bigram, corrupted run (nats)", f"{out['corrupted']['neg_kl_bigram']:.3f}")
    heads = out["heads"]
    table = heads.pivot(index="label", columns="metric", values="patch_effect").reset_index()
    table = table.rename(columns={"label": "head", "neg_kl_bigram": "effect on −KL to bigram",
                                  "logprob": "effect on log-prob"})
    left, note = st.columns([2, 3])
    left.dataframe(table.style.format("{:.3f}", subset=table.columns[1:]), hide_index=True, width="stretch")
    kl = heads[heads["metric"] == "neg_kl_bigram"]
    top = kl.loc[kl["patch_effect"].idxmax()] if kl["patch_effect"].notna().any() else None
    note.caption(
        "**What am I looking at?** Patch effect of each head: its clean output at every position put into the "
        "corrupted run, the blocks above it run again; (patched − corrupted) / (clean − corrupted), 0 = no "
        "recovery, 1 = full. "
        + (f"Head {top['label']} recovers the most ({top['patch_effect']:.2f} of the gap on −KL). " if top is not None
           else "The two runs do not differ on this metric, so no effect can be measured. ")
        + "Every position of the corrupted run is drawn afresh, the queries' own states included, so one head's "
          "clean output fights the corrupted states the rest of the model still reads: partial effects are "
          "expected.")
    with st.expander("The first clean and corrupted sequences"):
        st.code("clean:     " + " ".join(map(str, out["clean_tokens"].tolist())) + "\ncorrupted: "
                + " ".join(map(str, out["corrupted_tokens"].tolist())), language=None, wrap_lines=True)
    st.info("The rest of this page (path patching, position sweeps, the logit lens on a second copy, noising and "
            "attribution) measures a copied pattern's second copy, which Markov-chain sequences do not have.")
    paper_panel(entry)
    st.download_button("Download the patch effects (CSV)", pd.DataFrame(heads).to_csv(index=False).encode(),
                       file_name="patch_effects_markov.csv", mime="text/csv", key="cau_mk_csv")
    _ = task
