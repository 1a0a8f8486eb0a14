"""ragkit dashboard entry point: page config, sidebar, navigation over dashboard/views/ (not
"pages/": Streamlit would also serve that folder as legacy pages, bypassing this entry point).

Run it with the server settings on the command line (no config file needed):

    streamlit run dashboard/app.py --server.address 127.0.0.1 --server.port 8501 \
        --server.maxUploadSize $RAGKIT_MAX_FILE_MB

With RAGKIT_DASHBOARD_TOKEN set (`ragkit dashboard --allow-remote` sets it), every session must give
that token before anything renders (dashboard/auth.py).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import auth, state

PAGES = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="ragkit", page_icon=":material/science:", layout="wide")
# Before anything that shows server paths or reaches a page: with a token configured, nothing else renders.
auth.require_token()

with st.sidebar:
    st.markdown("**ragkit**")
    st.caption(f"Data directory: `{state.data_dir()}`")
    st.caption("Embedder: MiniLM (all-MiniLM-L6-v2, bundled)")
    backend, model, ollama_url, ollama_up = state.default_llm()
    st.caption(f"LLM backend (auto): {backend} · {model}")
    st.caption(f"Ollama: {'answers' if ollama_up else 'not reachable'} at {ollama_url}")

navigation = st.navigation(
    [
        st.Page(PAGES / "1_corpora.py", title="Corpora", icon=":material/folder:", default=True),
        st.Page(PAGES / "2_question_sets.py", title="Question sets", icon=":material/quiz:"),
        st.Page(PAGES / "3_new_experiment.py", title="New experiment", icon=":material/tune:"),
        st.Page(PAGES / "4_runs.py", title="Runs", icon=":material/play_circle:"),
        st.Page(PAGES / "5_compare.py", title="Compare", icon=":material/bar_chart:"),
        st.Page(PAGES / "6_drilldown.py", title="Question drill-down", icon=":material/search:"),
        st.Page(PAGES / "7_export.py", title="Export", icon=":material/download:"),
        st.Page(PAGES / "8_labels.py", title="Label", icon=":material/label:"),
    ]
)
navigation.run()
