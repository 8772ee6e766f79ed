"""Trainings in workers: the pool a server's sessions share (runs, with its monitor), what a page
reads of a run (live_run), the seam to whatever runs the workers (backend: processes, or threads in
tests; ray_backend: Ray actors, when a cluster is configured), its training slots (slots) and the
worker's loop (worker). What runs through the pool (series of runs, sweeps) lives in core.series and
core.sweeps.

May import core.model, core.reading and core.training. Ray only inside ray_backend's functions.
"""
