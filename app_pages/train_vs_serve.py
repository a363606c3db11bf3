"""Placeholder."""
import streamlit as st

st.title("train_vs_serve")
st.info("This page is being built.")
