"""Export: the selected runs of an experiment as CSV, Parquet, Excel, JSON or an HTML report."""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.safe_text import escape
from dashboard.selection import name_unreadable, pick_results
from ragkit.analysis.export import FORMATS

NAMES = {"csv": "CSV (zip of tables)", "parquet": "Parquet (zip of tables)", "xlsx": "Excel",
         "json": "JSON", "html": "HTML report (offline)"}

st.title("Export")

experiment, results, run_ids = pick_results()
unreadable_notice = st.empty()  # filled at the end, once the page has read its tables
fmt = st.radio("Format", list(FORMATS), format_func=lambda f: NAMES.get(f, f), horizontal=True)
all_runs = len(run_ids) == len(results.runs)
data, file_name, mime = state.view("export", experiment, None if all_runs else run_ids, fmt, experiment)
st.download_button(f"Download {escape(file_name)}", data, file_name=file_name, mime=mime, type="primary")
st.caption(f"{len(run_ids)} runs · {len(data) / 1024:,.1f} KB")
name_unreadable(experiment, unreadable_notice)
