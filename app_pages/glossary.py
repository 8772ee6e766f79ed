"""Glossary: every term the lab's pages link (ui/glossary.py), one entry each, with an anchor per term so a
link can point at it (glossary#k-composition)."""
import streamlit as st

from ui.glossary import GLOSSARY, slug

st.markdown("The lab's terms in one place, in alphabetical order. A term linked on any page opens here, in a new "
            "tab, so the page you came from keeps its models and settings; the sidebar panel *Terms on this page* "
            "gives the same definitions without leaving a page.")
query = st.text_input("Find a term", key="glossary_find", placeholder="e.g. composition, patching, loss")
words = query.lower().split()
shown = [t for t in sorted(GLOSSARY, key=str.lower)
         if all(w in t.lower() or w in GLOSSARY[t].lower() for w in words)]
if not shown:
    st.info(f"No term or definition mentions “{query}”.")
for term in shown:
    st.subheader(term, anchor=slug(term))
    st.markdown(GLOSSARY[term])
