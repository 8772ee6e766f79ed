"""Snippets of the Causal experiments page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _task_run(model, task, PERIOD, N_SEQS, SEED, SWEEPS, CORRUPTION, RESEARCH):
    from core.causal import experiments as causal
    # positions: True runs the one-position sweeps, None only where they are quick (causal.POSITION_BUDGET);
    # research: also noising, attribution patching and the circuit (the page's Researcher view)
    res = causal.task_experiments(model, task, period=PERIOD, n_seqs=N_SEQS, seed=SEED, positions=SWEEPS,
                                  corruption=CORRUPTION, research=RESEARCH)
    return res


def _text_run(model, TEXT, N_SEQS, SEED, SWEEPS, CORRUPTION, RESEARCH):
    from core.causal import experiments as causal
    from core.model.symbols import encode_text
    tokens = encode_text(TEXT, model.cfg.vocab_size)
    # positions: True runs the one-position sweeps, None only where they are quick (causal.POSITION_BUDGET);
    # research: also noising, attribution patching and the circuit (the page's Researcher view)
    res = causal.text_experiments(model, tokens, N_SEQS, seed=SEED, positions=SWEEPS,
                                  corruption=CORRUPTION, research=RESEARCH)  # N_SEQS corrupted runs
    return res


def _task_pair(model, task, PERIOD, N_SEQS, SEED, CORRUPTION):
    from core.causal import patching
    runs = patching.task_runs(model, task, N_SEQS, SEED, PERIOD, CORRUPTION)  # the same pair of runs as res
    return runs


def _text_pair(model, TEXT, N_SEQS, SEED, CORRUPTION):
    from core.causal.experiments import typed_runs
    from core.model.symbols import encode_text
    runs = typed_runs(model, encode_text(TEXT, model.cfg.vocab_size), N_SEQS, SEED, CORRUPTION)  # as res's
    return runs


def _runs(res):
    print("M(clean)", round(res.m_clean, 3), "M(corrupted)", round(res.m_corrupted, 3))
    print(res.heads.round(3).to_string(index=False))
    return {"m": [res.m_clean, res.m_corrupted], "heads": res.heads["patch_effect"]}


def _positions(res):
    print(res.resid.round(3))  # [before block l, position]
    print(res.head_rows, res.head_positions.round(3))  # [head, position]
    return {"resid": res.resid, "heads": res.head_positions}


def _paths(res):
    print(res.paths.round(3).to_string(index=False))
    return {"paths": res.paths["patch_effect"]}


def _graddrop(model, runs, res):
    from core.causal import checks
    # AtP* and GradDrop beside the exact one-position sweep, summed over positions per head
    table = checks.graddrop(model, runs, res.head_positions, res.attribution["star"])
    print(table.round(3).to_string(index=False))
    return {"graddrop": table.select_dtypes("number")}


def _rope(model, runs, res):
    from core.causal import checks
    # plain and RoPE-aware K-composition beside the share of M lost when the key path is noised
    rope = checks.rope_composition(model, runs, res.paths)
    print(rope.round(3).to_string(index=False))
    return {"rope": rope[["k_score", "k_rope", "k_lost", "receiver_offset", "offset_mass"]]}


def _path_positions(model, runs):
    from core.causal import checks
    # noising each block-1 head's paths into all of block 2, position by position, under both references
    positions = checks.path_positions(model, runs)  # tens of seconds
    whole = checks.whole_paths(positions)  # per reference, path and sender: the share of M lost
    print(whole.round(3).to_string(index=False))
    return {"change": positions["change"], "lost": whole["lost"]}


def _circuit(res):
    # chosen and scored with one reference, the mean over the corrupted runs (core.causal.circuit)
    circ = res.circuit
    print("circuit:", ", ".join(circ["elements"]), "keeps", round(circ["recovered"], 3), "of the span",
          round(circ["span"], 3), "nats")
    print(circ["rows"][["label", "completeness", "completeness_share", "minimality", "minimality_share"]].round(3))
    return {"completeness": circ["rows"]["completeness"], "minimality": circ["rows"]["minimality"]}


def _lens(res):
    print(res.lens_by_copy.round(3).to_string(index=False))
    return {"prob": res.lens_by_copy["prob"], "rank": res.lens_by_copy["rank"]}


CAUSAL_SECTIONS = {  # section -> (title, the piece that shows it)
    "runs": ("Clean and corrupted runs, and each head's clean output patched into the corrupted run (section 1).",
             _runs),
    "positions": ("The residual stream and each head patched one position at a time (sections 2 and 3).",
                  _positions),
    "paths": ("Path patching: every sender head, receiver head and input, noised and denoised (section 4).", _paths),
    "graddrop": ("AtP* and GradDrop per head, beside the exact one-position sweep (section 3).", _graddrop),
    "rope": ("Plain and RoPE-aware K-composition beside key-path patching (section 4).", _rope),
    "path_positions": ("Path patching position by position, with each corrupted run or their mean as the "
                       "reference (section 4).", _path_positions),
    "circuit": ("The circuit as a whole: chosen and scored with the mean over the corrupted runs, its "
                "completeness and minimality (section 4).", _circuit),
    "lens": ("The logit lens: the right token's probability and rank after each stage, by copy (section 5).", _lens),
}


NEEDS_RUNS = {"graddrop", "rope", "path_positions"}  # sections that also take the pair of runs itself
RESEARCH_SECTIONS = {"graddrop", "circuit"}  # they read res.attribution or res.circuit: research=True


def causal(entry, period, seed: int, text, n_seqs: int, positions: bool | None, section: str,
           corruption: str = "first-copy") -> Snippet:
    """One section of the Causal page (CAUSAL_SECTIONS); positions as the page passed it (None: the
    position sweeps run only where they are quick, core.causal.experiments.POSITION_BUDGET); corruption:
    core.causal.corruptions.CORRUPTIONS. The experiments' research parts (noising, attribution, the circuit)
    are computed only for the sections that print them: the others' numbers do not depend on them."""
    title, show = CAUSAL_SECTIONS[section]
    run = _task_run if text is None else _text_run
    values = {"PERIOD": period} if text is None else {"TEXT": text}
    pieces = (run, show) if section not in NEEDS_RUNS else (run, _task_pair if text is None else _text_pair, show)
    return snippet(title, entry, *pieces, N_SEQS=n_seqs, SEED=seed, SWEEPS=positions, CORRUPTION=corruption,
                   RESEARCH=section in RESEARCH_SECTIONS, **values)
