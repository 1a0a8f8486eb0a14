"""The bare Streamlit page bench_dashboard_load.py times beside the Compare page: a title and a
small table, nothing of ragkit, served by the same Streamlit with the same server flags. What a
session costs here is the floor Streamlit and the browser set on the machine: no page can draw
its first table faster, nor share the cores better among sessions.

The table has the shape of the quickstart's factor table (a dozen rows, a dozen columns of
numbers and names), so the browser draws the same kind of grid.
"""

import numpy as np
import pandas as pd
import streamlit as st

ROWS, NUMBERS = 12, 9

st.title("A bare Streamlit page")
values = np.random.default_rng(0).normal(size=(ROWS, NUMBERS)).round(4)
table = pd.DataFrame(values, columns=[f"number {i}" for i in range(NUMBERS)])
table.insert(0, "level", [f"level {i}" for i in range(ROWS)])
table.insert(0, "factor", ["chunker", "retriever", "top_k"] * (ROWS // 3))
st.dataframe(table, hide_index=True)
