"""Trainings in workers: the pool a server's sessions share (runs, with its monitor), what a page
reads of a run (live_run), the seam to whatever runs the workers (backend: processes, or threads in
tests), its training slots (slots), the worker's loop (worker) and several seeds of one setting
(seed_series).

May import core.model, core.reading and core.training.
"""
