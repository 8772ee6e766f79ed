"""Trainings run one after another through the server's pool (core.pool.runs.RunPool) in a background
thread: the mechanism (run_series.RunSeries) and its two variants, several seeds of the Train page's
settings (seeds) and the Laws page's small capped sweep (page_sweep), whose finished runs are read as one
of core.laws' laws.

May import core.model, core.reading, core.training, core.pool, core.sweeps and core.laws.
"""
