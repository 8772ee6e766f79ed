"""Causal experiments on a trained model: activation patching (patching), path patching, the logit
lens, and the Causal page's experiments on one pair of runs (experiments computes them, results holds
them without torch); `python -m core.patch` lives in patch_report.

May import core.model and core.reading.
"""
