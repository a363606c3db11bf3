"""The bare root opens the Plan page. A root link with parameters is a Memory link (links shared before the Plan page
existed opened Memory at the root), so it opens Memory with every parameter kept, even ones the link got wrong
(their warnings show there)."""

import streamlit as st

from app_pages.shared.state import OPENED_WITH_PARAMS, link_query

query = link_query()
memory = bool(query) or st.session_state.get(OPENED_WITH_PARAMS, False)
st.switch_page("app_pages/memory.py" if memory else "app_pages/plan.py", query_params=query)
