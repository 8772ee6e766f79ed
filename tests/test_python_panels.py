"""Every "In Python" snippet a page shows runs as-is from the repository root, in a fresh process
(a fork of one interpreter that has imported only torch) with the shipped checkpoints, and reproduces
the numbers the page shows within 1e-4."""
import atexit
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.pool.status import RunStatus
from ui import snippets
from ui.model_keys import shipped_key
from ui.python_panel import RECORD_KEY, RUN_KEY

from helpers import ROOT, SHIPPED

TOL = 1e-4
MARK = "@@SNIPPET-CHECKS@@"



def page_snippets(page: str, file: str, widgets=()) -> list[dict]:
    """The snippets `page` shows for shipped `file`, after setting widgets [(kind, key, value)]."""
    if file not in SHIPPED:
        pytest.fail(f"{file} is not in checkpoints/")
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.session_state[RECORD_KEY] = True
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(file)).run()
    at.switch_page(page)
    at.run()
    for kind, key, value in widgets:
        if kind == "skip":  # every question of the page skipped, so what answers it (and its snippet) is drawn
            while skips := [b for b in at.button if b.key and b.key.endswith("_skipbtn")]:
                skips[0].click().run()
            continue
        getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception, at.exception
    shown = list(at.session_state[RUN_KEY])
    assert len(at.get("expander")) >= len(shown)  # each is drawn in its own expander
    return shown


RUNNER = r"""
import ast, copy, io, json, sys, traceback, types
from contextlib import redirect_stdout
from ui.python_panel import plain

def statements(code):
    tree = ast.parse(code)
    return [ast.get_source_segment(code, node, padded=True) for node in tree.body]

def fresh(ns):
    # as if the snippet had run the shared prefix itself: values copied; modules, functions, classes shared
    keep = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
    return {k: v if k.startswith("__") or isinstance(v, keep) else copy.deepcopy(v) for k, v in ns.items()}

snippets = json.load(sys.stdin)
parts = [statements(s["code"]) for s in snippets]
n = 0  # the statements every snippet starts with (the model's loading, a page's shared experiment): run once
while parts and all(len(p) > n and p[n] == parts[0][n] for p in parts) and all(len(p) > n + 1 for p in parts):
    n += 1
base, base_out, base_error = {"__name__": "__main__"}, io.StringIO(), None
try:
    with redirect_stdout(base_out):
        exec(compile("\n".join(parts[0][:n]) if parts else "", "<snippet>", "exec"), base)
except Exception:
    base_error = traceback.format_exc()
for snippet, p in zip(snippets, parts):
    if base_error:
        print(MARK + json.dumps({"error": base_error}), flush=True)
        continue
    ns, out = fresh(base), io.StringIO()
    try:
        with redirect_stdout(out):
            exec(compile("\n".join(p[n:]), "<snippet>", "exec"), ns)
        result = {"printed": base_out.getvalue() + out.getvalue(),
                  "checks": {k: plain(eval(e, ns)) for k, e in snippet["checks"].items()}}
    except Exception:
        result = {"error": traceback.format_exc()}
    print(MARK + json.dumps(result), flush=True)
"""


_SERVER = r"""
import json, os, sys, tempfile, traceback
import torch  # noqa: F401  the slow import, paid once; each request runs in a fresh fork of this process
for line in sys.stdin:
    req = json.loads(line)
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin.write(req["input"].encode())
        stdin.seek(0)
        pid = os.fork()
        if pid == 0:
            os.chdir(req["cwd"])  # sys.path[0] is '' (a -c process): imports come from the new cwd
            for fd, f in ((0, stdin), (1, out), (2, err)):
                os.dup2(f.fileno(), fd)
            sys.stdin = open(0, closefd=False)
            code = 0
            try:
                exec(compile(req["code"], "<string>", "exec"), {"__name__": "__main__"})
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "stdout": out.read().decode(errors="replace"),
                          "stderr": err.read().decode(errors="replace")}), flush=True)
"""
_server = None


@pytest.fixture(scope="module", autouse=True)
def _stop_the_server():
    yield
    if _server is not None and _server.poll() is None:
        _server.stdin.close()
        _server.wait(timeout=30)


def _run_fresh(code: str, stdin: str, cwd: Path):
    """`python -c code < stdin` in `cwd` (no PYTHONPATH): a fork of one server process that has
    imported torch, so each page pays no interpreter start; returns (returncode, stdout, stderr)."""
    global _server
    if _server is None or _server.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
        _server = subprocess.Popen([sys.executable, "-c", _SERVER], cwd=ROOT, env=env, text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        atexit.register(_server.kill)
    _server.stdin.write(json.dumps({"code": code, "input": stdin, "cwd": str(cwd)}) + "\n")
    _server.stdin.flush()
    reply = json.loads(_server.stdout.readline() or '{"rc": -1, "stdout": "", "stderr": "the server stopped"}')
    return reply["rc"], reply["stdout"], reply["stderr"]


def run_snippets(snippets: list[dict], cwd: Path = ROOT) -> list[dict]:
    """Run each snippet's code exactly as shown, from the repository root (or `cwd`), each in a fresh
    namespace of one new process for the page (_run_fresh), then evaluate its checks.
    The statements all of them start with (loading the model; on the Causal page the whole experiment,
    which each section's snippet runs again) run once, and each snippet goes on from a copy of what
    they made. Returns each snippet's checked values."""
    code = f"MARK = {MARK!r}\n" + RUNNER
    rc, stdout, stderr = _run_fresh(code, json.dumps(snippets), cwd)
    assert rc == 0, stderr[-3000:]
    results = [json.loads(line[len(MARK):]) for line in stdout.splitlines() if line.startswith(MARK)]
    assert len(results) == len(snippets), stdout[-3000:]
    for snippet, result in zip(snippets, results):
        assert "error" not in result, f"snippet failed:\n{snippet['code']}\n{result.get('error')}"
        assert result["printed"].strip(), f"the snippet prints nothing:\n{snippet['code']}"
    return [r["checks"] for r in results]


def check_snippets(snippets: list[dict], cwd: Path = ROOT) -> None:
    """Every snippet reproduces the numbers the page showed under its check names."""
    for snippet, got in zip(snippets, run_snippets(snippets, cwd)):
        assert set(snippet["checks"]) == set(snippet["shows"]), snippet["title"]
        close(got, snippet["shows"], snippet["title"])


def close(a, b, path="") -> None:
    if isinstance(a, dict) or isinstance(b, dict):
        assert isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b), (path, a, b)
        for k in a:
            close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) or isinstance(b, list):
        assert isinstance(a, list) and isinstance(b, list) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= TOL, (path, a, b)  # a == b: infinities
    else:
        assert a == b, (path, a, b)


def check_page(page, file, widgets=(), at_least=1):
    shown = page_snippets(page, file, widgets)
    assert len(shown) >= at_least, [s["title"] for s in shown]
    check_snippets(shown)


@pytest.mark.app
def test_attention_snippets_2block():
    check_page("app_pages/attention.py", "variable-period-2block.pt",
               [("selectbox", "att_head", "2.2"), ("slider", "att_period", 19), ("number_input", "att_seed", 3),
                ("radio", "att_weighting", "value-weighted")], at_least=4)


def mid_snapshot_step(file: str) -> int:
    """A snapshot step in the middle of the shipped file's training (the step slider's options)."""
    from core.model.checkpoints import read_checkpoint
    if file not in SHIPPED:
        pytest.fail(f"{file} is not in checkpoints/")
    steps = [s["step"] for s in read_checkpoint(ROOT / "checkpoints" / file)[1]["snapshots"]]
    return steps[len(steps) // 2]


@pytest.mark.app
def test_attention_snippets_follow_the_step_slider():
    """At a snapshot step the snippets load that step's weights and give that step's numbers."""
    step = mid_snapshot_step("variable-period-2block.pt")
    shown = page_snippets("app_pages/attention.py", "variable-period-2block.pt",
                          [("select_slider", "att_step", step), ("selectbox", "att_head", "2.1")])
    assert all(f"model_at_step(model, info, {step})" in s["code"] for s in shown), shown[0]["code"]
    check_snippets(shown[:2])  # the pattern and the score table


@pytest.mark.app
def test_circuits_snippets_follow_the_step_slider():
    step = mid_snapshot_step("variable-period-2block.pt")
    shown = page_snippets("app_pages/circuits.py", "variable-period-2block.pt", [("select_slider", "cir_step", step)])
    assert all(f"model_at_step(model, info, {step})" in s["code"] for s in shown), shown[0]["code"]
    check_snippets(shown[2:4])  # the copying matrix and the copying table


@pytest.mark.app
def test_attention_snippets_typed_text_1block():
    check_page("app_pages/attention.py", "variable-period-1block.pt",
               [("radio", "att_source", "Type your own"), ("text_input", "att_text", "abcdabcdabcd")], at_least=4)


@pytest.mark.app
def test_circuits_snippets_2block():
    check_page("app_pages/circuits.py", "variable-period-2block.pt",
               [("selectbox", "cir_head", "2.3"), ("multiselect", "cir_ablate", ["1.2", "2.1"]),
                ("radio", "cir_mode", "mean")], at_least=7)


@pytest.mark.app
def test_circuits_snippets_1block_bias():
    check_page("app_pages/circuits.py", "fixed-period-1block-bias.pt", at_least=6)


@pytest.mark.app
def test_depth_snippets_2block():
    check_page("app_pages/depth.py", "variable-period-2block.pt",
               [("number_input", "depth_seed", 4), ("radio", "depth_which", "top")], at_least=5)


@pytest.mark.app
def test_depth_snippets_zero_block():
    check_page("app_pages/depth.py", "zero-block.pt", at_least=2)


@pytest.mark.app
def test_icl_snippets_2block():
    check_page("app_pages/icl.py", "variable-period-2block.pt", [("number_input", "icl_ex_seed", 2)], at_least=4)


@pytest.mark.app
def test_icl_snippets_drawn_pattern_1block():
    check_page("app_pages/icl.py", "variable-period-1block.pt",
               [("radio", "icl_mode", "draw"), ("number_input", "icl_seed", 5)], at_least=4)


@pytest.mark.app
def test_archetypes_snippets():
    check_page("app_pages/archetypes.py", "variable-period-2block.pt",
               [("selectbox", "arch_name", "duplicate_token"), ("slider", "arch_sharp", 3.5)], at_least=3)


@pytest.mark.app
def test_home_snippet_2block():
    if "variable-period-2block.pt" not in SHIPPED:
        pytest.fail("checkpoint missing")
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.session_state[RECORD_KEY] = True
    at.run()
    assert not at.exception, at.exception
    shown = list(at.session_state[RUN_KEY])
    assert len(shown) == 1
    check_snippets(shown)


@pytest.mark.app
def test_causal_snippet_task_2block():
    """Every section's snippet, the per-position path patching's (behind its button), GradDrop's and the
    RoPE-aware composition's included."""
    period = f"cz_period_{shipped_key('variable-period-2block.pt')}"  # 16, not 24: the position sweeps cost T^2
    shown = page_snippets("app_pages/causal.py", "variable-period-2block.pt",
                          [("toggle", "cz_advanced", True), ("number_input", period, 16),
                           ("number_input", "cz_seed", 1), ("skip", None, None),
                           ("button", "cz_positions_button", True)])
    order = ("runs", "graddrop", "positions", "paths", "path_positions", "rope", "circuit", "lens")
    assert [s["title"] for s in shown] == [snippets.CAUSAL_SECTIONS[k][0] for k in order]
    check_snippets(shown)


@pytest.mark.app
def test_causal_snippet_typed_1block():
    check_page("app_pages/causal.py", "variable-period-1block.pt",
               [("radio", "cz_source", "Type your own"), ("text_input", "cz_text", "abcdeabcdeab"),
                ("skip", None, None)], at_least=3)


@pytest.mark.app
def test_laws_snippets():
    """Every chart and table of the Laws page: each law's fit, runs and sentences, the constant-rate stages and the
    seeds a slope needs, the Markov onsets (and on other chains), depth and the start, the clamps, the readings over
    seeds, each reproduced from the shipped tables in a fresh interpreter."""
    from core.laws import drop, markov, stages

    shown = page_snippets("app_pages/laws.py", "variable-period-2block.pt",
                          [("toggle", "lw_advanced", True), ("skip", None, None)])
    expected = (sum(law.path.is_file() for law in drop.LAWS.values()) + 3 + 2 * stages.TARGETS_FILE.is_file()
                + markov.MARKOV_FILE.is_file() + (markov.MARKOV_FILE.is_file() and markov.PRIOR_FILE.is_file()))
    assert len(shown) == expected, [s["title"] for s in shown]
    assert all("said" in s["checks"] for s in shown)  # each reproduces the page's sentences word for word
    check_snippets(shown)


@pytest.mark.app
def test_train_snippets_shipped_runs():
    check_page("app_pages/train.py", "variable-period-2block.pt", at_least=4)


@pytest.mark.app
def test_train_snippets_of_a_live_run(tmp_path):
    """A short run trained on the page: the snippet trains it again with the worker's calls and gets
    the page's final numbers; the timeline snippet reads the downloaded checkpoint (my_model.pt)."""
    import time
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=180)
    at.session_state[RECORD_KEY] = True
    at.run()
    at.switch_page("app_pages/train.py").run()
    for kind, key, value in (("slider", "tr_layers", 2), ("slider", "tr_periods", (4, 8)),
                             ("slider", "tr_seq_len", 24), ("select_slider", "tr_batch", 4),
                             ("number_input", "tr_steps", 60)):
        getattr(at, kind)(key=key).set_value(value)
    at.button(key="tr_train").click().run()
    run = at.session_state["train_run"]
    deadline = time.monotonic() + 120
    while run.active and time.monotonic() < deadline:
        time.sleep(0.2)
    at.run()
    at.run()
    at.button(key="tr_timeline").click().run()  # the run's own timeline is measured when the student asks
    assert not at.exception, at.exception
    assert run.status == RunStatus.FINISHED and run.result is not None, (run.status, run.error)
    shown = [x for x in at.session_state[RUN_KEY] if "my_model.pt" in x["code"] or "RunConfig.of(" in x["code"]]
    assert len(shown) == 2, [x["title"] for x in at.session_state[RUN_KEY]]
    for name in ("core", "ui", "checkpoints"):  # the repository root, with the student's download in it
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "my_model.pt").write_bytes(run.result[2])
    check_snippets(shown, tmp_path)

