"""The Train page's settings form: the task, depth, periods (or the Markov chains' states and prior), the
advanced settings and the experiments on the training itself, read back as one
core.training.run_config.RunConfig (each widget's value given to RunConfig.of by its setting's name)."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import streamlit as st

from core.model.symbols import head_labels
from core.training.markov import MARKOV_TASK, MARKOV_TRAIN
from core.training.overview import initial_logit_bias
from core.training.presets import DEFAULT_PRESET, get_preset
from core.training.run_config import UI_MAX_LAYERS, RunConfig
from ui.cache import per_code

LR_CHOICES = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
BATCH_CHOICES = [4, 8, 16, 32, 64, 128]


@per_code(name="train.init_bias")
def _init_bias(enlarged: bool) -> float:
    """Std over tokens of the per-token logit bias of the default model at step 0 (core.training.overview)."""
    p = get_preset(DEFAULT_PRESET)
    train = p.train if enlarged else replace(p.train, embed_scale=1.0, embed_shared=0.0)
    return initial_logit_bias(p.model, train)["bias_std"]


@st.cache_data(show_spinner=False)
def _shipped_onset() -> str | None:
    """core.training.onset.onset_sentence of the shipped default run's history (None without the file), read
    from its stored info (ui.state.ShippedModel: no checkpoint loaded)."""
    from core.training.onset import onset_sentence
    from ui.state import shipped_models

    entry = next((m for m in shipped_models() if m.file == f"{DEFAULT_PRESET}.pt"), None)
    if entry is None:
        return None
    return onset_sentence(entry.info["history"], entry.info["config"].vocab_size)


WIDGET_KEYS = ("tr_task", "tr_layers", "tr_periods", "tr_seq_len", "tr_bias", "tr_shared", "tr_lr", "tr_batch",
               "tr_steps", "tr_seed", "tr_hold", "tr_knock", "tr_states", "tr_alpha", "tr_mk_len", "tr_mk_shared",
               "tr_mk_steps", "tr_mk_smear")
TASK_NAMES = {"repeat": "Repeated random patterns (induction heads)",
              "markov": "Markov chains (statistical induction heads)"}
ALPHA_CHOICES = [0.1, 0.3, 1.0, 3.0, 10.0]
NO_HEAD = "none"


def settings_widgets() -> RunConfig:
    """The settings widgets. Streamlit forgets a widget's value while another page is shown, so the
    values are also kept under "tr_saved" and come back as the defaults on return."""
    d, saved = _defaults(), st.session_state.get("tr_saved", {})
    task = st.radio("Task", list(TASK_NAMES), list(TASK_NAMES).index(saved.get("tr_task", "repeat")),
                    format_func=TASK_NAMES.get, key="tr_task", horizontal=True,
                    help="Repeated patterns: every later token can be copied from one period back. Markov chains: "
                         "each sequence comes from its own random transition table, so the best guess counts which "
                         "tokens followed the current one earlier in the same sequence (Edelman et al., 2024).")
    markov = task == "markov"
    left, right = st.columns(2)
    left.slider("Depth: attention blocks", 0, UI_MAX_LAYERS, saved.get("tr_layers", d.n_layers), key="tr_layers",
                help="0 blocks = embedding only (bigram statistics); induction needs 2 (or 1 with smeared keys, "
                     "a Markov-task option under Advanced).")
    if markov:
        a, b = right.columns(2)
        a.slider("States", 2, 8, saved.get("tr_states", MARKOV_TASK.n_states), key="tr_states",
                 help="How many different tokens a chain has (the model's vocabulary).")
        b.select_slider("Dirichlet concentration", sorted(set(ALPHA_CHOICES) | {MARKOV_TASK.concentration}),
                        saved.get("tr_alpha", MARKOV_TASK.concentration), key="tr_alpha",
                        format_func=lambda v: f"{v:g}",
                        help="Every row of a sequence's transition table is drawn from a symmetric Dirichlet with "
                             "this concentration: small values make peaked rows (a state has a favourite "
                             "successor), large values rows close to uniform. 1 = uniform over all rows (the paper's).")
    else:
        right.slider("Period range L (pattern length)", 2, 64, saved.get("tr_periods", (d.period_min, d.period_max)),
                     key="tr_periods",
                     help="Each sequence repeats a random pattern whose length is drawn from this range (at least 2: "
                          "a pattern of one token repeats that token, and leaves nothing to look up).")
    with st.expander("Advanced: sequence length, bias, initial embedding, learning rate, batch, steps, seed"):
        a, b, c = st.columns(3)
        if markov:
            a.slider("Sequence length", 8, 192, saved.get("tr_mk_len", MARKOV_TASK.seq_len), key="tr_mk_len")
        else:
            a.slider("Sequence length", 8, 192, saved.get("tr_seq_len", d.seq_len), key="tr_seq_len")
        a.checkbox("Biases on q, k, v and output", saved.get("tr_bias", d.bias), key="tr_bias")
        if markov:
            a.checkbox("Enlarged shared embedding", saved.get("tr_mk_shared", False), key="tr_mk_shared",
                       help="Off by default on this task: the plain embedding starts the model near the uniform "
                            "strategy, the first stage; the enlarged one starts it betting on particular tokens.")
            a.checkbox("Smeared keys", saved.get("tr_mk_smear", False), key="tr_mk_smear",
                       help="Olsson et al. (2022): each head's key at position j becomes σ(a)·k_j + "
                            "(1 − σ(a))·k_{j−1}, with one trained weight a per head (starting at σ(a) = 0.5). "
                            "The key then carries the previous token, so one block can attend to the tokens that "
                            "followed the current one, which a plain block cannot. The shipped "
                            "markov-1block-smeared run is one block with it.")
        else:
            a.checkbox("Enlarged shared embedding", saved.get("tr_shared", d.shared_embedding),
                   key="tr_shared",
                   help="The default start: W_E three times larger than plain, plus one direction added to every "
                        "token. Measured on seeds 0–2 of the default run, the plateau before the drop is about "
                        "three times shorter than from the plain embedding. "
                        + (f"The previous-token head does not form at once: in the shipped {DEFAULT_PRESET} run "
                           f"{_shipped_onset()}. " if _shipped_onset() else "")
                        + "The shared direction is not free at the output: through "
                        "the tied unembedding it gives every token a fixed logit bias, whose spread is "
                        f"{_init_bias(True):.1f} nats at the start ({_init_bias(False):.2f} from the plain "
                        "embedding). Untick it to start from the plain embedding.")
        b.select_slider("Learning rate", sorted(set(LR_CHOICES) | {d.lr}), saved.get("tr_lr", d.lr), key="tr_lr",
                        format_func=lambda v: f"{v:g}")
        b.select_slider("Batch size", sorted(set(BATCH_CHOICES) | {d.batch_size}), saved.get("tr_batch", d.batch_size),
                        key="tr_batch")
        if markov:  # its own widget: the Markov runs' default length is not the repeat task's
            c.number_input("Steps", 1, 20000, saved.get("tr_mk_steps", MARKOV_TRAIN.steps), step=50, key="tr_mk_steps")
        else:
            c.number_input("Steps", 1, 20000, saved.get("tr_steps", d.steps), step=50, key="tr_steps")
        c.number_input("Seed", 0, 999_999, saved.get("tr_seed", d.seed), key="tr_seed")
    experiment_widgets(saved)
    st.button("Restore default settings", on_click=restore_defaults, key="tr_defaults",
              help="Every setting above back to its default, for both tasks (the task chosen stays).")
    # merged into the saved values: the widgets of the task not shown keep theirs for when it is picked again
    st.session_state["tr_saved"] = saved | {k: st.session_state[k] for k in WIDGET_KEYS if k in st.session_state}
    return settings_from_state()


def default_values() -> dict:
    """Every setting widget's default but the task's: the repeat task's run's (RunConfig.of()) and the Markov
    task's own."""
    d = _defaults()
    return {"tr_layers": d.n_layers, "tr_periods": (d.period_min, d.period_max), "tr_seq_len": d.seq_len,
            "tr_bias": d.bias, "tr_shared": d.shared_embedding, "tr_lr": d.lr, "tr_batch": d.batch_size,
            "tr_steps": d.steps, "tr_seed": d.seed, "tr_hold": NO_HEAD, "tr_knock": NO_HEAD,
            "tr_states": MARKOV_TASK.n_states, "tr_alpha": MARKOV_TASK.concentration, "tr_mk_len": MARKOV_TASK.seq_len,
            "tr_mk_shared": False, "tr_mk_steps": MARKOV_TRAIN.steps, "tr_mk_smear": False}


def restore_defaults() -> None:
    """Every setting widget but the task back to its default, a callback. Set through the Session State API,
    not deleted: a deleted key resets the server's value while the browser keeps showing (and sending) its own."""
    defaults = default_values()
    for key, value in defaults.items():
        st.session_state[key] = value
    st.session_state["tr_saved"] = st.session_state.get("tr_saved", {}) | defaults


def _defaults():
    """The repeat task's default run as the widgets show it (flat, by setting name)."""
    run = RunConfig.of()
    m, t, tr = run.model, run.task, run.train
    return SimpleNamespace(n_layers=m.n_layers, bias=m.bias, period_min=t.period_min, period_max=t.period_max,
                           seq_len=t.seq_len, lr=tr.lr, batch_size=tr.batch_size, steps=tr.steps, seed=tr.seed,
                           shared_embedding=run.init == "shared")


def settings_from_state() -> RunConfig:
    """The run the widgets hold now (read in callbacks too, so a click uses the latest values): each widget's
    value under its setting's name, given to RunConfig.of."""
    d, saved = _defaults(), st.session_state.get("tr_saved", {})

    def get(key, default):
        return st.session_state.get(key, saved.get(key, default))

    hold, knock = get("tr_hold", NO_HEAD), get("tr_knock", NO_HEAD)
    settings = {"n_layers": get("tr_layers", d.n_layers), "bias": get("tr_bias", d.bias), "lr": get("tr_lr", d.lr),
                "batch_size": get("tr_batch", d.batch_size), "seed": int(get("tr_seed", d.seed)),
                "hold": None if hold == NO_HEAD else hold, "knockout": None if knock == NO_HEAD else knock}
    if get("tr_task", "repeat") == "markov":
        return RunConfig.of(task="markov", **settings, seq_len=int(get("tr_mk_len", MARKOV_TASK.seq_len)),
                            steps=int(get("tr_mk_steps", MARKOV_TRAIN.steps)),
                            shared_embedding=bool(get("tr_mk_shared", False)),
                            n_states=int(get("tr_states", MARKOV_TASK.n_states)),
                            concentration=float(get("tr_alpha", MARKOV_TASK.concentration)),
                            smeared_keys=bool(get("tr_mk_smear", False)))
    return RunConfig.of(task="repeat", **settings, period=get("tr_periods", (d.period_min, d.period_max)),
                        seq_len=get("tr_seq_len", d.seq_len), steps=int(get("tr_steps", d.steps)),
                        shared_embedding=bool(get("tr_shared", d.shared_embedding)))


def experiment_widgets(saved: dict) -> None:
    """Experiments on the training itself (core.training.interventions), each against an ordinary run."""
    heads = head_labels(UI_MAX_LAYERS, 4)
    with st.expander("Experiments on the training itself: hold a previous-token head, knock a head out"):
        a, b = st.columns(2)
        hold_options = [NO_HEAD] + [h for h in heads if h.startswith("1.")]
        a.selectbox("Hold a block-1 head on the previous token", hold_options,
                    hold_options.index(saved.get("tr_hold", NO_HEAD)), key="tr_hold",
                    help="From step 0, this head attends only to the position before each query.")
        knock_options = [NO_HEAD] + heads
        b.selectbox("Knock a head out for the whole run", knock_options,
                    knock_options.index(saved.get("tr_knock", NO_HEAD)), key="tr_knock",
                    help="Its output weights W_O start at zero and never get a gradient, so it writes nothing.")
        st.caption(
            "In the spirit of Singh et al. (2024), who clamp parts of the induction circuit and watch the phase "
            "change move: train once with an experiment and once without it, same seed, and compare the step "
            "where the loss drops. The hold changes the head's computation, not its weights: its attention is "
            "set to exactly one on the previous position (the first position on itself), which a softmax head "
            "only approaches, while its W_V and W_O learn what to write and its W_Q and W_K get no gradient. "
            "As in Singh et al.'s code, the hold stays part of the model you keep: its file records it, and the "
            "history, the banner, the timeline and every other page measure that same held model. A "
            "knocked-out head is exact and kept. For plain against enlarged initial embedding, untick "
            "\"Enlarged shared embedding\" above. How far each of the three moves the drop changes from seed to seed, "
            "so compare several seeds (the section below on several seeds) before trusting one pair of runs.")
