"""Training TinyCharLM: its config and one run's whole config (run_config.RunConfig: model, task and
training, built from named settings by every caller), the torch threads a training gets, initial weights,
interventions and the Trainer; the named presets; the logged history as frames (live), the snapshot
timeline and the transition across seeds; the in-context-learning checks, which replay the training
stream; the Home page's overview.

May import core.model and core.reading.
"""
