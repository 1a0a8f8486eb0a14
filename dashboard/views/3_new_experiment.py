"""New experiment: pick data, tick component variants, fill generated forms, see the grid, run it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import forms, state
from ragkit import registry
from ragkit.experiments.config import config_from_dict, config_to_yaml, expand_grid
from ragkit.registry import ConfigError

# Ticked when the page opens: a grid that runs offline with the bundled embedder.
DEFAULTS = {"chunkers": ("recursive",), "embedders": ("minilm",), "retrievers": ("dense",)}
KINDS = {"chunkers": registry.chunkers, "embedders": registry.embedders, "retrievers": registry.retrievers}
TOP_K_CHOICES = [1, 3, 5, 10, 20, 50, 100]

st.title("New experiment")

# --- data ----------------------------------------------------------------------------------------
name = st.text_input("Experiment name", value="experiment", help="Also the results folder name.")
sets = state.question_sets()
if not sets:
    st.info("No question set yet: import one on the Question sets page.")
    st.stop()
left, right = st.columns(2)
question_set = left.selectbox("Question set", list(sets), help="The bundled COVID-QA sample is always offered.")
limit = left.number_input("Use only the first N questions", min_value=1, value=None, placeholder="all",
                          help="Leave empty to use every question.")
own = "(the question set's own corpus.jsonl)"
corpus = right.selectbox("Corpus", [own, *state.corpora_table()["name"].tolist()],
                         help="An ingested corpus, or the documents shipped with the question set.")
top_k = right.multiselect("top-k values", TOP_K_CHOICES, default=[5, 10], help="Each value is a point of the grid.")

# --- components ----------------------------------------------------------------------------------
specs: dict[str, list[dict]] = {}
for column, (kind, reg) in zip(st.columns(3), KINDS.items()):
    with column:
        st.subheader(kind.capitalize())
        specs[kind] = []
        for component in reg.names():
            if not st.checkbox(component, value=component in DEFAULTS[kind], key=f"use.{kind}.{component}"):
                continue
            model = reg.params_model(component)
            # top_k is a grid axis of its own, set above for every retriever.
            fields = [f for f in model.model_fields if f != "top_k"]
            if fields:
                with st.expander(f"{component} parameters"):
                    params = forms.params_form(model, key=f"params.{kind}.{component}", exclude=("top_k",))
            else:
                params = {}
            specs[kind].append({"type": component, "params": params})

# --- grid & YAML ---------------------------------------------------------------------------------
entry = sets[question_set]
data = {
    "name": name,
    "dataset": {"path": str(Path(entry["path"]).resolve()), "format": entry["format"],
                **({"limit": int(limit)} if limit else {})},
    **({"corpus": {"name": corpus}} if corpus != own else {}),
    **specs,
    "top_k": sorted(top_k),
}
try:
    config = config_from_dict(data, source="experiment form")
    grid = expand_grid(config)
except ConfigError as error:
    st.error(str(error))
    st.stop()

st.metric("Runs in the grid", len(grid))
yaml_text = config_to_yaml(config)
with st.expander("Experiment YAML (what `ragkit run` takes)"):
    st.code(yaml_text, language="yaml")
st.download_button("Download YAML", yaml_text, file_name=f"{name}.yaml", mime="application/x-yaml")

if st.button("Run", type="primary"):
    try:
        job = state.job_manager().start(config)
    except ConfigError as error:
        st.error(str(error))
    else:
        st.success(f"Started job {job.job_id}: follow it on the Runs page. Results go to {job.out_dir}.")
