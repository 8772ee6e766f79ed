"""Where a reading server's memory is after a walk over every page: PSS broken down in the server.

    python bench/server_memory.py [--walks 2] [--train] [--holders] [--env NAME=VALUE ...] [--json]

Starts `streamlit run dashboard.py` through this file (its `serve`: a SIGUSR1 handler in the server writes a
probe to a file), walks every page --walks times with bench/light.py's LightSession (no browser), waits for
the session to end (the TTL and ui/sessions.py's MARGIN, then ui/setup.py's next full collection) and reads:
- the server's PSS (smaps_rollup: anonymous and file-backed), and glibc's heap (mallinfo2: in use, free,
  mmapped), Python's object allocator (sys.getallocatedblocks);
- Streamlit's own byte counts (its stats manager: st.cache_data's pickled values, st.cache_resource,
  the forward-message cache, session state, media files);
- what the garbage collector reaches: torch storages, numpy arrays, bytes, by count and MB;
- the anonymous memory by where it lives (glibc's main heap, large anonymous mappings, the rest) and
  Arrow's allocator; with --holders, who holds the largest buffers (the first path from a module's
  namespace or a thread's frame to each);
then, after that idle time, opens every page once more in a new session: its CPU-seconds and the PSS
after. With --train the walk also trains the default settings once on the Train page, and the total PSS
of the server with its helper processes (forkserver, resource tracker, a kept worker) is read after the
run and again after the walk. --env adds a variable to the server's environment (e.g. ATTENTION_LAB_ATTENTION,
or MALLOC_ARENA_MAX to try an allocator setting). Prints the one-thread 1024² matmul rate.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))


# ---------------------------------------------------------------------------------------------
# Inside the server


def _mallinfo() -> dict:
    import ctypes

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = Mallinfo2
        m = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    mb = 2 ** 20
    return {"heap_mb": round(m.arena / mb, 1), "in_use_mb": round(m.uordblks / mb, 1),
            "free_mb": round(m.fordblks / mb, 1), "mmapped_mb": round(m.hblkhd / mb, 1)}


def _reachable() -> dict:
    """torch storages, numpy arrays and bytes that the collector's tracked objects refer to (torch is not
    imported here: a reading server never loads it, and the probe must not either)."""
    import gc

    import numpy as np

    torch = sys.modules.get("torch")
    storages, arrays, blobs, seen = {}, {}, 0, set()
    for obj in gc.get_objects():
        for ref in gc.get_referents(obj):
            if torch is not None and isinstance(ref, torch.Tensor):
                try:
                    s = ref.untyped_storage()
                    storages[s.data_ptr()] = s.nbytes()
                except RuntimeError:
                    pass
            elif isinstance(ref, np.ndarray):
                base = ref
                while isinstance(base.base, np.ndarray):
                    base = base.base
                arrays[id(base)] = base.nbytes
            elif isinstance(ref, (bytes, bytearray)) and id(ref) not in seen and len(ref) > 1024:
                seen.add(id(ref))
                blobs += len(ref)
    mb = 2 ** 20
    return {"torch_loaded": torch is not None, "torch_storages": len(storages),
            "torch_mb": round(sum(storages.values()) / mb, 1),
            "numpy_arrays": len(arrays), "numpy_mb": round(sum(arrays.values()) / mb, 1),
            "bytes_over_1k_mb": round(blobs / mb, 1), "gc_tracked": len(gc.get_objects())}


MIN_BYTES = 16 * 1024  # smaller buffers are not named by _holders


def _holders() -> list[str]:
    """Who holds the 15 largest buffers (torch storages, numpy arrays, bytes of at least MIN_BYTES): a
    breadth-first walk from every module's namespace and every thread's frames, each buffer named by
    the first path that reaches it (module, then the types and keys on the way)."""
    import collections
    import gc
    import warnings

    import numpy as np

    torch = sys.modules.get("torch")  # not imported here (see _reachable)

    def size(obj) -> int:
        if torch is not None and isinstance(obj, torch.Tensor):
            try:
                return obj.untyped_storage().nbytes()
            except RuntimeError:
                return 0
        if isinstance(obj, np.ndarray):
            return obj.nbytes if obj.base is None else 0
        if isinstance(obj, (bytes, bytearray)):
            return len(obj)
        return 0

    def label(parent, child) -> str:
        if isinstance(parent, dict):
            for k, v in parent.items():
                if v is child:
                    return f"[{str(k)[:40]}]"
        return type(child).__name__

    roots = [(m.__dict__, f"module {name}") for name, m in list(sys.modules.items()) if hasattr(m, "__dict__")]
    roots += [(f, f"thread frame {f.f_code.co_name}") for f in sys._current_frames().values()]
    seen, queue, found = set(), collections.deque(), {}
    warnings.simplefilter("ignore")  # this bench server only: deprecated module attributes warn when walked
    for obj, name in roots:
        if id(obj) not in seen:
            seen.add(id(obj))
            queue.append((obj, name, 0))
    while queue:
        obj, path, depth = queue.popleft()
        n = size(obj)
        if n >= MIN_BYTES:
            key = obj.untyped_storage().data_ptr() if isinstance(obj, torch.Tensor) else id(obj)
            found.setdefault(key, (n, path))
        if depth >= 40 or isinstance(obj, (str, int, float, bytes, bytearray)):
            continue
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, type):
                seen.add(id(ref))
                queue.append((ref, f"{path} > {label(obj, ref)}", depth + 1))
    # storages the collector sees that no path from a module or a frame reached
    for obj in gc.get_objects():
        for ref in gc.get_referents(obj):
            if isinstance(ref, torch.Tensor) and (n := size(ref)) >= MIN_BYTES:
                ptr = ref.untyped_storage().data_ptr()
                if ptr not in found:
                    found[ptr] = (n, f"unreached, held by a {type(obj).__module__}.{type(obj).__qualname__}")
    by_path: dict[str, list] = {}
    for n, path in found.values():
        short = " > ".join(path.split(" > ")[:5])
        entry = by_path.setdefault(short, [0, 0, path])
        entry[0], entry[1] = entry[0] + n, entry[1] + 1
    rows = sorted(by_path.items(), key=lambda kv: -kv[1][0])[:15]
    return [f"{n / 2 ** 20:.1f} MB in {c}: {path}" + (f" (e.g. {example})" if example != path else "")
            for path, (n, c, example) in rows]


def _streamlit_stats() -> dict:
    from streamlit.runtime import Runtime

    out: dict[str, float] = {}
    try:
        stats = Runtime.instance().stats_mgr.get_stats()
    except Exception as e:  # noqa: BLE001 -- a probe: report rather than fail
        return {"error": repr(e)}
    for group in (stats.values() if isinstance(stats, dict) else [stats]):
        for stat in group:
            if not hasattr(stat, "byte_length"):  # counters, not bytes
                continue
            name = stat.category_name + (f":{stat.cache_name}" if getattr(stat, "cache_name", "") else "")
            out[name] = out.get(name, 0) + stat.byte_length
    return {k: round(v / 2 ** 20, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v > 10 * 1024}


def probe(path: Path) -> None:
    try:
        _probe(path)
    except Exception as e:  # noqa: BLE001 -- a probe: the error goes to the file
        path.write_text(json.dumps({"error": repr(e)}))


def _anonymous() -> dict:
    """The process's anonymous memory by where it lives: glibc's main heap ([heap]), the other anonymous
    mappings of 1 MB or more (pymalloc's arenas, glibc's second arena and large blocks, Arrow's pool),
    the small ones; and what Arrow's allocator holds (its pool keeps freed memory to reuse)."""
    heap = big = small = 0
    big_count, kind = 0, ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            kind = head[5] if len(head) > 5 else ""
            size = 0
        elif head[0] == "Size:":
            size = int(head[1])
        elif head[0] == "Anonymous:" and int(head[1]):
            kb = int(head[1])
            if kind == "[heap]":
                heap += kb
            elif not kind and size >= 1024:
                big, big_count = big + kb, big_count + 1
            else:
                small += kb
    out = {"heap_mb": round(heap / 1024, 1), "large_mappings_mb": round(big / 1024, 1), "large_mappings": big_count,
           "other_mb": round(small / 1024, 1)}
    if "pyarrow" in sys.modules:
        import pyarrow

        pool = pyarrow.default_memory_pool()
        out.update(arrow_backend=pool.backend_name, arrow_allocated_mb=round(pool.bytes_allocated() / 2 ** 20, 1),
                   arrow_peak_mb=round(pool.max_memory() / 2 ** 20, 1))
    return out


def _probe(path: Path) -> None:
    from memory import smaps_detail

    out = {"smaps": smaps_detail(os.getpid()), "anonymous": _anonymous(), "malloc": _mallinfo(),
           "streamlit": _streamlit_stats(), "python_blocks": sys.getallocatedblocks(), "modules": len(sys.modules),
           **_reachable()}
    if os.environ.get("BENCH_HOLDERS"):  # --holders: the walk allocates, so every figure read after it is higher
        out["holders"] = _holders()
    path.write_text(json.dumps(out))


def serve(argv: list[str]) -> None:
    """`server_memory.py serve <probe file> -- <streamlit run arguments>`."""
    out = Path(argv[0])
    import threading

    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=probe, args=(out,), daemon=True).start())
    argv = argv[2:] if argv[1:2] == ["--"] else argv[1:]
    from streamlit.web import cli

    sys.argv = ["streamlit", "run", *argv]
    cli.main()


# ---------------------------------------------------------------------------------------------
# The driver


def _ask(pid: int, out: Path) -> dict:
    out.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.is_file() and out.stat().st_size:
            time.sleep(0.2)
            return json.loads(out.read_text())
        time.sleep(0.2)
    return {}


def tree_pss(pid: int) -> dict:
    """PSS of the server and of each of its descendants (forkserver, resource tracker, workers)."""
    from first_walk import descendants
    from memory import pss_mb

    out = {"server": round(pss_mb(pid), 1)}
    for child in descendants(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            kind = ("forkserver" if "forkserver" in cmd else "resource_tracker" if "resource_tracker" in cmd
                    else "worker" if "multiprocessing" in cmd or "spawn" in cmd else cmd[:40])
            out[f"{kind} {child}"] = round(pss_mb(child), 1)
        except OSError:
            pass
    out["total"] = round(sum(v for k, v in out.items()), 1)
    return out


async def _walk(url: str, walks: int, train: bool, pid: int, log) -> dict:
    from light import LightSession

    from ui.pages import ALL_PAGES

    pages = [p.url_path for p in ALL_PAGES]
    out = {}
    async with LightSession(url) as s:
        if train:
            from memory import _until_trained

            await s.open("train")
            await s.press("tr_train")
            await _until_trained(s)
            out["tree_after_training"] = tree_pss(pid)
            log(f"after the training: {out['tree_after_training']}")
        from page_cost import cpu_seconds

        for _ in range(walks):
            c0 = cpu_seconds(pid)
            for page in pages:
                await s.open(page)
            out["walk_cpu_s"] = round(cpu_seconds(pid) - c0, 3)  # the last walk's
        out["errors"] = list(s.errors)
    return out


async def _walk_again(url: str, pid: int) -> dict:
    """One more walk in a new session after the idle server paged out: its CPU-seconds and the PSS after."""
    from light import LightSession
    from memory import pss_mb
    from page_cost import cpu_seconds

    from ui.pages import ALL_PAGES

    async with LightSession(url) as s:
        c0 = cpu_seconds(pid)
        for page in ALL_PAGES:
            await s.open(page.url_path)
        return {"walk_cpu_s": round(cpu_seconds(pid) - c0, 3), "pss_mb": round(pss_mb(pid), 1),
                "errors": list(s.errors)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--walks", type=int, default=2)
    ap.add_argument("--ttl", type=float, default=5.0)
    ap.add_argument("--settle", type=float, default=65.0, help="seconds after the session ended")
    ap.add_argument("--train", action="store_true", help="train the default settings once before the walks")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the server's environment")
    ap.add_argument("--holders", action="store_true",
                    help="also name who holds the largest buffers (a walk over every object: read the PSS before it)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from machine import matmul_rate
    from memory import _ended, start_server

    log = (lambda m: None) if args.json else print
    out_file = Path(tempfile.mkdtemp(prefix="probe-")) / "probe.json"
    env = {**({"BENCH_HOLDERS": "1"} if args.holders else {}), **dict(e.split("=", 1) for e in args.env)}
    proc, url = start_server(env, ("--server.disconnectedSessionTTL", str(int(args.ttl))),
                             launcher=(str(Path(__file__).resolve()), "serve", str(out_file), "--"))
    try:
        out = asyncio.run(_walk(url, args.walks, args.train, proc.pid, log))
        out["tree_after_walk"] = tree_pss(proc.pid)
        log(f"server and helpers right after the walk: {out['tree_after_walk']}")
        out["after_walk"] = _ask(proc.pid, out_file)
        log(f"right after the walk: {json.dumps(out['after_walk'])}")
        asyncio.run(_ended(url, args.ttl, args.settle))
        out["after_end"] = _ask(proc.pid, out_file)
        out["tree_after_end"] = tree_pss(proc.pid)
        log(f"after the session ended: {json.dumps(out['after_end'])}")
        log(f"server and helpers: {out['tree_after_end']}")
        out["walk_after_idle"] = asyncio.run(_walk_again(url, proc.pid))
        log(f"a walk after the idle time: {out['walk_after_idle']} (the last walk before: {out['walk_cpu_s']} CPU-s)")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    out.update(walks=args.walks, train=args.train, env=env, matmul_gflops=round(matmul_rate(), 1))
    if args.json:
        print(json.dumps(out))
    else:
        print(f"errors: {len(out['errors'])}; matmul {out['matmul_gflops']} GFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
