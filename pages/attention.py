import streamlit as st

st.title("attention")
st.info("This page is being built.")
