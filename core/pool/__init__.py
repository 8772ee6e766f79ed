"""Trainings in worker processes: the pool a server's sessions share (runs), its training slots
(slots), the worker's loop (worker) and several seeds of one setting (seed_series).

May import core.model, core.reading and core.training.
"""
