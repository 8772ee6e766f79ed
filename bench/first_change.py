"""What the server spends when a student changes a setting on a page for the first time, on every page.

    python bench/first_change.py [--files variable-period-2block.pt ...] [--pages attention causal ...]
                                 [--emulate avx2] [--json]

For each shipped checkpoint (default: the default model) and each page: a fresh AppTest session opens the page
from empty memory caches, reading the shipped data as a new server does (checkpoints/data/), with every
question's answer drawn (ATTENTION_LAB_PREDICT=off: what a student sees after answering). Then every setting in
the page's main area (select boxes, radios, number inputs, sliders, toggles, checkboxes; not the sidebar's
model picker, not the questions) is changed once to its next value, and that run is measured in CPU-seconds of
this process (every thread, torch's included: resource.getrusage); the setting is then set back (a warm run)
and changed again (warm: the memory cache holds its views). Budget (issue 58): a first change within 2 s at
100 GFLOP/s, scaled by the one-thread matmul rate measured here; a warm one within 1 s. A run that shows
an exception is reported with it. "answer" is the CPU-s until the page has drawn the result of the first view it
computes: up to where a second view starts computing (a page that splits its work, Causal's section 1 and then
its position sweeps, is on screen there with the next spinner turning), else the whole run; issue 58's budget
is on it. "views" lists what the run computed (view: CPU-s).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import matmul_rate  # noqa: E402

BUDGET_S, WARM_S, REFERENCE_GFLOPS = 2.0, 1.0, 100.0
KINDS = ("selectbox", "radio", "number_input", "slider", "toggle", "checkbox")


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _choose(widget, shown: str) -> None:
    """Pick the option shown as `shown`, as the browser does (it sends the option's text, which the server maps
    back to its value): AppTest's own set_value takes the value, which a formatted option does not give."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    class Chosen(type(widget)):
        @property
        def _widget_state(self):
            ws = WidgetState()
            ws.id, ws.string_value = self.id, shown
            return ws
    widget.__class__ = Chosen


def change(widget, kind: str):
    """(apply, undo): functions that move the widget one step on from its value and back (None: left out)."""
    value = widget.value
    if kind in ("toggle", "checkbox"):
        return (lambda w: w.set_value(not value)), (lambda w: w.set_value(value))
    if kind in ("selectbox", "radio"):
        options = list(widget.options)
        try:
            here = widget.index
        except ValueError:  # a value its options do not show (the page's own placeholder)
            return None
        if here is None or len(options) < 2:
            return None
        return (lambda w: _choose(w, options[(here + 1) % len(options)])), (lambda w: _choose(w, options[here]))
    if kind == "number_input":
        step = widget.step or 1
        other = value + step if widget.max is None or value + step <= widget.max else value - step
        return (lambda w: w.set_value(other)), (lambda w: w.set_value(value))
    if kind == "slider":
        if isinstance(value, (tuple, list)):
            return None  # a range: which end to move is the page's choice; left out
        step = widget.step or 1
        other = value + step if value + step <= widget.max else value - step
        return (lambda w: w.set_value(other)), (lambda w: w.set_value(value))
    return None


def _main_widgets(at) -> list[tuple[str, str, object]]:
    """(kind, key, widget) of every setting in the main area, not the questions."""
    sidebar = {id(w) for kind in KINDS for w in getattr(at.sidebar, kind)}
    out = []
    for kind in KINDS:
        for w in getattr(at, kind):
            key = getattr(w, "key", None)
            if id(w) in sidebar or not key or str(key).startswith(("quiz_", "picked_model")):
                continue
            out.append((kind, key, w))
    return out


class Computed:
    """Records, in this process, each view a run computes (a shipped-data miss, ui.shipped_data.first): its name,
    and the CPU-s at its start and end."""

    def __init__(self):
        from ui import shipped_data

        self.calls: list[tuple[str, float, float]] = []
        self._first = first = shipped_data.first

        def recording(name, version, checkpoint, sha256, key, fn, args=(), kwargs=None):
            def timed(*a, **k):
                c0 = cpu_s()
                try:
                    return fn(*a, **k)
                finally:
                    self.calls.append((name, c0, cpu_s()))
            return first(name, version, checkpoint, sha256, key, timed, args, kwargs)
        shipped_data.first = recording

    def answer(self, start: float, end: float) -> float:
        """CPU-s from `start` to the start of the second view computed (nested ones, which another view asks for,
        count in theirs), else to `end`."""
        outer = [c for c in sorted(self.calls, key=lambda c: c[1])
                 if not any(o[1] < c[1] and c[2] < o[2] for o in self.calls)]
        return (outer[1][1] if len(outer) > 1 else end) - start

    def views(self) -> str:
        return ", ".join(f"{n}: {b - a:.2f}" for n, a, b in sorted(self.calls, key=lambda c: c[1]))


def measure(file: str, page, budget: float, warm_budget: float) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    from ui.cache import forget_in_memory
    from ui.model_keys import shipped_key

    forget_in_memory()
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
    at.run()
    at.selectbox(key="picked_model").set_value(shipped_key(file)).run()
    if page.file is not None:
        at.switch_page(page.file)
    at.run()
    rows = []
    for kind, key, _ in _main_widgets(at):
        try:
            widget = getattr(at, kind)(key=key)
        except KeyError:
            continue  # an earlier change took it off the page
        moves = change(widget, kind)
        if moves is None or getattr(widget, "disabled", False):
            continue
        apply, undo = moves
        got = {"checkpoint": file, "page": page.url_path or "home", "setting": f"{key} ({kind})"}
        for phase in ("first", "warm"):
            apply(getattr(at, kind)(key=key))
            computed = Computed()
            c0, w0 = cpu_s(), time.perf_counter()
            try:
                at.run()
            finally:
                c1 = cpu_s()
                from ui import shipped_data
                shipped_data.first = computed._first
            got[f"{phase}_cpu_s"] = round(c1 - c0, 2)
            got[f"{phase}_wall_s"] = round(time.perf_counter() - w0, 2)
            if phase == "first":
                got["answer_cpu_s"] = round(computed.answer(c0, c1), 2)
                got["views"] = computed.views()
            got["exception"] = str(at.exception[0].value)[:120] if at.exception else None
            try:
                undo(getattr(at, kind)(key=key))
            except KeyError:
                break
            at.run()  # back to the defaults (their views are warm)
        got["over"] = got["answer_cpu_s"] > budget or got.get("warm_cpu_s", 0) > warm_budget
        rows.append(got)
    return rows



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="*", default=["variable-period-2block.pt"],
                    help="shipped checkpoint files (default: the default model)")
    ap.add_argument("--pages", nargs="*", help="url paths (home for Home; default: every page but Train)")
    ap.add_argument("--emulate", choices=("native", "avx2", "sse4"), default="native",
                    help="measure as this CPU kind (core.model.cpu.emulate): the bench starts itself again with "
                         "its environment, before torch is imported")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from core.model import cpu

    wanted = cpu.emulate(args.emulate)
    if any(os.environ.get(k) != v for k, v in wanted.items()):
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]],
                  {**os.environ, **wanted})
    import logging

    logging.disable(logging.CRITICAL)
    os.environ["ATTENTION_LAB_PREDICT"] = "off"
    from ui.pages import ALL_PAGES

    rate = matmul_rate()
    budget, warm_budget = (limit * REFERENCE_GFLOPS / rate for limit in (BUDGET_S, WARM_S))
    wanted = set(args.pages) if args.pages else None
    pages = [p for p in ALL_PAGES if (p.url_path or "home") in wanted] if wanted else \
        [p for p in ALL_PAGES if p.url_path != "train"]  # Train's settings start nothing until Train is pressed
    rows = [r for f in args.files for p in pages for r in measure(f, p, budget, warm_budget)]
    if args.json:
        print(json.dumps({"cpu": cpu.kind(), "matmul_gflops": round(rate, 1), "budget_s": round(budget, 2),
                          "rows": rows}))
        return 0
    print(f"CPU {cpu.kind()}, matmul {rate:.1f} GFLOP/s (one thread): first-change budget {budget:.2f} CPU-s "
          f"({BUDGET_S:g} s at {REFERENCE_GFLOPS:g} GFLOP/s), warm {warm_budget:.2f}")
    print(f"{'checkpoint':<28} {'page':<11} {'setting':<40} {'answer':>7} {'first CPU-s':>11} {'warm CPU-s':>10}")
    for r in rows:
        print(f"{r['checkpoint']:<28} {r['page']:<11} {r['setting'][:40]:<40} {r['answer_cpu_s']:>7.2f} "
              f"{r['first_cpu_s']:>11.2f} {r.get('warm_cpu_s', float('nan')):>10.2f}{'  over' if r['over'] else ''}"
              + (f"  {r['exception']}" if r["exception"] else "") + (f"  [{r['views']}]" if r["views"] else ""))
    worst = max(rows, key=lambda r: r["answer_cpu_s"]) if rows else None
    if worst:
        print(f"{len(rows)} settings; {sum(r['over'] for r in rows)} over budget; the slowest first answer: "
              f"{worst['page']} {worst['setting']} {worst['answer_cpu_s']} CPU-s (whole run {worst['first_cpu_s']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
