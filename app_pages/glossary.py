"""Glossary: every term the lab's pages link (ui/glossary.py), one entry each with its own anchor; a link from a
page (glossary?term=k-composition) opens it with that entry on top."""
import streamlit as st

from ui.glossary import GLOSSARY, slug

st.markdown("The lab's terms in one place, in alphabetical order. A term linked on any page opens here, in a new "
            "tab, so the page you came from keeps its models and settings; the sidebar panel *Terms on this page* "
            "gives the same definitions without leaving a page.")
by_slug = {slug(t): t for t in GLOSSARY}
if st.query_params.get("term") in by_slug:  # the address of a link, before the shell rewrites it with the view's
    st.session_state["glossary_term"] = st.query_params["term"]
wanted = by_slug.get(st.session_state.get("glossary_term", ""))
if wanted:
    st.success(f"**{wanted}**: {GLOSSARY[wanted]}")
query = st.text_input("Find a term", key="glossary_find", placeholder="e.g. composition, patching, loss")
words = query.lower().split()
shown = [t for t in sorted(GLOSSARY, key=str.lower)
         if all(w in t.lower() or w in GLOSSARY[t].lower() for w in words)]
if not shown:
    st.info(f"No term or definition mentions “{query}”.")
for term in shown:
    st.subheader(term, anchor=slug(term))
    st.markdown(GLOSSARY[term])
