"""The shipped data (checkpoints/data/, ui/shipped_data.py): whole, current for the checkpoints as they are,
complete for every page's defaults, and equal to the numbers the code computes now.

When a test here fails it says what to do: raise the `version=` of the view it names (its @per_model or
@per_code; shipped_data.INFO_VERSION for a checkpoint's info) when the numbers changed, then run
`python -m ui.cache --ship` and commit checkpoints/data/ with the change."""
from __future__ import annotations

import pytest

import ui.cache as cache
from ui import shipped_data
from ui.state import shipped_digest, shipped_files

from helpers import assert_same

SHIP = "run `python -m ui.cache --ship` and commit checkpoints/data/"


def test_every_shipped_file_is_whole_and_names_a_shipped_checkpoint_as_it_is_now():
    """Each file's checksum holds, it sits where its header says (its checkpoint's folder, its view's name),
    and it names the sha256 of that checkpoint's bytes now; every shipped checkpoint has its info at
    INFO_VERSION. A file that fails this is never read: a fresh server would compute its views."""
    files = {row["file"]: shipped_digest(row["file"]) for row in shipped_files()}
    paths = shipped_data.shipped_paths()
    assert len(paths) >= 40, f"checkpoints/data/ holds {len(paths)} files: {SHIP}"
    for path in paths:
        try:
            f = shipped_data.describe(path)
        except ValueError as e:
            pytest.fail(f"{path.name} is damaged ({e}): {SHIP}")
        assert shipped_data.path_of(f.checkpoint, f.view) == path, f"{path} holds {f.view} of {f.checkpoint}"
        if f.checkpoint is None:
            assert f.sha256 is None, path
        else:
            assert f.checkpoint in files, f"{path}: {f.checkpoint} is not shipped: {SHIP}"
            assert f.sha256 == files[f.checkpoint], f"{path}: {f.checkpoint} was made again since: {SHIP}"
        assert f.entries, f"{path} holds no entry"
    for file, digest in files.items():
        info = shipped_data.read(file, digest, shipped_data.INFO, shipped_data.INFO_VERSION, "[]")
        assert info is not shipped_data.MISS, f"{file}'s info is not shipped at version " \
            f"{shipped_data.INFO_VERSION}: {SHIP}"


def _bump(call) -> str:
    where = call.view.rpartition(":")[0] or "ui/shipped_data.py"
    what = "INFO_VERSION" if call.view == shipped_data.INFO else f"the version= of {call.view}"
    return (f"the numbers of {call.view} on {call.checkpoint or 'no model'} {call.key[:80]} changed: raise "
            f"{what} (now {call.version}, in {where}) and {SHIP}")


@pytest.mark.app
@pytest.mark.slow
def test_a_walk_reads_every_default_from_the_shipped_data_and_each_equals_a_fresh_computation():
    """Every page on every shipped checkpoint from empty memory caches: no view is computed (every default
    is shipped) and every shipped entry is one a page asked for (none left over). Then each entry is
    computed afresh by the code as it is now and must equal the shipped value within float32 rounding
    (the data may come from another CPU); where it does not, its version is due to be raised."""
    rows, calls = cache.recorded_walk()
    assert not [r for r in rows if r["exception"]], [r for r in rows if r["exception"]][:3]
    missing = sorted({f"{c.view} on {c.checkpoint}" for c in calls if c.computed})
    assert not missing, f"{len(missing)} default views are not shipped at their version: {SHIP}: {missing[:5]}"
    asked = {(c.checkpoint, c.view, c.key) for c in calls}
    asked |= {(row["file"], shipped_data.INFO, "[]") for row in shipped_files()}
    stored = {(f.checkpoint, f.view, key) for f in map(shipped_data.describe, shipped_data.shipped_paths())
              for key in f.entries}
    left = sorted(stored - asked)
    assert not left, f"{len(left)} shipped entries no page asks for: {SHIP}: {left[:3]}"

    changed = []
    for call in {(c.checkpoint, c.view, c.key): c for c in calls}.values():
        try:
            assert_same(call.fn(*call.args, **call.kwargs), call.value, call.view, close=True)
        except AssertionError as e:
            changed.append(f"{_bump(call)} ({str(e).splitlines()[0][:200]})")
    from core.model.checkpoints import read_checkpoint
    from ui.state import CHECKPOINT_DIR

    for row in shipped_files():
        info = cache.Call(shipped_data.INFO, shipped_data.INFO_VERSION, None, (), {}, row["file"], None, "[]",
                          None, False)
        try:
            assert_same(shipped_data.info_view(read_checkpoint(CHECKPOINT_DIR / row["file"])[1]),
                        shipped_data.read(row["file"], shipped_digest(row["file"]), shipped_data.INFO,
                                          shipped_data.INFO_VERSION, "[]"), "info", close=True)
        except AssertionError as e:
            changed.append(f"{_bump(info)} ({str(e).splitlines()[0][:200]})")
    assert not changed, "\n".join(changed)
