"""Snippet code written as Python: each piece of a snippet is the body of a function that is never
called, so ruff and the editor check it like any other code.

    def _pattern(view, LAYER, HEAD, LABEL):
        pattern = view.raw[LAYER, HEAD]  # head LABEL: [query i, key j]
        print(pattern.round(2))
        return {"pattern": pattern}

- Parameters in CAPITALS are placeholders: `fill(_pattern, LAYER=1, HEAD=0, LABEL="2.1")` is the
  function's body with each one replaced by the page's value written as a Python literal (`Code`
  values as written, e.g. an attribute name or an expression); in comments, by the value as text
  (a string with a line break is written as a literal there too).
- Lowercase parameters are names an earlier piece of the snippet defines (`model`, `task`, `info`
  by the lines that load the model, ui/snippets/load.py).
- The final `return` is not part of the code. `return {name: expression}` gives the snippet's
  checks (ui.python_panel.Snippet.checks: each expression, evaluated after the code, must equal what
  the page shows under that name); `return a, b` names what the piece hands on to the next one.
"""
from __future__ import annotations

import ast
import inspect
import io
import numbers
import re
import textwrap
import tokenize
from collections.abc import Callable
from functools import cache
from typing import Any

from core.ast_parse import parse

Piece = Callable[..., Any]


class Code(str):
    """A value written into the code as it is (an attribute name, an expression, keyword arguments)
    rather than as a literal."""


def _plain(value: Any) -> Any:
    """The value with numpy and other number types made plain Python, so its repr is a literal."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    raise TypeError(f"a snippet value must be a plain literal or Code, not {type(value).__name__}")


def literal(value: Any) -> str:
    """How a placeholder's value is written in the code."""
    return str(value) if isinstance(value, Code) else repr(_plain(value))


def placeholders(piece: Piece) -> list[str]:
    """The piece's CAPITALISED parameters, which the page's values fill in."""
    return [p for p in inspect.signature(piece).parameters if p.isupper()]


@cache
def _template(piece: Piece) -> tuple[str, list[tuple[int, int, int, str, bool]]]:
    """The function's dedented source and where each placeholder occurs after its signature:
    (line index, start column, end column, name, in a comment)."""
    source = textwrap.dedent(inspect.getsource(piece))
    names = set(placeholders(piece))
    spots, in_body = [], False
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b") if names else None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if not in_body:
            in_body = tok.type == tokenize.NEWLINE  # the end of the `def` line(s)
            continue
        if tok.type == tokenize.NAME and tok.string in names:
            spots.append((tok.start[0] - 1, tok.start[1], tok.end[1], tok.string, False))
        elif tok.type == tokenize.COMMENT and word:
            spots += [(tok.start[0] - 1, tok.start[1] + m.start(), tok.start[1] + m.end(), m.group(), True)
                      for m in word.finditer(tok.string)]
    return source, spots


def _filled(piece: Piece, values: dict[str, Any]) -> tuple[str, ast.FunctionDef]:
    missing = set(placeholders(piece)) - set(values)
    if missing:
        raise TypeError(f"{piece.__name__} needs values for {', '.join(sorted(missing))}")
    source, spots = _template(piece)
    lines = source.splitlines(keepends=True)
    for row, start, end, name, comment in sorted(spots, reverse=True):  # right to left keeps the columns
        value = values[name]
        text = value if comment and isinstance(value, str) and "\n" not in value else literal(value)
        lines[row] = lines[row][:start] + text + lines[row][end:]
    text = "".join(lines)
    return text, parse(text).body[0]


def _parts(piece: Piece, values: dict[str, Any]) -> tuple[str, ast.FunctionDef, list[ast.stmt], ast.Return | None]:
    """The filled source, the function, its statements (no docstring, no final return) and that return."""
    text, fn = _filled(piece, values)
    body = list(fn.body)
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body.pop(0)  # a docstring says what the piece is for; it is not shown
    final = body.pop() if isinstance(body[-1], ast.Return) else None
    return text, fn, body, final


def fill(piece: Piece, **values: Any) -> str:
    """The piece's code with the page's values filled in (ends with a newline)."""
    text, fn, body, final = _parts(piece, values)
    lines = text.splitlines(keepends=True)
    first = body[0].lineno - 1
    while first > fn.lineno and lines[first - 1].strip().startswith("#"):
        first -= 1  # comment lines just above the first statement belong to the code
    last = final.lineno - 1 if final is not None else body[-1].end_lineno
    return textwrap.dedent("".join(lines[first:last])).strip("\n") + "\n"


def checks(piece: Piece, **values: Any) -> dict[str, str]:
    """The piece's final `return {name: expression}`, each expression as one line of source."""
    text, _fn, _body, final = _parts(piece, values)
    if final is None or not isinstance(final.value, ast.Dict):
        return {}
    return {ast.literal_eval(key): " ".join(line.strip() for line in ast.get_source_segment(text, value).splitlines())
            for key, value in zip(final.value.keys, final.value.values)}
