"""Altair chart builders, one module per page area. Shared look: colour-blind-safe schemes only.

SEQUENTIAL for magnitudes (attention, scores, masses), DIVERGING for signed values centred on 0
(QK/OV entries, ablation deltas), CATEGORICAL for series (Okabe-Ito order via Altair's scheme).

Inputs are core's tables: 0-based `layer` and `head` and the head's `label`. A chart whose axes are
blocks and heads takes their numbers counted from 1 from core.model.symbols (numbered).
"""
from core.model.symbols import block_number, head_number

SEQUENTIAL = "viridis"
DIVERGING = "blueorange"
CATEGORICAL = "tableau10"  # distinguishable under the common colour-vision deficiencies at 4-6 series
# Okabe & Ito (2008) palette for hand-picked series colours
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]


def numbered(df):
    """df with the axis columns `block` and `head` counted from 1 (core.model.symbols), from its 0-based
    layer and head: what a blocks x heads chart draws."""
    return df.assign(block=block_number(df["layer"]), head=head_number(df["head"]))


def _reuse_altair_converters() -> None:
    """Make Altair build each chart's encodings without re-hashing its whole schema every time.

    Altair 6's `SchemaBase.from_dict` (called for every shorthand in `encode`, `tooltip=[...]`, ...)
    builds a fresh `_FromDict` converter per call, and each one hashes the JSON of all ~570 schema
    classes: 70% of the time to build the Train page's live charts (bench/README.md, "Again, after the
    live film strip"). The converter depends only on the list of wrapper classes, so one per list is
    kept and reused: the same objects come out. Skipped if a later Altair lays this out differently."""
    try:
        # the package before its submodule: a first import of altair.utils takes its module lock and then
        # altair's, the reverse of `import altair` (ui/causal_sections.py, ui/charts/*.py), and when a
        # class's first pages do both at once on two threads, Python raises _DeadlockError in one of them
        import altair  # noqa: F401
        from altair.utils import schemapi
    except ImportError:
        return
    base, converter = getattr(schemapi, "SchemaBase", None), getattr(schemapi, "_FromDict", None)
    if base is None or converter is None or getattr(base, "_lab_reuses_converters", False):
        return
    converters: dict[tuple, object] = {}

    def from_dict(cls, dct, validate: bool = True):
        if validate:
            cls.validate(dct)
        classes = tuple(cls._default_wrapper_classes())
        if classes not in converters:
            converters[classes] = converter(classes)
        return converters[classes].from_dict(dct, cls)

    base._lab_original_from_dict = base.__dict__["from_dict"]  # for tests/test_charts.py
    base.from_dict = classmethod(from_dict)
    base._lab_reuses_converters = True


_reuse_altair_converters()
