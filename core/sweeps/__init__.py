"""Sweeps: a grid of trainings (grid: the RunConfig of each run, its id and row) on local processes or Ray tasks into
one resumable results table (run: the row of a run, the table, the two runners; `python -m core.sweep`).
core.laws reads the shipped tables.

A sweep is a batch: each run trains to its end in a process of its own and returns one row, nothing
streams and nothing stops it but the whole sweep, so it maps runs onto a process pool (LocalRunner) or Ray
tasks (RayRunner), not onto core.pool's interactive workers; it shares core.pool's Ray connection
(ray_backend.connect) and the code version that keys a run (live_run.code_version).

May import core.model, core.reading, core.training and core.pool.
"""
