"""Snippets of the Causal experiments page (how a piece is written: ui/snippets/fill.py)."""
from __future__ import annotations

from ui.python_panel import Snippet
from ui.snippets.load import snippet


def _task_run(model, task, PERIOD, N_SEQS, SEED, SWEEPS, CORRUPTION):
    from core.causal import views as causal
    # positions: True runs the one-position sweeps, None only where they are quick (causal.POSITION_BUDGET)
    res = causal.task_experiments(model, task, period=PERIOD, n_seqs=N_SEQS, seed=SEED, positions=SWEEPS,
                                  corruption=CORRUPTION)
    return res


def _text_run(model, TEXT, N_SEQS, SEED, SWEEPS, CORRUPTION):
    from core.causal import views as causal
    from core.model.symbols import encode_text
    tokens = encode_text(TEXT, model.cfg.vocab_size)
    # positions: True runs the one-position sweeps, None only where they are quick (causal.POSITION_BUDGET)
    res = causal.text_experiments(model, tokens, N_SEQS, seed=SEED, positions=SWEEPS,
                                  corruption=CORRUPTION)  # N_SEQS corrupted runs
    return res


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


def _lens(res):
    print(res.lens_by_copy.round(3).to_string(index=False))
    return {"prob": res.lens_by_copy["prob"], "rank": res.lens_by_copy["rank"]}


CAUSAL_SECTIONS = {  # section -> (title, the piece that shows it)
    "runs": ("Clean and corrupted runs, and each head's clean output patched into the corrupted run (section 1).",
             _runs),
    "positions": ("The residual stream and each head patched one position at a time (sections 2 and 3).",
                  _positions),
    "paths": ("Path patching: every sender head, receiver head and input, noised and denoised (section 4).", _paths),
    "lens": ("The logit lens: the right token's probability and rank after each stage, by copy (section 5).", _lens),
}


def causal(entry, period, seed: int, text, n_seqs: int, positions: bool | None, section: str,
           corruption: str = "first-copy") -> Snippet:
    """One section of the Causal page (CAUSAL_SECTIONS); positions as the page passed it (None: the
    position sweeps run only where they are quick, core.causal.views.POSITION_BUDGET); corruption:
    core.causal.corruptions.CORRUPTIONS."""
    title, show = CAUSAL_SECTIONS[section]
    run = _task_run if text is None else _text_run
    values = {"PERIOD": period} if text is None else {"TEXT": text}
    return snippet(title, entry, run, show, N_SEQS=n_seqs, SEED=seed, SWEEPS=positions, CORRUPTION=corruption,
                   **values)
