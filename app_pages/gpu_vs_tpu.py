"""Placeholder."""
import streamlit as st

st.title("gpu_vs_tpu")
st.info("This page is being built.")
