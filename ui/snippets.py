"""Snippet builders for the "In Python" panels: for the widget values on screen, the `core` calls
that compute what a panel shows (the same public functions the page calls). Each returns a
ui.python_panel.Snippet whose code runs as-is from the repository root."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.steps import split_step_key


def load(entry) -> str:
    """The lines that load the picked model (a ui.state.LabModel, or its key): a shipped file by its
    path, anything else by the file the student downloads (the Train page) or uploaded; a snapshot's
    entry then takes that step's weights."""
    key, step = split_step_key(getattr(entry, "key", entry))
    if key.startswith("shipped:"):
        path = "checkpoints/" + key.split(":", 1)[1]
        note = ""
    else:
        path = "my_model.pt"
        note = "  # this session's model: download it (Train page) or use the file you uploaded"
    code = (f"from core.model.checkpoints import read_checkpoint\n"
            f"model, info = read_checkpoint({path!r}){note}\n"
            f"task = info[\"task\"]  # the task it was trained on\n")
    if step is not None:
        code += (f"from core.model.snapshots import model_at_step\n"
                 f"model = model_at_step(model, info, {step})  # the weights at training step {step}\n")
    return code


def _snip(title: str, entry, body: str, **checks: str) -> Snippet:
    return Snippet(title, load(entry) + body.strip() + "\n", checks)


# ---------------------------------------------------------------------------------------------
# Attention


def _view(period, seed, text) -> str:
    if text is not None:
        return f"view = analysis.text_view(model, {text!r})\n"
    return f"view = analysis.task_sequence_view(model, task, period={period}, seed={seed})\n"


def attention_pattern(entry, period, seed, text, label: str, weighted: bool) -> Snippet:
    layer, head = (int(x) - 1 for x in label.split("."))
    which = "weighted" if weighted else "raw"
    return _snip(f"Head {label}'s {'value-weighted ' if weighted else ''}attention pattern on this sequence.", entry,
                 "from core.reading import analysis\n" + _view(period, seed, text) + f"""
pattern = view.{which}[{layer}, {head}]  # head {label}: [query i, key j]; view.{which} is [block, head, i, j]
print("".join(view.labels))
print(pattern.round(2))
""", pattern="pattern")


def attention_scores(entry, period, seed, text) -> Snippet:
    return _snip("Every head's scores (block and head counted from 1).", entry,
                 "from core.reading import analysis\n" + _view(period, seed, text) + """
print(view.scores.round(3).to_string(index=False))
""", scores="view.scores.drop(columns=['block', 'head'])")


def attention_offsets(entry, period, seed, text) -> Snippet:
    return _snip("Mean attention k positions back, A[i, i-k], for every head and offset.", entry,
                 "from core.reading import analysis\n" + _view(period, seed, text) + """
offsets = view.offsets  # block, head, offset, mass
print(offsets.pivot_table(index="offset", columns=["block", "head"], values="mass").round(3).head(40))
""", mass="view.offsets['mass']")


def period_probe(entry, period) -> Snippet:
    return _snip("The period-shift probe: accuracy at every period, and the metrics at the probe period.", entry, f"""
from core.reading import analysis
sweep = analysis.sweep_view(model, task)  # one row per period
probe = analysis.probe_view(model, task, period={period})
print(sweep.round(3).to_string(index=False))
print(probe["metrics"])
print(probe["mass"].round(3).to_string(index=False))
""", metrics="[probe['metrics'][k] for k in ('acc_second_copy', 'acc_later_copies', 'loss_later_copies')]",
                 mass="probe['mass']['mass']")


# ---------------------------------------------------------------------------------------------
# Circuits


def _head(label: str) -> str:
    layer, head = (int(x) - 1 for x in label.split("."))
    return (f"from core.reading import analysis\n"
            f"hv = analysis.head_circuit_view(model, task, layer={layer}, head={head})  # head {label}\n")


def head_circuits(entry, label: str) -> Snippet:
    return _snip(f"Head {label}'s QK and OV circuits and their singular values.", entry, _head(label) + """
print("W_QK", hv["qk"].shape, "rank", hv["qk_rank"], "singular values", hv["qk_s"].round(3))
print("W_OV", hv["ov"].shape, "rank", hv["ov_rank"], "singular values", hv["ov_s"].round(3))
""", qk_s="hv['qk_s']", ov_s="hv['ov_s']", ranks="[hv['qk_rank'], hv['ov_rank']]")


def rotary_profile(entry, label: str) -> Snippet:
    return _snip(f"Head {label}'s score against the offset i - j (rotary positional profile).", entry,
                 _head(label) + """
for name, scores in hv["profile"].items():
    print(name, scores.round(3))
""", profile="list(hv['profile'].values())")


def copying(entry, label: str) -> Snippet:
    return _snip(f"Head {label}'s OV copying matrix C = W_E W_OV W_Eᵀ and its copying scores.", entry,
                 _head(label) + """
print("C", hv["C"].shape)
print("this head:", hv["copy"])
print("its block, heads summed:", hv["block_copy"])
print("effective embedding:", hv["copy_effective"], hv["block_copy_effective"])
""", copy="hv['copy']", block="hv['block_copy']", effective="[hv['copy_effective'], hv['block_copy_effective']]")


def copying_table(entry) -> Snippet:
    return _snip("The diagonal-on-top copying score of every head and every block's sum.", entry, """
from core.reading import analysis
table = analysis.copying_table_view(model, task)  # effective columns: self-attention measured on the task
print(table.round(3).to_string(index=False))
""", top1="table['ov_diag_top1']")


def composition(entry) -> Snippet:
    return _snip("Q, K and V composition scores between blocks, and the random-matrix baseline.", entry, """
from core.reading import analysis
scores, baseline = analysis.composition_view(model)
print(baseline)
print(scores.round(3).to_string(index=False))
""", score="scores['score']", baseline="baseline")


def ablation(entry, heads: list[str], mode: str) -> Snippet:
    spec = {h: mode for h in heads}
    return _snip("Copy metrics before and after ablating the chosen heads.", entry, f"""
from core.reading import analysis
table = analysis.ablation_view(model, task, {spec!r})  # {{"block.head": "zero" or "mean"}}
print(table.round(3))
""", table="table[['clean', 'ablated', 'delta']]")


def ablation_grid(entry, mode: str) -> Snippet:
    return _snip(f"Each head {mode}-ablated on its own: the change in later-copy loss and accuracy.", entry, f"""
from core.reading import analysis
grid = analysis.ablation_grid_view(model, task, mode={mode!r})
print(grid.round(3).to_string(index=False))
""", grid="grid[['loss_later_delta', 'acc_later_delta']]")


# ---------------------------------------------------------------------------------------------
# What depth can express


def zero_block(entry) -> Snippet:
    return _snip("The zero-block model against the Gram form and the task's bigram statistics.", entry, """
from core.reading import bigrams
z = bigrams.zero_block_summary(model, task)
print({k: round(v, 4) for k, v in z.items() if isinstance(v, float)})
""", numbers="[z['model_loss'], z['bigram_loss'], z['mutual_info'], z['mutual_info_bias']]")


def logit_paths(entry, seed: int, pos: int, which: str) -> Snippet:
    target = "int(tokens[pos + 1])" if which == "target" else "None"
    meaning = "the true next token" if which == "target" else "None: the model's top prediction"
    return _snip("One prediction's logit split into paths (centered logits; the bars add up to the total).", entry, f"""
from core.reading import paths
tokens, period = paths.example_sequence(task, model.cfg.vocab_size, seed={seed})
pos = {pos}  # predicting the token at pos + 1
token = {target}  # {meaning}
res = paths.logit_contributions(model, tokens, pos, token)
for label, value in zip(res["labels"], res["values"]):
    print(f"{{label:>10}} {{value:+.3f}}")
print("model's logit", round(res["total"], 3), "p =", round(res["prob"], 3),
      "sum of paths", round(sum(res["values"]), 3))
""", values="res['values']", total="[res['total'], res['prob']]")


def skip_trigrams(entry, block: int, a: int, b: int, n_heads: int) -> Snippet:
    return _snip(f"Block {block + 1}'s skip-trigram rules, OV row of token {a} and QK row of token {b}, per head.",
                 entry, f"""
from core.reading import circuits
from core.model import symbols
for h in range({n_heads}):
    print("head", symbols.head_label({block}, h))
    for rule in circuits.skip_trigrams(model, {block}, h, k=6):
        print("  ", rule)
    print("   OV, attending to token {a} boosts:", circuits.ov_top(model, {block}, h, {a}, k=4))
    print("   QK, at token {b} it prefers:", circuits.qk_top(model, {block}, h, {b}, k=4))
""", rules=f"[[[r['qk_margin'], r['ov_logit']] for r in circuits.skip_trigrams(model, {block}, h, k=6)] "
          f"for h in range({n_heads})]")


def mean_paths(entry) -> Snippet:
    return _snip("The right token's logit split into paths, averaged over later-copy targets.", entry, """
from core.reading import paths
res = paths.mean_target_contributions(model, task, n_seqs=32, seed=0, part="later")
by_kind = paths.sum_by_kind(res)
for label, value in zip(res["labels"], res["values"]):
    print(f"{label:>10} {value:+.3f}")
print(by_kind, "total", round(res["total"], 3))
""", values="res['values']", by_kind="by_kind")


def depth_composition(entry) -> Snippet:
    return _snip("K- and V-composition between every block-1 and block-2 head, from the weights.", entry, """
from core.reading import composition
K = composition.composition_matrix(model, "K")  # [writer head in block 1, reader head in block 2]
V = composition.composition_matrix(model, "V")
print(K.numpy().round(3))
print(V.numpy().round(3))
""", K="K", V="V")


def score_terms(entry, head: int) -> Snippet:
    return _snip(f"Head 2.{head + 1}'s attention score at the induction target, split into query × key paths.",
                 entry, f"""
from core.reading import score_groups, score_terms
terms = score_terms.mean_induction_score_terms(model, task, 1, {head}, n_seqs=8, seed=0)
roles = score_groups.head_roles(model, task, 0)  # block 1's heads: self-attending, previous-token or other
groups = score_groups.score_groups(terms, roles)
print("margin", round(terms["total"], 3))
print(groups)
""", total="terms['total']", groups="groups")


# ---------------------------------------------------------------------------------------------
# In-context learning


def icl_predictions(entry, pattern_code: str, repeat: bool) -> Snippet:
    tile = ("tokens, period = icl.tile(pattern, task.seq_len), len(pattern)\n" if repeat
            else "tokens, period = pattern, None\n")
    return _snip("The model's guess at every position of your pattern.", entry,
                 "from core.model import symbols\nfrom core.training import icl\n" + pattern_code + tile + """
rows = icl.predict_each(model, tokens, period)
for r in rows:
    print(r["position"], symbols.token_char(r["target"]), symbols.token_char(r["predicted"]),
          round(r["p_predicted"], 3), r.get("copy"))
""", p="[r['p_predicted'] for r in rows]", correct="[r['correct'] for r in rows]")


def typed_pattern(text: str) -> str:
    return (f"pattern = symbols.encode_text({text!r}, model.cfg.vocab_size,\n"
            f"                             max_len=min(task.seq_len, symbols.MAX_TEXT_LEN))\n")


def drawn_pattern(pool: str, length: int, seed: int) -> str:
    return (f"drawn_from = sorted(set(symbols.encode_text({pool!r}, model.cfg.vocab_size)))\n"
            f"pattern = icl.random_pattern(drawn_from, {length}, seed={seed})\n")


def restart_curve(entry, n_seqs: int) -> Snippet:
    return _snip("Accuracy after a restart to a fresh pattern, and the one-token-or-two probe.", entry, f"""
from core.reading import restarts
curve = restarts.restart_curve(model, task, n_seqs={n_seqs}, seed=0)
print(curve["summary"])
""", summary="[curve['summary'][k] for k in ('first_copy', 'second_copy_first_token', 'first_predictable', 'rest')]")


def restart_example(entry, seed: int) -> Snippet:
    return _snip("One sampled sequence with a restart, predicted token by token.", entry, f"""
from core.training import icl
from core.reading import restarts
from core.model import symbols
ex = restarts.restart_example(task, model.cfg.vocab_size, seed={seed})
rows = icl.predict_each(model, ex["tokens"])
print("restart at", ex["restart"], "old period", ex["old_period"], "new period", ex["new_period"])
print("".join(symbols.token_char(r["predicted"]) for r in rows))
""", p="[r['p_predicted'] for r in rows]")


def in_context_check(entry, n_seqs: int) -> Snippet:
    return _snip("Training sequences replayed from the checkpoint against fresh and swapped ones.", entry, f"""
from core.training import icl
check = icl.in_context_check(model, task, info.get("train"), n_seqs={n_seqs})
for name in ("seen_mid", "seen_last", "fresh", "swapped"):
    print(name, check[name])
""", acc="[check[n]['acc_second'] for n in ('seen_mid', 'seen_last', 'fresh', 'swapped') if check[n] is not None]")


# ---------------------------------------------------------------------------------------------
# Head archetypes (the generated patterns need no model)


def _arc(text: str, sharpness: float, rest: float) -> str:
    return (f"from core.archetypes import catalogue as arc\n"
            f"tokens = arc.tokenize({text!r})\n"
            f"settings = arc.ArchetypeSettings({sharpness!r}, {rest!r})  # sharpness, rest on BOS\n")


def archetype_pattern(text, name, sharpness, rest) -> Snippet:
    return Snippet(f"The generated {name} pattern on the sentence.", _arc(text, sharpness, rest) + f"""
pattern = arc.archetype_pattern({name!r}, tokens, settings)  # [query, key]
print(arc.token_labels(tokens))
print(pattern.numpy().round(2))
""", {"pattern": "pattern"})


def detector_table(text, sharpness, rest, rows) -> Snippet:
    return Snippet("Every archetype scored by every detector.", _arc(text, sharpness, rest) + f"""
table = arc.detector_table(tokens, settings, {rows!r})
print(table.round(3).to_string(index=False))
""", {"table": "table.select_dtypes('number')"})


def model_detectors(entry, chars: str, rows: str) -> Snippet:
    return _snip("The detectors run on every head of the picked model reading the character prompt.", entry, f"""
import torch
from core.archetypes import head_matches
from core.model import symbols
tokens = torch.tensor(symbols.encode_text({chars!r}, model.cfg.vocab_size, min_len=2))
patterns = head_matches.model_patterns(model, tokens)
table = head_matches.head_detector_table(patterns, tokens, {rows!r})
print(table.round(3).to_string(index=False))
print(head_matches.best_matches(table))
""", table="table.select_dtypes('number')")


# ---------------------------------------------------------------------------------------------
# Causal experiments


CAUSAL_SECTIONS = {
    "runs": ("Clean and corrupted runs, and each head's clean output patched into the corrupted run (section 1).",
             'print("M(clean)", round(res["m_clean"], 3), "M(corrupted)", round(res["m_corrupted"], 3))\n'
             'print(res["heads"].round(3).to_string(index=False))\n',
             {"m": "[res['m_clean'], res['m_corrupted']]", "heads": "res['heads']['patch_effect']"}),
    "positions": ("The residual stream and each head patched one position at a time (sections 2 and 3).",
                  'print(res["resid"].round(3))  # [before block l, position]\n'
                  'print(res["head_rows"], res["head_positions"].round(3))  # [head, position]\n',
                  {"resid": "res['resid']", "heads": "res['head_positions']"}),
    "paths": ("Path patching: every sender head, receiver head and input, noised and denoised (section 4).",
              'print(res["paths"].round(3).to_string(index=False))\n',
              {"paths": "res['paths']['patch_effect']"}),
    "lens": ("The logit lens: the right token's probability and rank after each stage, by copy (section 5).",
             'print(res["lens_by_copy"].round(3).to_string(index=False))\n',
             {"prob": "res['lens_by_copy']['prob']", "rank": "res['lens_by_copy']['rank']"}),
}


def causal(entry, period, seed: int, text, n_seqs: int, positions: bool | None, section: str) -> Snippet:
    """One section of the Causal page (CAUSAL_SECTIONS); positions as the page passed it (None: the
    position sweeps run only where they are quick, core.causal.views.POSITION_BUDGET)."""
    sweeps = "" if positions is None else f", positions={positions}"
    if text is None:
        run = f"res = causal.task_experiments(model, task, period={period}, n_seqs={n_seqs}, seed={seed}{sweeps})\n"
    else:
        run = ("from core.model.symbols import encode_text\n"
               f"tokens = encode_text({text!r}, model.cfg.vocab_size)\n"
               f"res = causal.text_experiments(model, tokens, {n_seqs}, seed={seed}{sweeps})  # {n_seqs} corruptions\n")
    title, show, checks = CAUSAL_SECTIONS[section]
    return _snip(title, entry, "from core.causal import views as causal\n" + run + show, **checks)


# ---------------------------------------------------------------------------------------------
# Home


def overview(entry, n_seqs: int, seed: int) -> Snippet:
    return _snip("The headline numbers and the head table of the picked model, measured on fresh sequences.",
                 entry, f"""
from core.training.overview import model_overview
ov = model_overview(model, task, n_seqs={n_seqs}, seed={seed})
print(ov["metrics"])
print(ov["heads"].round(3).to_string(index=False))
""", metrics="[ov['metrics'][k] for k in ('loss_first_copy', 'loss_later_copies', 'acc_later_copies')]",
                 heads="ov['heads'].select_dtypes('number')")


# ---------------------------------------------------------------------------------------------
# Train


def training_run(settings, steps_done: int) -> Snippet:
    """The live run trained again in this interpreter, with the worker process's own calls."""
    fields = ", ".join(f"{k}={v!r}" for k, v in vars(settings).items())
    return Snippet(
        f"This run, trained again from the same seed: the calls the worker process makes, up to step {steps_done}, "
        "then the checkpoint it hands back (a different number of CPU threads can move the last digits).", f"""
from core.training import live
from core.model.checkpoints import read_checkpoint
from core.training.train_settings import TrainSettings
from core.training.trainer import Trainer
from core.pool.worker import final_checkpoint

settings = TrainSettings({fields})
trainer = Trainer(*settings.configs())  # raises ValueError saying what to change if the settings cannot train
trainer.run({steps_done})
model, info = read_checkpoint(final_checkpoint(trainer))  # the model the page keeps
history = info["history"]  # one row per logged step, measured on a fixed evaluation batch
print(live.final_metrics(history))
print("drop step:", live.drop_step(history, model.cfg.vocab_size))
""", {"final": "[live.final_metrics(history)[k] for k in ('loss_later_copies', 'acc_later_copies')]"})


def shipped_curves(files: list[str]) -> Snippet:
    return Snippet("The training curves stored in the shipped checkpoints, and where each one dropped.", f"""
import pandas as pd

from core.training import live
from core.model.checkpoints import read_checkpoint

frames = []
for file in {files!r}:
    model, info = read_checkpoint("checkpoints/" + file)
    history = info["history"]  # one row per logged step, measured on a fixed evaluation batch
    frames.append(live.loss_frame(history, file))
    print(file, "drop step:", live.drop_step(history, model.cfg.vocab_size), live.final_metrics(history))
curves = pd.concat(frames)  # step, part (first copy | later copies), loss, run
""", {"loss": "curves['loss']"})


def head_scores_over_training(entry) -> Snippet:
    return _snip("Every head's previous-token and induction score at every logged step of the run.", entry, """
from core.training import live

heads = live.head_score_frame(info["history"])  # step, block, head (from 1), score, value
print(heads.pivot_table(index="step", columns=["score", "block", "head"], values="value").round(2))
print("drop step:", live.drop_step(info["history"], model.cfg.vocab_size))
""", value="heads['value']")


def run_timeline(entry) -> Snippet:
    return _snip("The run's timeline from its snapshots: later-copy loss and in-context-learning score at every "
                 "snapshot, and the film strip's steps and heads.", entry, """
from core.training.timeline import timeline

t = timeline(model, info)  # measured on the run's fixed evaluation batch
print("steps:", t["steps"])
print("later-copy loss:", [round(x, 3) for x in t["loss_later"]])
print(f"ICL score (loss at position {t['late']} minus at {t['early']}):", [round(x, 3) for x in t["icl"]])
print("film strip steps:", t["frames"], "heads (block, head from 0):", t["heads"])
""", loss="t['loss_later']", icl="t['icl']", frames="t['frames']")


def transition_study() -> Snippet:
    return Snippet("The shipped transition study: one row per seed, and the summary per depth.", """
from core.training import transition

study = transition.shipped_study()  # None when the study file is not installed
print(study["summary"].to_string(index=False))
print(study["runs"].to_string(index=False))
""", {"drop": "study['runs']['drop_step']"})
