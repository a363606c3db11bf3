"""Placeholder."""
import streamlit as st

st.title("inference")
st.info("This page is being built.")
