"""LLM GPU Planner (placeholder until the dashboard lands)."""

import streamlit as st

st.set_page_config(page_title="LLM GPU Planner", layout="wide")
st.title("LLM GPU Planner")
st.write("The sizing core is available from the command line: `python -m core estimate scenario.json`.")
