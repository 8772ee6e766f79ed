"""Do the shipped checkpoints' figures hold when they are retrained on another kind of CPU?

    nice -n 5 python bench/cpu_reproduce.py [--cpu avx2] [--presets a,b] [--json]

For each preset (core.training.presets) it trains the checkpoint again exactly as core.shipped does
(`python -m core.train --preset NAME`, one thread), but in a process that behaves as the CPU kind
--cpu names (core.model.cpu.emulate: the compiled attention built for it, torch's and MKL's kernels held
to its instruction set; `native` retrains on this host as it is, the control that must give the same
bytes), then reads both files with `python -m core.report --json` on this host. It reports, per preset:
whether the weights are the same bytes, the largest parameter difference, the largest difference of
any copy metric (core.report's `metrics`) and of any head score (`heads`), and the drop step read from
each file's logged history (core.training.live.drop_step). core.model.cpu.TOLERANCE is the tolerance
these figures are held to (tests/test_cpu_kinds.py).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.model import cpu  # noqa: E402

HEAD_SCORES = ("prev_token", "induction", "induction_any")


def _run(argv: list[str], env: dict) -> str:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def _numbers(x, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON value, by its path."""
    if isinstance(x, bool):
        return {}
    if isinstance(x, (int, float)):
        return {prefix: float(x)}
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in _numbers(val, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in _numbers(val, f"{prefix}[{i}]").items()}
    return {}


def _largest(a: dict[str, float], b: dict[str, float]) -> tuple[float, str]:
    diffs = [(abs(a[k] - b[k]), k) for k in a.keys() & b.keys()]
    return max(diffs) if diffs else (0.0, "")


def compare(shipped: Path, retrained: Path, env: dict) -> dict:
    """The differences between a shipped checkpoint and its retrained copy (module docstring)."""
    import torch

    from core.model.checkpoints import read_checkpoint
    from core.training.live import drop_step

    reports = [json.loads(_run([sys.executable, "-m", "core.report", str(p), "--json"], env))
               for p in (shipped, retrained)]
    loaded = [read_checkpoint(p) for p in (shipped, retrained)]
    params = [dict(model.named_parameters()) for model, _ in loaded]
    diff = max(float((params[0][n] - params[1][n]).detach().abs().max()) for n in params[0])
    metrics = [_numbers(r["metrics"]) for r in reports]
    heads = [{f"{h['layer']}.{h['head']}.{s}": h[s] for h in r["heads"] for s in HEAD_SCORES if s in h}
             for r in reports]
    ov = [{f"{h['layer']}.{h['head']}.{s}": h[s] for h in r["heads"] for s in cpu.OV_SCORES if s in h}
          for r in reports]
    vocab = loaded[0][0].cfg.vocab_size
    drops = [drop_step(extra.get("history"), vocab) for _, extra in loaded]
    m_diff, m_key = _largest(*metrics)
    h_diff, h_key = _largest(*heads)
    o_diff, o_key = _largest(*ov)
    tol = cpu.TOLERANCE
    return {"within_tolerance": drops[0] == drops[1] and m_diff <= tol["metric"] and h_diff <= tol["head_score"]
            and o_diff <= tol["ov_score"],
            "ov_score_max_abs_diff": round(o_diff, 6), "ov_score": o_key,
            "same_bytes": all(torch.equal(params[0][n], params[1][n]) for n in params[0]),
            "param_max_abs_diff": diff, "metric_max_abs_diff": round(m_diff, 6), "metric": m_key,
            "head_score_max_abs_diff": round(h_diff, 6), "head_score": h_key,
            "drop_step": {"shipped": drops[0], "retrained": drops[1]}}


def main(argv=None) -> int:
    from core.training.presets import PRESETS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", default="avx2", choices=("native", *cpu.EMULATIONS))
    ap.add_argument("--presets", default=",".join(sorted(PRESETS)))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    native = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for k in {cpu.ENV, *(key for *_, switches in cpu.EMULATIONS.values() for key in switches)}:
        native.pop(k, None)
    env = {**native, **cpu.emulate(args.cpu)}
    kind = _run([sys.executable, "-c", "from core.model import cpu; print(cpu.kind())"], env).strip()
    out = {"cpu": kind, "host": cpu.native_kind(), "presets": {}}
    with tempfile.TemporaryDirectory(prefix="cpu-reproduce-") as tmp:
        for preset in args.presets.split(","):
            path = Path(tmp) / f"{preset}.pt"
            _run([sys.executable, "-m", "core.train", "--preset", preset, "--out", str(path)], env)
            row = compare(ROOT / "checkpoints" / f"{preset}.pt", path, native)
            out["presets"][preset] = row
            if not args.json:
                print(f"{preset} retrained as {kind} (host {out['host']}): same bytes {row['same_bytes']}, "
                      f"parameters differ by at most {row['param_max_abs_diff']:.3g}; metrics by at most "
                      f"{row['metric_max_abs_diff']} ({row['metric']}), head scores by at most "
                      f"{row['head_score_max_abs_diff']} ({row['head_score']}), OV scores by at most "
                      f"{row['ov_score_max_abs_diff']} ({row['ov_score']}); drop step {row['drop_step']}; "
                      f"within the tolerance {cpu.TOLERANCE}: {row['within_tolerance']}",
                      flush=True)
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
