"""The bare root: a link with scenario parameters is a Memory link (links shared before the Plan page opened at the
root), so it opens Memory with every parameter kept."""

import streamlit as st

from app_pages.shared.state import link_query

st.switch_page("app_pages/memory.py", query_params=link_query())
