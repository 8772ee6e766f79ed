"""Attention Lab: entry point. `streamlit run dashboard.py`

Sets up navigation, the sidebar model picker shared by every page, and the home page.
"""
import streamlit as st

from ui.state import sidebar_picker

st.set_page_config(page_title="Attention Lab", page_icon="🔎", layout="wide")


def home():
    st.title("Attention Lab")
    st.markdown(
        "Train **TinyCharLM**, a tiny attention-only transformer, on your CPU; watch it learn an "
        "induction circuit; then take it apart."
    )


PAGES = [
    st.Page(home, title="Home", icon="🏠", default=True),
    st.Page("pages/train.py", title="Train", icon="🏋️"),
    st.Page("pages/attention.py", title="Attention", icon="👀"),
    st.Page("pages/circuits.py", title="Circuits & ablations", icon="🔌"),
    st.Page("pages/depth.py", title="What depth can express", icon="🧱"),
    st.Page("pages/icl.py", title="In-context learning", icon="🔁"),
    st.Page("pages/archetypes.py", title="Head archetypes & IOI", icon="🧭"),
]

page = st.navigation(PAGES)
sidebar_picker()
page.run()
