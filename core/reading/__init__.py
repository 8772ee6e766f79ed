"""Reading a trained model without changing its training: head scores and detectors, attention
views, QK and OV circuits, the OV copying matrix, composition, ablations, probes, exact path sums,
restarts and the headline report.

May import core.model.
"""

CLEAR_SCORE = 0.5  # an attention score that counts as "this head does it" (questions, sentences); here, where a
# page's sentences read it without importing the scoring (and torch)
