"""A page's "In Python" snippets as one Jupyter notebook (nbformat 4.5), written with the standard
library's json: a title cell, then for each snippet shown, in page order, its explanation and its code."""
from __future__ import annotations

import json

from ui.python_panel import RUN_KEY

KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
          "language_info": {"name": "python"}}


def _lines(text: str) -> list[str]:
    """Notebook `source`: the text split into lines that keep their newline."""
    return text.splitlines(keepends=True)


def _cell(kind: str, text: str, n: int) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{n}", "metadata": {}, "source": _lines(text)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def build(page_title: str, model_label: str, snippets: list[dict]) -> dict:
    """The notebook as a dict: snippets are ui.python_panel records ({"title", "code", ...})."""
    cells = [_cell("markdown", f"# Attention Lab: {page_title}\n\n"
                   f"The computations behind the page's panels, for **{model_label}** and the settings that were "
                   "on screen. Save this notebook in the repository's root folder (each cell loads the model "
                   "from `checkpoints/`), install the requirements (`pip install -r requirements.txt`) and run "
                   "the cells from the top.", 0)]
    seen = set()
    for s in snippets:
        if s["code"] in seen:  # a panel drawn twice in one run adds nothing
            continue
        seen.add(s["code"])
        cells.append(_cell("markdown", s["title"], len(cells)))
        cells.append(_cell("code", s["code"].rstrip("\n"), len(cells)))
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": KERNEL, "cells": cells}


def download_button(page_title: str, url_path: str) -> None:
    """After a page ran: offer its snippets as a notebook (nothing when it showed none)."""
    import streamlit as st

    from ui.state import selected_model

    snippets = st.session_state.get(RUN_KEY) or []
    entry = selected_model()
    if not snippets or entry is None:
        return
    data = json.dumps(build(page_title, entry.label, snippets), indent=1, ensure_ascii=False)
    st.divider()
    st.download_button("📓 Download this page's Python as a notebook (.ipynb)", data.encode(),
                       file_name=f"attention-lab-{url_path or 'home'}.ipynb", mime="application/x-ipynb+json",
                       key="notebook_download", help="Every 🐍 In Python panel of this page, in order, with its "
                       "explanation, for the model and settings on screen.")
