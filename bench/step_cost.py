"""A training step's cost before and after a change to the model module, in the same run.

    python bench/step_cost.py [--before REV] [--rounds 15] [--steps 10] [--threads 1] [--json]

Imports core/model/tinycharlm.py as it was at REV (default: a565317, the last commit whose forwards
were written by hand, before TinyCharLM.run_with_hooks) from a temporary copy, next to today's module,
builds both models of the default preset from the same weights and times a training step of each
(forward, cross-entropy, backward, AdamW step, on the preset's batch size and training length) in
alternating rounds, at one thread by default: a shared machine's drift falls on both alike, so the ratio
of the medians is the figure to quote. Also the held run (block 1's head 1 held on the previous token,
core.training.interventions), the other training path. Prints the float32 1024x1024 matmul rate
measured in the same run.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from machine import matmul_rate  # noqa: E402

from core.model import tinycharlm  # noqa: E402
from core.model.task import sample_batch  # noqa: E402
from core.training.presets import DEFAULT_PRESET, get_preset  # noqa: E402

BEFORE = "a565317"  # the last commit with the hand-written forwards (before the intervention point)



def module_at(rev: str):
    """core/model/tinycharlm.py as it was at `rev`, imported from a temporary copy."""
    text = subprocess.run(["git", "show", f"{rev}:core/model/tinycharlm.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "tinycharlm_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("tinycharlm_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks the module up
    spec.loader.exec_module(module)
    return module


def stepper(module, state: dict, cfg, hold: int | None, tokens: torch.Tensor):
    """A function running one training step of module.TinyCharLM with weights `state`."""
    model = module.TinyCharLM(module.ModelConfig(**dataclasses.asdict(cfg)))
    model.load_state_dict(state)
    model.hold_previous(hold)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    V = cfg.vocab_size

    def step():
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    p = get_preset(DEFAULT_PRESET)
    tokens, _ = sample_batch(p.train.train_task(p.task), p.train.batch_size, p.model.vocab_size,
                             torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    state = tinycharlm.TinyCharLM(p.model).state_dict()
    old = module_at(args.before)
    out = {"before": args.before, "threads": args.threads, "batch": list(tokens.shape),
           "matmul_gflops": round(matmul_rate(), 1)}
    for label, hold in (("plain", None), ("held head 1.2", 1)):
        steps = {"before": stepper(old, state, p.model, hold, tokens),
                 "after": stepper(tinycharlm, state, p.model, hold, tokens)}
        for run in steps.values():  # warm up
            for _ in range(3):
                run()
        times = {k: [] for k in steps}
        for r in range(args.rounds):
            for k in (("before", "after") if r % 2 == 0 else ("after", "before")):
                t0 = time.process_time()
                for _ in range(args.steps):
                    steps[k]()
                times[k].append((time.process_time() - t0) / args.steps * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[label] = {"before_ms": round(med["before"], 2), "after_ms": round(med["after"], 2),
                      "ratio": round(med["after"] / med["before"], 3)}
    out["matmul_gflops_end"] = round(matmul_rate(), 1)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"batch {out['batch']}, {args.threads} thread(s), matmul {out['matmul_gflops']} GFLOP/s at the start, "
              f"{out['matmul_gflops_end']} at the end")
        for label in ("plain", "held head 1.2"):
            r = out[label]
            print(f"{label:14s} CPU ms/step before {r['before_ms']:.2f}  after {r['after_ms']:.2f}  "
                  f"ratio {r['ratio']:.3f}")
    return out


if __name__ == "__main__":
    main()
