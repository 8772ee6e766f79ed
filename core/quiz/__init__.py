"""Predict-then-reveal questions built from numbers measured on the picked model: the question type
and the analysis pages' questions (questions), the Train page's (training) and the Causal page's (causal).

May import core.model, core.reading, core.causal and core.training.
"""
