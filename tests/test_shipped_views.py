"""The shipped data (checkpoints/data/, ui/shipped_data.py): whole, current for the checkpoints as they are,
complete for every page's defaults, and equal to the numbers the code computes now.

When a test here fails it says what to do: raise the `version=` of the view it names (its @per_model or
@per_code(name=...); shipped_data.INFO_VERSION for a checkpoint's info) when the numbers changed, then run
`python -m ui.cache --ship` and commit checkpoints/data/ with the change."""
from __future__ import annotations

import pytest

import ui.cache as cache
from ui import shipped_data
from ui.state import shipped_models

from helpers import assert_same

SHIP = "run `python -m ui.cache --ship` and commit checkpoints/data/"


def test_every_shipped_file_is_whole_and_names_a_shipped_checkpoint_as_it_is_now():
    """Each file's checksum holds, it sits where its header says (its checkpoint's folder, its view's name),
    and it names the sha256 of a shipped checkpoint's bytes now; every shipped checkpoint (the Markov runs
    too) has its info at INFO_VERSION. A file that fails this is never read: a fresh server would compute
    its views."""
    digests = {m.sha256: m.file for m in shipped_models()}
    assert None not in digests, "a shipped checkpoint cannot be read"
    paths = shipped_data.shipped_paths()
    assert len(paths) >= 40, f"checkpoints/data/ holds {len(paths)} files: {SHIP}"
    for path in paths:
        try:
            f = shipped_data.describe(path)
        except ValueError as e:
            pytest.fail(f"{path.name} is damaged ({e}): {SHIP}")
        assert shipped_data.path_of(f.sha256, f.name) == path, f"{path} holds {f.name} of {f.sha256}"
        assert f.sha256 is None or f.sha256 in digests, f"{path}: no shipped checkpoint has these bytes now: {SHIP}"
        assert f.entries, f"{path} holds no entry"
    for digest, file in digests.items():
        info = shipped_data.read(digest, shipped_data.INFO, shipped_data.INFO_VERSION, "[]")
        assert info is not shipped_data.MISS, f"{file}'s info is not shipped at version " \
            f"{shipped_data.INFO_VERSION}: {SHIP}"


def _bump(call) -> str:
    what = "INFO_VERSION in ui/shipped_data.py" if call.view == shipped_data.INFO else \
        f"the version= of the view named {call.view!r}"
    return (f"the numbers of {call.view} on {call.checkpoint or 'no model'} {call.key[:80]} changed: raise "
            f"{what} (now {call.version}) and {SHIP}")


def _one_setting_apart(page: str, setting: dict) -> bool:
    """The page's defaults with one of its SHIPPED_SETTINGS changed (not two or more at once)."""
    defaults = cache.SHIPPED_SETTINGS[page][0]
    return sum(setting[k] != defaults[k] for k in defaults) <= 1


@pytest.mark.app
@pytest.mark.slow
def test_a_walk_reads_every_default_from_the_shipped_data_and_each_equals_a_fresh_computation():
    """Every page on every shipped checkpoint from empty memory caches, at its defaults and its other shipped
    settings (ui.cache.SHIPPED_SETTINGS): no view is computed (every one is shipped) and every shipped entry is
    one a page asked for (none left over). Then each entry asked at the defaults (each checkpoint's info too),
    or with one shipped setting changed from them, is computed afresh by the code as it is now and must equal
    the shipped value within float32 rounding (the data may come from another CPU); where it does not, its
    version is due to be raised. Entries of two or more settings changed at once run the same code on other
    arguments and are left out of the recomputation (they cost 40 CPU-s more: the Causal page's research
    experiments under both corruptions and both sources)."""
    marks = []  # (number of calls recorded by the end of a page's run, (page, setting) or None for its defaults)
    rows, calls = cache.recorded_walk(
        visit=lambda entry, page, at: marks.append((len(shipped_data.recorded), None)),
        visit_setting=lambda entry, page, setting, at: marks.append((len(shipped_data.recorded),
                                                                     (page.file, setting))))
    run_of = [next((label for end, label in marks if i < end), None) for i in range(len(calls))]
    assert not [r for r in rows if r["exception"]], [r for r in rows if r["exception"]][:3]
    missing = sorted({f"{c.view} on {c.checkpoint}" for c in calls if c.computed})
    assert not missing, f"{len(missing)} default views are not shipped at their version: {SHIP}: {missing[:5]}"
    asked = {(c.sha256, c.view, c.key) for c in calls}
    assert {m.sha256 for m in shipped_models()} <= {c.sha256 for c in calls if c.view == shipped_data.INFO}
    stored = {(f.sha256, f.name, key) for f in map(shipped_data.describe, shipped_data.shipped_paths())
              for key in f.entries}
    left = sorted(stored - asked, key=str)
    assert not left, f"{len(left)} shipped entries no page asks for: {SHIP}: {left[:3]}"

    checked = [c for c, run in zip(calls, run_of) if run is None or _one_setting_apart(*run)]
    assert {(c.sha256, c.view) for c in checked} == {(c.sha256, c.view) for c in calls}  # each view, each model
    changed = []
    for call in {(c.sha256, c.view, c.key): c for c in checked}.values():
        try:
            assert_same(call.fn(*call.args, **call.kwargs), call.value, call.view, close=True)
        except AssertionError as e:
            changed.append(f"{_bump(call)} ({str(e).splitlines()[0][:200]})")
    assert not changed, "\n".join(changed)
