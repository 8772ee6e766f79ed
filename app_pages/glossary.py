"""Glossary: every term the lab's pages link (ui/glossary.py), one entry each with its own anchor; a link from a
page (glossary?term=k-composition) or the picker opens it with that entry on top."""
import streamlit as st

from ui.glossary import GLOSSARY, slug

st.markdown("The lab's terms in one place, in alphabetical order. A term linked on any page opens here, in a new "
            "tab, so the page you came from keeps its models and settings; the sidebar panel *Terms on this page* "
            "gives the same definitions without leaving a page.")
terms = sorted(GLOSSARY, key=str.lower)
by_slug = {slug(t): t for t in terms}
if st.query_params.get("term") in by_slug:  # the address of a link, before the shell rewrites it with the view's
    st.session_state["glossary_pick"] = by_slug[st.query_params["term"]]
wanted = st.selectbox("Go to a term", terms, index=None, key="glossary_pick", placeholder="Type to search the terms")
if wanted:
    st.success(f"**{wanted}**: {GLOSSARY[wanted]}")
for term in terms:
    st.subheader(term, anchor=slug(term))
    st.markdown(GLOSSARY[term])
