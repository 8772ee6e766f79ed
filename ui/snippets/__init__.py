"""The "In Python" snippets: for the widget values on screen, the `core` calls that compute what a
panel shows (the same public functions the page calls). Each builder returns a
ui.python_panel.Snippet whose code runs as-is from the repository root.

One module per page (attention, circuits, depth, icl, archetypes, causal, home, train, laws); each writes
its snippets' code as real Python, the bodies of never-called functions with the page's values as
CAPITALISED placeholders (ui/snippets/fill.py), so ruff and the editor check it. load.py holds the
lines that load the picked model and `snippet`, which puts the pieces together. Pages call the
builders through this package (`snippets.attention_pattern(...)`); tests/test_snippets_build.py builds
every one, compiles it and checks the `core` names it uses.
"""
from ui.snippets.archetypes import archetype_pattern, detector_table, model_detectors
from ui.snippets.attention import attention_offsets, attention_pattern, attention_scores, period_probe
from ui.snippets.causal import CAUSAL_SECTIONS, causal
from ui.snippets.circuits import (
    ablation,
    ablation_grid,
    composition,
    copying,
    copying_table,
    head_circuits,
    rotary_profile,
)
from ui.snippets.depth import depth_composition, logit_paths, mean_paths, score_terms, skip_trigrams, zero_block
from ui.snippets.home import overview
from ui.snippets.icl import (
    drawn_pattern,
    icl_predictions,
    in_context_check,
    restart_curve,
    restart_example,
    typed_pattern,
)
from ui.snippets.laws import law_clamps, law_depth_and_start, law_power, law_readings, law_stages, law_sweep
from ui.snippets.load import load
from ui.snippets.train import head_scores_over_training, run_timeline, shipped_curves, training_run, transition_study

__all__ = [
    "CAUSAL_SECTIONS", "ablation", "ablation_grid", "archetype_pattern", "attention_offsets", "attention_pattern",
    "attention_scores", "causal", "composition", "copying", "copying_table", "depth_composition", "detector_table",
    "drawn_pattern", "head_circuits", "head_scores_over_training", "icl_predictions", "in_context_check",
    "law_clamps", "law_depth_and_start", "law_power", "law_readings", "law_stages", "law_sweep", "load",
    "logit_paths", "mean_paths", "model_detectors", "overview", "period_probe", "restart_curve", "restart_example",
    "rotary_profile", "run_timeline", "score_terms", "shipped_curves", "skip_trigrams", "training_run",
    "transition_study", "typed_pattern", "zero_block",
]
