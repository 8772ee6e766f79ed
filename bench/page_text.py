"""Every sentence, number, table and chart frame of every page on every shipped checkpoint, as a visitor who
changes no widget sees them: a record to compare before and after a change that must not move any of them.

    python bench/page_text.py --out before.json             # walk every page on every shipped model
    python bench/page_text.py --out after.json --compare before.json   # ... and list what differs

Each page is run in Streamlit's AppTest (ui.cache.walk's way); each element is kept as its type and its
content: text for markdown, captions, metrics and messages; a table's CSV; a chart's Vega-Lite spec with its
data (generated names such as param_3 or view_12 made neutral, since they count charts across a process).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_GENERATED = re.compile(r"\b(param|view|selector|data|concat|layer|facet|vconcat|hconcat)_\d+\b")


def _chart(proto) -> dict:
    spec = json.loads(proto.spec) if proto.spec else {}
    data = {}
    for ds in getattr(proto, "datasets", []):
        try:
            import pyarrow as pa

            table = pa.ipc.open_stream(ds.data.data).read_all().to_pandas()
            data[ds.name] = table.to_csv(index=False, float_format="%.6g")
        except Exception:  # noqa: BLE001 -- a dataset that does not parse is kept as its length
            data[ds.name] = len(ds.data.data)
    text = json.dumps({"spec": spec, "data": data}, sort_keys=True)
    text = re.sub(r'"data-[0-9a-f]{16,}"', '"data-hash"', text)
    return json.loads(_GENERATED.sub(r"\1_N", text))


def _element(node) -> dict | None:
    kind = getattr(node, "type", type(node).__name__)
    proto = getattr(node, "proto", None)
    if kind in ("markdown", "caption", "title", "header", "subheader", "latex", "code", "text", "error", "warning",
                "info", "success", "exception"):
        return {"type": kind, "value": str(getattr(node, "value", ""))}
    if kind == "metric":
        return {"type": kind, "label": node.label, "value": node.value, "delta": getattr(node, "delta", None)}
    if kind in ("dataframe", "table"):
        try:
            return {"type": kind, "value": node.value.to_csv(float_format="%.6g")}
        except Exception:  # noqa: BLE001
            return {"type": kind, "value": "?"}
    if proto is not None and type(proto).__name__ in ("VegaLiteChart", "ArrowVegaLiteChart"):
        return {"type": "chart", "value": _chart(proto)}
    if kind == "html":
        return {"type": kind, "value": getattr(proto, "body", "")}
    label = getattr(node, "label", None)
    if label is not None:  # a widget: its label and its value as drawn
        value = getattr(node, "value", None)
        return {"type": kind, "label": str(label), "value": value if isinstance(value, (int, float, str, bool,
                                                                                        type(None))) else str(value)}
    return None


def _walk(node, out: list) -> None:
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            _walk(child, out)
        return
    got = _element(node)
    if got is not None:
        out.append(got)


def record(files: list[str] | None = None) -> dict:
    """{"<checkpoint> <page>": [element, ...]} for every page on every shipped model (ui.cache.walk's visit)."""
    from ui.cache import walk

    out = {}

    def visit(entry, page, at):
        elements: list = []
        _walk(at._tree, elements)
        if at.exception:
            elements.append({"type": "EXCEPTION", "value": str(at.exception[0].value)})
        out[f"{entry.file} {page.name}"] = elements
        print(f"{entry.file:<36} {page.name:<12} {len(elements):>4} elements", file=sys.stderr, flush=True)

    walk(files, visit)
    return out


def compare(before: dict, after: dict) -> list[str]:
    lines = []
    for where in sorted(set(before) | set(after)):
        a, b = before.get(where), after.get(where)
        if a == b:
            continue
        if a is None or b is None:
            lines.append(f"{where}: only {'after' if a is None else 'before'}")
            continue
        n = max(len(a), len(b))
        for i in range(n):
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            if x != y:
                lines.append(f"{where} #{i}:\n  before: {json.dumps(x)[:400]}\n  after:  {json.dumps(y)[:400]}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="write the record here (JSON)")
    p.add_argument("--compare", help="a record written before: list every element that differs")
    p.add_argument("--files", nargs="*", help="only these checkpoints (as the picker names their file)")
    args = p.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)
    got = record(args.files)
    Path(args.out).write_text(json.dumps(got, indent=0, sort_keys=True))
    if args.compare:
        diff = compare(json.loads(Path(args.compare).read_text()), got)
        print("\n".join(diff) if diff else "every element the same")
        print(f"{len(diff)} elements differ over {len(got)} pages")
        return 1 if diff else 0
    print(f"{len(got)} pages, {sum(len(v) for v in got.values())} elements -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
