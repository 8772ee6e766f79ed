"""TinyCharLM and what every other part shares: the model (tinycharlm), its intervention point's
hook points, edits and attention (hooks), its training forward's attention kernel (attention), the
repeated-sequence task (task), copy metrics (metrics), typed text and labels (symbols), the drop's
definition (drop), checkpoint files (checkpoints, snapshots) and the command lines' shared parsing (cli).

Imports nothing else from core.
"""
