"""Altair chart builders, one module per page area. Shared look: colour-blind-safe schemes only.

SEQUENTIAL for magnitudes (attention, scores, masses), DIVERGING for signed values centred on 0
(QK/OV entries, ablation deltas), CATEGORICAL for series (Okabe-Ito order via Altair's scheme).
"""
SEQUENTIAL = "viridis"
DIVERGING = "blueorange"
CATEGORICAL = "tableau10"  # distinguishable under the common colour-vision deficiencies at 4-6 series
# Okabe & Ito (2008) palette for hand-picked series colours
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
