import streamlit as st

st.title("depth")
st.info("This page is being built.")
