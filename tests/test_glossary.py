"""The glossary (ui/glossary.py, app_pages/glossary.py): every term a page links exists, each has its own anchor on
the Glossary page, a link opens it by a relative address (a new tab, Streamlit's rule for markdown links), and the
sidebar lists the terms a page linked with their definitions."""
import ast
from pathlib import Path

import pytest

from ui.glossary import GLOSSARY, link, slug
from ui.pages import ALL_PAGES

from helpers import ROOT, open_app


def linked_terms() -> dict[str, list[str]]:
    """Every link(...) call in app_pages/ and ui/: its first argument -> the files that pass it. A call whose
    term is not a plain string is listed under its source text, so the test below fails on it."""
    out: dict[str, list[str]] = {}
    for path in [*Path(ROOT, "app_pages").glob("*.py"), *Path(ROOT, "ui").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "link" \
                    and node.args and not (isinstance(node.func, ast.Attribute) and node.func.attr != "link"):
                arg = node.args[0]
                term = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
                out.setdefault(term, []).append(path.name)
    return out


def test_every_linked_term_is_defined():
    terms = linked_terms()
    assert len(terms) >= 15  # the pages do link their terms
    missing = {t: files for t, files in terms.items() if t not in GLOSSARY and t != "term"}
    assert not missing, missing  # "term": the parameter inside ui/glossary.py itself


def test_slugs_are_unique_and_links_point_at_them():
    slugs = [slug(t) for t in GLOSSARY]
    assert len(set(slugs)) == len(slugs) and all(slugs)
    assert link("AtP*") == "[AtP*](glossary?term=atp)"
    assert link("K-composition", "keys read") == "[keys read](glossary?term=k-composition)"
    with pytest.raises(KeyError):
        link("K-compositon")
    assert any(p.url_path == "glossary" and p.file == "app_pages/glossary.py" for p in ALL_PAGES)


@pytest.mark.app
def test_glossary_page_and_terms_panel():
    at = open_app("app_pages/glossary.py")
    assert not at.success  # no term asked for: no entry on top
    assert [h.value for h in at.subheader] == sorted(GLOSSARY, key=str.lower)
    assert [h.proto.anchor for h in at.subheader] == [slug(t) for t in sorted(GLOSSARY, key=str.lower)]
    at.selectbox(key="glossary_pick").set_value("K-composition").run()
    assert at.success[0].value == f"**K-composition**: {GLOSSARY['K-composition']}"
    at.switch_page("app_pages/circuits.py").run()
    panel = next(e for e in at.sidebar.expander if e.label.startswith("📖 Terms on this page"))
    text = " ".join(m.value for m in panel.markdown)
    for term in ("QK circuit", "K-composition", "rotary embedding"):
        assert f"**{term}**: {GLOSSARY[term]}" in text
    assert "glossary?term=k-composition" in " ".join(m.value for m in at.markdown)
