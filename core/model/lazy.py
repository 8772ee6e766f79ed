"""Torch when a function runs, not when its module is imported.

A server whose pages read stored views never imports torch: it is half a reading server's memory and
most of its first page's CPU. So a page imports at its top only modules that need no torch, and a view's
computation is imported inside the view's function, which runs only when the view is not stored. A
module whose names a page reads (a view's dataclass, a constant, a sentence) and that also computes
imports torch inside its computing functions; `no_grad` is torch.no_grad() for them.
"""
from __future__ import annotations

import functools


def no_grad(fn):
    """torch.no_grad() as a decorator that imports torch on the first call, not at import."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)
    return run
