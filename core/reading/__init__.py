"""Reading a trained model without changing its training: head scores and detectors, attention
views, QK and OV circuits, the OV copying matrix, composition, ablations, probes, exact path sums,
restarts and the headline report.

May import core.model.
"""
