"""Rebuild every shipped file that a training made, with the commands recorded beside them.

    python -m core.shipped                 # the four checkpoints (+ manifest), the Markov runs and the transition study
    python -m core.shipped --laws          # and the tables of the Laws page (checkpoints/laws/*.csv)
    python -m core.shipped --dry-run       # print the commands only

Last, once every file is written, the pages' default views of them are made again (`python -m ui.cache
--ship`, checkpoints/data/): they are keyed by the files' sha256, so a regenerated file's old views are
never read.

The checkpoints are trained by their presets (`python -m core.train --preset NAME --out
checkpoints/NAME.pt --manifest checkpoints/manifest.json`, README "Reproducing the shipped
checkpoints"); the Markov-chain runs in checkpoints/markov/ by the command each records in that folder's
manifest; every table is rebuilt by the command in its own `# command:` header line, run
exactly as written, after the file is removed (a sweep keeps the rows a table already has, so an old
table would keep its old rows). Every command runs at one thread (OMP_NUM_THREADS=1: bit-reproducible
with the same torch build and attention kernel on the same kind of CPU), up to --parallel at a time.
A command that fails stops the rebuild with its exit code; what it had not yet rewritten is left as
it was.
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from core.training.presets import DEFAULT_PRESET, PRESETS

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"
STUDY = CHECKPOINTS / "transition_study.csv"
MARKOV_MANIFEST = CHECKPOINTS / "markov" / "manifest.json"


def header_command(path: Path) -> list[str]:
    """The `# command: ...` line of a shipped table, as argv (its python is this interpreter)."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# command:"):
            argv = shlex.split(line.split(":", 1)[1])
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
            return argv
    raise ValueError(f"{path} has no '# command:' line in its header.")


def jobs(laws: bool = False) -> list[tuple[Path | None, list[str]]]:
    """(file to remove first or None, argv) for every rebuild, in order: the checkpoints (one per preset,
    the default first), the Markov-chain runs (the commands their manifest records), the transition study,
    then (laws) each Laws table."""
    import json

    out: list[tuple[Path | None, list[str]]] = [
        (None, [sys.executable, "-m", "core.train", "--preset", p, "--out", f"checkpoints/{p}.pt",
                "--manifest", "checkpoints/manifest.json"]) for p in sorted(PRESETS, key=lambda p: p != DEFAULT_PRESET)]
    for row in json.loads(MARKOV_MANIFEST.read_text())["checkpoints"]:
        argv = shlex.split(row["command"])
        out.append((None, [sys.executable if argv[0] in ("python", "python3") else argv[0], *argv[1:]]))
    out.append((STUDY, header_command(STUDY)))
    if laws:
        out += [(path, header_command(path)) for path in sorted((CHECKPOINTS / "laws").glob("*.csv"))]
    return out


VIEWS = [sys.executable, "-m", "ui.cache", "--ship"]  # after every other job: it reads what they wrote


def shown(argv: list[str]) -> str:
    """argv as a shell line, this interpreter written as `python`."""
    return shlex.join(["python" if argv[0] == sys.executable else argv[0], *argv[1:]])


def run(todo: list[tuple[Path | None, list[str]]], parallel: int = 1) -> int:
    """Run the jobs, up to `parallel` at once (the checkpoints one after the other: they share the
    manifest); 0, or the first failing command's exit code."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    running: list[tuple[subprocess.Popen, str, float]] = []
    queue = list(todo)
    while queue or running:
        shares_manifest = any("--manifest" in argv for argv in (p.args for p, *_ in running))
        if queue and len(running) < max(1, parallel) and not ("--manifest" in queue[0][1] and shares_manifest):
            path, argv = queue.pop(0)
            if path is not None and path.exists():
                path.unlink()
            text = shown(argv)
            print(f"$ {text}", flush=True)
            running.append((subprocess.Popen(argv, cwd=ROOT, env=env), text, time.perf_counter()))
            continue
        for item in list(running):
            proc, text, t0 = item
            if proc.poll() is None:
                continue
            running.remove(item)
            print(f"  done in {time.perf_counter() - t0:.0f} s (exit {proc.returncode}): {text}", flush=True)
            if proc.returncode:
                for other, *_ in running:
                    other.terminate()
                return proc.returncode
        time.sleep(0.2)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laws", action="store_true", help="also the Laws page's tables (about 50 CPU-minutes)")
    ap.add_argument("--parallel", type=int, default=2, help="commands at once (default 2)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    todo = jobs(args.laws)
    if args.dry_run:
        for path, cmd in todo:
            print(("(removes " + str(path.relative_to(ROOT)) + ") " if path else "") + shown(cmd))
        print(shown(VIEWS))
        return 0
    return run(todo, args.parallel) or run([(None, VIEWS)])


if __name__ == "__main__":
    raise SystemExit(main())
