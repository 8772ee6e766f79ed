"""core.shipped: the one command that rebuilds every shipped file a training made."""
from __future__ import annotations

import sys

from core import shipped
from core.training.markov import MARKOV_PRESETS
from core.training.presets import PRESETS

from helpers import ROOT


def _arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_shipped_checkpoint_and_table_is_rebuilt_by_its_own_command():
    todo = shipped.jobs(laws=True)
    made = set()
    for path, argv in todo:
        assert argv[0] == sys.executable
        if path is None and _arg(argv, "--preset") in MARKOV_PRESETS:  # a Markov run, by its manifest command
            name = _arg(argv, "--preset")
            assert name in MARKOV_PRESETS and _arg(argv, "--out") == f"checkpoints/markov/{name}.pt"
            assert _arg(argv, "--manifest") == "checkpoints/markov/manifest.json"
            made.add(ROOT / _arg(argv, "--out"))
        elif path is None:  # a checkpoint, trained by its preset into its own file, recorded in the manifest
            name = _arg(argv, "--preset")
            assert name in PRESETS and _arg(argv, "--out") == f"checkpoints/{name}.pt"
            assert _arg(argv, "--manifest") == "checkpoints/manifest.json"
            made.add(ROOT / _arg(argv, "--out"))
        else:  # a table, by the command in its header, which writes that same file
            out = _arg(argv, "--out") if "--out" in argv else "checkpoints/transition_study.csv"
            assert ROOT / out == path, argv
            made.add(path)
    shipped_files = set((ROOT / "checkpoints").glob("*.pt")) | set((ROOT / "checkpoints").glob("*.csv")) \
        | set((ROOT / "checkpoints" / "laws").glob("*.csv")) | set((ROOT / "checkpoints" / "markov").glob("*.pt"))
    assert shipped_files == made


def test_the_dry_run_prints_each_command_once(capsys):
    assert shipped.main(["--dry-run", "--laws"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(shipped.jobs(laws=True)) + 1
    assert lines[0].startswith("python -m core.train --preset variable-period-2block")
    assert lines[-1] == "python -m ui.cache --ship"  # the views of the files, once they are all written
    assert any(line.startswith("(removes checkpoints/transition_study.csv) python bench/transition_study.py")
               for line in lines)


def test_a_failing_command_stops_the_rebuild_with_its_exit_code(tmp_path):
    doomed = tmp_path / "table.csv"
    doomed.write_text("# command: python -c 'raise SystemExit(3)'\nx\n1\n")
    never = tmp_path / "never.txt"
    todo = [(doomed, shipped.header_command(doomed)),
            (None, [sys.executable, "-c", f"open({str(never)!r}, 'w').write('ran')"])]
    assert shipped.run(todo, parallel=1) == 3
    assert not doomed.exists() and not never.exists()
