import streamlit as st

st.title("circuits")
st.info("This page is being built.")
