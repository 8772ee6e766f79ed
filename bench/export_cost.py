"""What exporting charts costs the server (ui/charts/export.py), in CPU-seconds of this process.

    python bench/export_cost.py [--repeats 3]

1. Drawing: every page on the default model, run warm in AppTest with the Export menus and without them
   (export.controls replaced by nothing): the menus' share of a page run. Nothing is converted while drawing.
2. Exporting: each chart those pages draw, converted once to SVG, to PNG at PNG_SCALE and to CSV (what one click
   costs the server), the median and the largest.
Prints the matmul rate and the CPU kind beside the figures.
"""
from __future__ import annotations

import argparse
import logging
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def walk(at, pages) -> float:
    t = cpu()
    for page in pages:
        at.switch_page(page.file)
        at.run()
    return cpu() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    logging.disable(logging.CRITICAL)
    from streamlit.testing.v1 import AppTest

    from bench.machine import matmul_rate
    from core.model import cpu as cpu_kind
    from ui.charts import export, kept
    from ui.pages import PATH

    pages = [pg for pg in PATH if pg.url_path not in ("train", "exercises")]
    specs: list[dict] = []
    real_controls = export.controls

    def recording(where, chart, digest):
        specs.append(chart)
        return real_controls(where, chart, digest)

    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=600)
    at.run()
    export.controls = recording
    walk(at, pages)  # warm: views read, charts kept
    export.controls = real_controls
    with_menus, without = [], []
    for _ in range(args.repeats):
        with_menus.append(walk(at, pages))
        export.controls = lambda *a: None
        without.append(walk(at, pages))
        export.controls = real_controls
    costs = {"svg": [], "png": [], "csv": []}
    unique = {kept._spec_digest(s): s for s in specs}
    for spec in unique.values():
        for kind, fn in (("svg", export.svg), ("png", export.png), ("csv", export.csv)):
            t = cpu()
            fn(spec)
            costs[kind].append(cpu() - t)
    w, wo = statistics.median(with_menus), statistics.median(without)
    print(f"CPU kind {cpu_kind.kind()}, matmul {matmul_rate():.0f} GFLOP/s (one thread)")
    print(f"warm walk over {len(pages)} pages, {len(specs)} charts: {w:.3f} CPU-s with the Export menus, {wo:.3f} "
          f"without ({(w - wo) / max(len(specs), 1) * 1000:.1f} CPU-ms a chart; median of {args.repeats})")
    for kind, xs in costs.items():
        print(f"{kind}: median {statistics.median(xs):.3f} CPU-s, largest {max(xs):.3f} over {len(xs)} charts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
