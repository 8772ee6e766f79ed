"""Attention Lab's computation: no streamlit and no chart library anywhere below this folder.

Subpackages, each importing only those listed before it (tests/test_layout.py checks this):
- core.model: TinyCharLM, its task, metrics, token and head labels, checkpoints and snapshots.
- core.reading: reading a trained model: head scores, attention views, QK/OV circuits, the OV copying
  matrix, composition, ablations, probes, exact path sums, restarts, the headline report.
- core.causal: causal experiments: activation and path patching, the logit lens, the Causal page's runs.
- core.archetypes: GPT-2 small's head archetypes, their detectors on text, and IOI's head groups.
- core.training: training (config, initial weights, interventions, the Trainer), the presets, the
  timeline and the transition study, the in-context-learning checks, the Home page's overview.
- core.pool: trainings in worker processes: the pool that runs them, training slots, seed series.
- core.quiz: the predict-then-reveal questions, built from measured numbers.

The modules at this level are the command lines README gives: `python -m core.train`,
`python -m core.report`, `python -m core.patch`. Importing `core` itself loads nothing.
"""
