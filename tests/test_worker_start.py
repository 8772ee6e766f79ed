"""A worker's start data never names the server's main script, whichever module is __main__ then.

Streamlit makes each script run's module sys.modules["__main__"] while it runs, so with several
students on one server the main module can change between any two lines of a start. A worker given
the app's script as its main ran dashboard.py and died with exit code 1 before its first step (1 of 4
trainings started together, twice, before this was fixed)."""
import sys
import types
from multiprocessing import spawn

from core.pool.launch import main_script_hidden


def test_the_start_data_leaves_out_whatever_module_is_main(monkeypatch):
    script = types.ModuleType("__main__")
    script.__file__ = "/srv/app/dashboard.py"
    script.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert spawn.get_preparation_data("x")["init_main_from_path"].endswith("dashboard.py")  # what it was
    with main_script_hidden():
        other = types.ModuleType("__main__")  # another session's script run starts meanwhile
        other.__file__ = "/srv/app/dashboard.py"
        other.__spec__ = None
        monkeypatch.setitem(sys.modules, "__main__", other)
        data = spawn.get_preparation_data("x")
        assert "init_main_from_path" not in data and "init_main_from_name" not in data
        assert data["sys_path"] == sys.path  # the rest of the start data is untouched
    assert spawn.get_preparation_data("x")["init_main_from_path"].endswith("dashboard.py")  # restored after
    assert script.__file__ == other.__file__ == "/srv/app/dashboard.py"  # no module was edited
