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


def run_main(prog: str, main) -> int:
    """Call main() (it reads sys.argv); map usage and value errors to one stderr line and exit status 2."""
    from core.model.checkpoints import CheckpointError

    try:
        return main() or 0
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


MAX_N_SEQS = 4096  # the largest --n-seqs a measuring command takes


def measure_parser(prog: str, description: str, period_help: str, n_seqs: int, seed: int) -> OneLineParser:
    """The arguments every command that measures one checkpoint takes: file, --json, --period,
    --n-seqs, --seed (a command adds its own before calling read_measure_args)."""
    p = OneLineParser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--period", type=int, help=period_help)
    p.add_argument("--n-seqs", type=int, default=n_seqs)
    p.add_argument("--seed", type=int, default=seed)
    return p


def read_measure_args(p: OneLineParser, argv=None, period_check=None):
    """(args, model, info): the arguments checked, and the checkpoint read (strictly).
    period_check(period, seq_len) raises ValueError for a --period the command cannot use (a
    command without one checks --period itself)."""
    from core.model.checkpoints import read_checkpoint

    args = p.parse_args(argv)
    if not 1 <= args.n_seqs <= MAX_N_SEQS:
        raise UsageError(f"--n-seqs must be between 1 and {MAX_N_SEQS}, got {args.n_seqs}")
    if not 0 <= args.seed < 2**63:
        raise UsageError(f"--seed must be between 0 and 2**63 - 1, got {args.seed}")
    model, info = read_checkpoint(args.file)
    if args.period is not None and period_check is not None:
        try:
            period_check(args.period, info["task"].seq_len)
        except ValueError as e:
            raise UsageError(f"--period: {e}") from None
    return args, model, info
