"""The student's files, generated from the solutions: the templates exercises/part*.py (each function's
signature and statement, its body `raise NotImplementedError`) and a notebook per section for a picked
model (nbformat 4.5, plain json). `python -m exercises.build` rewrites the templates; a test checks
that the files in the repository are what this module makes.

Running it overwrites your own answers in exercises/part*.py: copy them elsewhere first.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from core.ast_parse import parse
from exercises.catalogue import SECTIONS, Exercise, in_section, rating, solution_text

HERE = Path(__file__).resolve().parent
STUB = '    raise NotImplementedError("not written yet")\n'
RATINGS = "Difficulty 🔴 (of 5), importance 🔵 (of 5): how hard it is, and how much the rest of the lab leans on it."


def _parts(section: str):
    """(module docstring, import lines, [(name, header source incl. docstring, full source)])."""
    text = solution_text(section)
    tree = parse(text)
    lines = text.splitlines(keepends=True)
    imports, funcs = [], []
    nodes = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if nodes:  # the import block as written, blank lines between the groups included
        imports = [line.rstrip("\n") for line in lines[nodes[0].lineno - 1:nodes[-1].end_lineno]]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            doc = node.body[0]
            header = "".join(lines[node.lineno - 1:doc.end_lineno])
            funcs.append((node.name, header, "".join(lines[node.lineno - 1:node.end_lineno])))
    return ast.get_docstring(tree), imports, funcs


def _solution_source(name: str) -> str:
    """The source of one solution function (what a notebook's stub cell holds once solved)."""
    from exercises.catalogue import BY_NAME

    return BY_NAME[name].solution()


def template_source(section: str) -> str:
    """The student's file for one section: every function's signature and statement, body to write."""
    doc, imports, funcs = _parts(section)
    title = doc.split(".")[0].rstrip()
    head = (f'"""{title}.\n\nYour file: write each function below, then check it with\n\n'
            f"    python -m pytest exercises/test_{section}.py\n\n"
            "from the repository's root folder (ATTENTION_LAB_MODEL=path/to/model.pt checks on your own model).\n"
            f'Hints and solutions: the Exercises page of the app, or exercises/solutions/{section}.py.\n"""\n')
    body = "".join(f"{imp}  # noqa: F401\n" if imp else "\n" for imp in imports)
    for _, header, _ in funcs:
        body += "\n\n" + header + STUB
    return head + body


def write_templates() -> list[Path]:
    out = []
    for section in SECTIONS:
        path = HERE / f"{section}.py"
        path.write_text(template_source(section))
        out.append(path)
    return out


# ---------------------------------------------------------------------------------------------
# Notebooks


def _cell(kind: str, text: str, n: int) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{n}", "metadata": {}, "source": text.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def exercise_markdown(ex: Exercise, number: int) -> str:
    """An exercise's heading, rating, time and page, then its hints and solution folded away."""
    hints = "".join(f"<details><summary>Hint {i}</summary>\n\n{h}\n\n</details>\n" for i, h in enumerate(ex.hints, 1))
    return (f"## {number}. {ex.title}\n\n"
            f"Difficulty {rating(ex.difficulty, '🔴')} · importance {rating(ex.importance, '🔵')} · "
            f"about {ex.minutes} minutes · see it on the page *{page_title(ex.page)}*.\n\n"
            f"Write `{ex.name}` in the cell below (what to compute is in its docstring), then run the check.\n\n"
            f"{hints}<details><summary>Solution</summary>\n\n```python\n{ex.solution().rstrip()}\n```\n\n</details>\n")


def page_title(file: str) -> str:
    from ui.pages import PATH

    return next((p.title for p in PATH if p.file == file), file)


def numbered() -> dict[str, int]:
    """Each exercise's number on the path (1-based, across the sections)."""
    from exercises.catalogue import EXERCISES

    return {ex.name: i for i, ex in enumerate(EXERCISES, 1)}


def notebook(section: str, model_path: str | None, model_label: str) -> dict:
    """The section's notebook for a model: model_path is the checkpoint's path from the repository's root
    (None for a model trained or uploaded in the app: the student fills in the downloaded file's path)."""
    _, imports, funcs = _parts(section)
    stubs = {name: header + STUB for name, header, _ in funcs}
    if model_path is None:
        pick = ('MODEL = "my-model.pt"  # the file you downloaded from the app (Train page or sidebar)\n'
                "checks.use_model(MODEL)\n")
        where = (f"for **{model_label}**: download it from the app, save it beside this notebook, and put its "
                 "file name in the first code cell")
    else:
        pick = f'checks.use_model("{model_path}")\n'
        where = f"for **{model_label}** (`{model_path}`)"
    cells = [_cell("markdown", f"# Attention Lab exercises — {SECTIONS[section]}\n\n"
                   f"Checks {where}, and on small planted models whose answers are known. Save this notebook in "
                   "the repository's root folder (the checks import `exercises/` and `core/` from there), install "
                   "the requirements (`pip install -r requirements.txt`) and run the cells from the top. Each "
                   "check compares your function with the lab's own computation and says in one sentence what "
                   f"is wrong.\n\n{RATINGS}\n", 0)]
    setup = "from exercises import checks\n\n" + pick + "\n" + "".join(f"{imp}\n" for imp in imports)
    cells.append(_cell("code", setup.rstrip("\n"), 1))
    n = numbered()
    for ex in in_section(section):
        cells.append(_cell("markdown", exercise_markdown(ex, n[ex.name]), len(cells)))
        cells.append(_cell("code", stubs[ex.name].rstrip("\n"), len(cells)))
        cells.append(_cell("code", f'print(checks.check("{ex.name}", {ex.name}))', len(cells)))
    return {"nbformat": 4, "nbformat_minor": 5, "cells": cells, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}}}


def notebook_bytes(section: str, model_path: str | None, model_label: str) -> bytes:
    return json.dumps(notebook(section, model_path, model_label), indent=1, ensure_ascii=False).encode()


if __name__ == "__main__":
    for p in write_templates():
        print(f"wrote {p.relative_to(HERE.parent)}")
