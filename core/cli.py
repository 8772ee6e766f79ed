"""Shared command-line plumbing: bad arguments give one line on stderr and exit status 2."""
from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """A bad argument; its message is printed as one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports errors as a single 'prog: error: ...' line (no usage block)."""

    def error(self, message):
        raise UsageError(message)


def run_main(prog: str, main, argv=None) -> int:
    """Call main(argv); map usage and value errors to one stderr line and exit status 2."""
    from .checkpoints import CheckpointError

    try:
        return main(argv) or 0
    except (UsageError, CheckpointError, ValueError) as e:
        print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. --out names a folder, or a file cannot be written
        where = f" {e.filename}" if e.filename else ""
        print(f"{prog}: error: cannot use{where}: {' '.join(str(e.strerror or e).split())}.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
