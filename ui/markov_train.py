"""The Train page's Markov-chain sections: the live KL-to-each-strategy chart with the measured stages, its
explanation and numbers, the lab's settings beside the paper's, and the result of a finished run."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from core.pool.status import RunStatus
from core.training import live
from core.training import markov as mk
from ui import numbers
from ui.charts import train as charts
from ui.charts.kept import draw
from ui.state import MARKOV_DIR, manifest_rows

if TYPE_CHECKING:
    from core.pool.runs import LiveRun

INTRO = (
    "**A model that cannot memorise a chain must count in context: watch it go from counting tokens to counting "
    "which token follows which.**\n\n"
    "Each training sequence comes from its own **Markov chain**: a fresh transition table is drawn for every "
    "sequence (each row from a Dirichlet prior), and the tokens follow it. No table is ever seen twice, so "
    "the model cannot memorise one; the best it can do is *count in context*: which tokens followed the "
    "current one earlier in this same sequence. Edelman et al. (2024, \"The evolution of statistical "
    "induction heads\") found that a 2-layer attention-only transformer gets there in stages: first a "
    "uniform guess, then the in-context token frequencies (unigram), then the in-context transition "
    "counts (bigram), the job of a *statistical induction head*. Here, at 3 states, the uniform stage is only the "
    "untrained model's first one to three logs (over the ten seeds of the Laws page's Markov table), no plateau; "
    "the unigram and bigram stages are the ones to watch. Press **Train** and watch the stages.")


def live_markov_charts(run: LiveRun) -> None:
    """The live KL chart, its explanation and the head scores of a Markov-chain run."""
    task, hist = run.task_cfg, run.history()
    span = run.total_steps if run.active else max(run.step, 1)
    st_ = mk.stages(hist, task)
    chart, note = st.columns([3, 1])
    draw(chart, charts.strategy_kl_chart(mk.kl_frame(hist, task), mk.stage_frame(hist, task), task.strategies,
                                         span), width="stretch")
    chart.markdown(_numbers(st_, hist[-1] if hist else {}, task))
    note.markdown(
        "**What am I looking at?** How far the model's next-token predictions are from each strategy, "
        "measured on a fixed batch of evaluation sequences: the KL divergence KL(strategy ‖ model), averaged "
        "over every position (0 = the model predicts exactly what that strategy predicts; log scale). "
        "*Uniform* gives every state 1/k; *unigram* counts how often each state has appeared so far; *bigram* "
        "counts which states followed the current one so far. Both counts start from the prior's "
        f"pseudo-count ({task.concentration:g} each), which makes the bigram strategy the exact Bayes-optimal "
        "prediction. The dashed lines mark where a strategy became the nearest, measured from the logged "
        "curves (nearest at two logs in a row; the first log is the untrained model).")
    _per_position(hist, task)
    heads = live.head_score_frame(hist)
    if heads.empty:
        st.info("A 0-block model has no attention heads: its prediction depends only on the current token, "
                "so it can learn neither count.")
        return
    chart, note = st.columns([3, 1])
    draw(chart, charts.head_score_spec(heads, None, span))
    note.markdown(
        "**What am I looking at?** Each line is one head (colour) in one block (column). Top row: the share "
        "of its attention on the previous position. Bottom row: the share on tokens whose *previous* token is "
        "the current one, i.e. the tokens that followed earlier occurrences of it, which is what the bigram "
        "strategy counts. A statistical induction head needs both: a block-1 head that copies each position's "
        "previous token into it, and a block-2 head that matches on that copy. "
        + ("This model's keys are smeared (Olsson et al. 2022): each key mixes in the previous position's, so a "
           "head of one block can match on the previous token without a previous-token head before it. "
           if getattr(run.model_cfg, "smeared_keys", False) else "One block cannot do the match. ") +
        f"With {task.n_states} states a head that spreads its attention evenly already scores "
        f"{_even_share(task):.2f} on the bottom row on this batch (the share of keys that qualify: "
        f"1/{task.n_states} only if the states were independent and uniform).")


def _even_share(task) -> float:
    from core.reading.markov import even_share  # here, not at the top: it imports torch

    return even_share(task)


def _numbers(st_: dict, last: dict, task) -> str:
    parts = []
    for name in task.strategies:
        onset = st_["onset"][name]
        parts.append(f"{name} from step {onset}" if onset is not None else f"{name} not (yet) nearest")
    text = "In this run: " + "; ".join(parts) + "."
    if last.get("loss") is not None and last.get("loss_optimal") is not None:
        text += (f" At step {last['step']} its loss is {last['loss']:.3f} nats against the "
                 f"{task.strategies[-1]} strategy's {last['loss_optimal']:.3f} on the same batch.")
    return text


def _per_position(hist: list[dict], task) -> None:
    """KL by position at the latest log: the bigram strategy needs context before it pays."""
    last = next((r for r in reversed(hist) if "kl_positions" in r), None)
    if last is None:
        return
    rows = [{"target position": t + 1, "strategy": name, "kl": v}
            for name, values in last["kl_positions"].items() for t, v in enumerate(values)]
    df = pd.DataFrame(rows)
    import altair as alt

    colours = alt.Scale(domain=list(task.strategies), range=charts.STRATEGY_COLOURS[: len(task.strategies)])
    chart = alt.Chart(df).mark_line().encode(
        x=alt.X("target position:Q"), y=alt.Y("kl:Q", title="KL (nats)"),
        color=alt.Color("strategy:N", scale=colours, sort=list(task.strategies)),
        tooltip=["strategy:N", "target position:Q", alt.Tooltip("kl:Q", format=".4f")]).properties(height=200)
    left, note = st.columns([3, 1])
    left.altair_chart(chart, use_container_width=True)
    note.markdown(
        f"**What am I looking at?** The same KL at step {last['step']}, position by position (the mean over the "
        "evaluation sequences). Early in a sequence there is little to count, so the strategies agree and "
        "every KL is small; later, a model that counts transitions pulls away from the unigram strategy "
        "toward the bigram one.")


def comparison_table(run_or_settings) -> pd.DataFrame:
    """The lab's settings for this run beside the paper's (mk.PAPER, with where each was read)."""
    model, task, train = run_or_settings.configs() if hasattr(run_or_settings, "configs") else run_or_settings
    lab = {"states": str(task.n_states), "prior": f"Dirichlet({task.concentration:g}) per row",
           "sequence length": str(task.seq_len), "first token": "uniform",
           "model": f"{model.n_layers} attention-only blocks, {model.n_heads} heads, width {model.d_model}, rotary"
                    + (", smeared keys (Olsson et al. 2022)" if getattr(model, "smeared_keys", False) else ""),
           "optimizer": f"AdamW, lr {train.lr:g}, batch {train.batch_size}",
           "strategies": f"add-{task.concentration:g} counts (the prior's posterior mean)",
           "distance": "KL(strategy ‖ model), mean over positions"}
    return pd.DataFrame([{"": k, "this lab": lab[k], "Edelman et al. (2024)": mk.PAPER[k][0],
                          "read from": mk.PAPER[k][1]} for k in lab])


def comparison_panel(settings) -> None:
    with st.expander("This lab's Markov task beside the paper's"):
        st.dataframe(comparison_table(settings), hide_index=True, width="stretch")
        st.caption("Where the two differ, both are shown: the lab's model and optimizer are chosen to reach the "
                   "bigram stage in seconds on a CPU; the uniform first token makes the count strategies exactly "
                   "Bayes-optimal (the paper draws it from the chain's stationary distribution).")
        st.markdown(_shipped_beside_paper())


def _shipped_beside_paper() -> str:
    """The paper's 3-state run's stages beside the shipped 2-block run's (its manifest row), in sequences seen."""
    paper = mk.PAPER_RUN["onset_sequences"]
    text = (f"The paper's 3-state run is nearest to the unigram strategy after about {paper['unigram']:,} training "
            f"sequences and to the bigram strategy after about {paper['bigram']:,} ({mk.PAPER_RUN['source']}).")
    row = next((r for r in manifest_rows(MARKOV_DIR) if r["preset"] == mk.DEFAULT_MARKOV), None)
    onset = row["figures"]["onset"] if row else {}
    if onset.get("unigram") is not None and onset.get("bigram") is not None:
        b = mk.MARKOV_PRESETS[mk.DEFAULT_MARKOV].train.batch_size
        text += (f" The shipped {mk.DEFAULT_MARKOV} run (these default settings, seed {row['seed']}): after "
                 f"{onset['unigram'] * b:,} and {onset['bigram'] * b:,} (steps {onset['unigram']} and "
                 f"{onset['bigram']} at batch {b}). A finished run sets its own stages beside the paper's.")
    return text


def paper_run_panel(history: list[dict] | None, task, batch_size: int) -> None:
    """A run's stages and KLs beside the paper's 3-state run (mk.beside_paper), in training sequences seen."""
    rows, sentence = mk.beside_paper(history, task, batch_size)
    if not rows:
        return
    with st.expander("This run's stages beside the paper's run"):
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.markdown(sentence)
        st.caption(f"The paper's column is {mk.PAPER_RUN['source']}: its own model, rate, batch and sequence "
                   "length (the settings table; the sentence above names each that differs), x = training "
                   "sequences seen. The lab's column is this run's logged history, its stages read as on the Train "
                   "page's chart (the nearest strategy at two logs in a row); the unigram stage's KLs are the "
                   "median over its logs, in the lab's measure (mean over positions) and the paper's (last "
                   "position).")


def result_markov(run: LiveRun) -> None:
    """A finished or stopped Markov run: its numbers and its checkpoint (also in the sidebar picker)."""
    if run.status == RunStatus.DIVERGED:
        st.error(f"Training diverged at step {run.step}: the loss became infinite or NaN. Lower the learning rate.")
        return
    if run.status == RunStatus.CANCELLED:
        st.warning("Stopped before the first step finished: there is no model to keep.")
        return
    if run.status == RunStatus.FAILED:
        st.error(run.error)
    if run.checkpoint is None:
        return
    info, data = run.info, run.checkpoint
    hist = info["history"] or []
    last = hist[-1] if hist else {}
    kl = ", ".join(f"{n} {numbers.human(last.get(f'kl_{n}', math.nan))}" for n in run.task_cfg.strategies)
    st.success(f"{run.status.capitalize()} at step {run.step}: KL to each strategy {kl} nats. "
               + mk.stage_sentence(hist, run.task_cfg))
    paper_run_panel(hist, run.task_cfg, run.settings.train.batch_size)
    st.caption("This model is now in the sidebar picker: the Attention page shows its patterns and which heads "
               "count transitions, the Causal page patches it with another chain. Download it to keep it.")
    st.download_button("Download this checkpoint (.pt)", data, file_name=f"tinycharlm-markov-step{run.step}.pt",
                       mime="application/octet-stream", key="tr_download")


def shipped_panel() -> None:
    """The shipped Markov runs' stages, as their manifest rows record them (read from each file's history by
    core.training.markov.figures when it was written; tests/test_markov_shipped.py checks they still are)."""
    rows = manifest_rows(MARKOV_DIR)
    if not rows:
        st.caption("No shipped Markov-chain run is installed with this copy of the lab.")
        return
    lines = []
    for r in rows:
        onset, final = r["figures"]["onset"], r["figures"]["final"]
        stages_ = "; ".join(f"{n} from step {s}" if s is not None else f"{n} never" for n, s in onset.items())
        lines.append(f"- **{r['preset']}** (seed {r['seed']}): nearest strategy {stages_}; at the end KL to bigram "
                     f"{numbers.human(final['kl_bigram'])} nats, loss {final['loss']:.3f} against the optimum "
                     f"{final['loss_optimal']:.3f}.")
    st.markdown("**The shipped Markov-chain runs** (the default settings):\n" + "\n".join(lines))
    st.caption("Train the default settings with seed 0 to watch the same run (the smeared one: Depth 1 and "
               "Smeared keys under Advanced). Every one is in the sidebar picker for the Attention and Causal "
               "pages; the lab's files record the command that trains each one again.")


def settings_panels(settings, bad: str | None, active: bool) -> None:
    """The Train page's panels below a Markov-chain run (ui.task_pages): the lab's settings beside the paper's,
    for settings that can be trained (else the page's error says why not), and the shipped runs."""
    if not bad:
        comparison_panel(settings)
    if not active:
        shipped_panel()
