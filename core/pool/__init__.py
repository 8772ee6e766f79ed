"""Trainings in workers: the pool a server's sessions share (runs, with its monitor), what a page
reads of a run (live_run), the seam to whatever runs the workers (backend: processes, or threads in
tests; ray_backend: Ray actors, when a cluster is configured), its training slots (slots), the
worker's loop (worker), trainings one after another in the background (series; its variants: several
seeds of one setting, seed_series, and the Laws page's small capped sweep, page_sweep), and sweeps: a
grid of trainings on local processes or Ray into one results table (sweep, sweep_grid;
`python -m core.sweep`; core.laws reads those tables).

May import core.model, core.reading and core.training. Ray only inside ray_backend's functions.
"""
