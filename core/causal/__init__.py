"""Causal experiments on a trained model: activation patching (patching), path patching, the logit
lens, and the runs the Causal page shows (views); `python -m core.patch` lives in patch.

May import core.model and core.reading.
"""
