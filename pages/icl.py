import streamlit as st

st.title("icl")
st.info("This page is being built.")
