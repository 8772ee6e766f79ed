import streamlit as st

st.title("archetypes")
st.info("This page is being built.")
