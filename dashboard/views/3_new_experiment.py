"""New experiment: pick data, tick component variants, toggle judges, fill generated forms, see the grid, run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import forms, state
from dashboard.safe_text import escape
from ragkit.chunkers import chunkers
from ragkit.embedders.base import embedders
from ragkit.errors import ConfigError
from ragkit.experiments.config import GENERATOR, MODE_ORDER, config_from_dict, config_to_yaml, expand_grid, judge_names
from ragkit.experiments.estimate import dry_run, format_estimate
from ragkit.experiments.runner import EXECUTORS
from ragkit.questions import catalogue
from ragkit.questions.review import review_state
from ragkit.registry import Registry
from ragkit.retrievers import retrievers
from ragkit.stages.base import STAGES
from ragkit.stages.catalogue import stage_groups

# Ticked when the page opens: a grid that runs offline with the bundled embedder.
DEFAULTS = {"chunkers": ("recursive",), "embedders": ("minilm",), "retrievers": ("dense",)}
KINDS: dict[str, Registry[Any]] = {
    "chunkers": chunkers, "embedders": embedders, "retrievers": retrievers,
}
TOP_K_CHOICES = [1, 3, 5, 10, 20, 50, 100]

st.title("New experiment")

# --- data ----------------------------------------------------------------------------------------
name = st.text_input("Experiment name", value="experiment", help="Also the results folder name.")
sets = catalogue.question_sets()
if not sets:
    st.info("No question set yet: import one on the Question sets page.")
    st.stop()
left, right = st.columns(2)
question_set = left.selectbox("Question set", list(sets), help="The bundled COVID-QA sample is always offered.")
limit = left.number_input("Use only the first N questions", min_value=1, value=None, placeholder="all",
                          help="Leave empty to use every question.")
own = "(the question set's own corpus.jsonl)"
ingested = state.corpora_table()["name"].tolist()
# The set's own corpus by default: the one its questions were generated from, else its corpus.jsonl.
source_corpus = catalogue.generated_from(sets[question_set]["path"])
corpus = right.selectbox("Corpus", [own, *ingested], index=1 + ingested.index(source_corpus)
                         if source_corpus in ingested else 0, key=f"corpus.{question_set}",
                         help="An ingested corpus, or the documents shipped with the question set. Defaults to the "
                              "set's own: the corpus it was generated from, else its corpus.jsonl.")
if source_corpus is not None and source_corpus not in ingested:
    st.warning(f"This set was generated from the corpus '{escape(source_corpus)}', which is not ingested here: "
               "choose the corpus its documents are in.")
reviewed = review_state(Path(sets[question_set]["path"]))
if reviewed is not None:
    left.caption(f"Review: {reviewed.summary}.")
    if reviewed.warning:
        st.warning(escape(reviewed.warning))
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

# --- judges, answers, LLM -------------------------------------------------------------------------
st.subheader("Judges")
st.caption("Each mode chosen is a grid point of its own: \"both\" runs the judge off and on, so the results pair them. "
           "Listed by role, in the order the pipeline runs them.")
judge_choices: dict[str, dict] = {}
for group in stage_groups(judge_names()):
    st.markdown(f"**{group.title}**")
    judge_columns = st.columns(2)
    for position, stage in enumerate(group.stages):
        with judge_columns[position % 2]:
            choice = forms.judge_choice(stage.name, key=f"judges.{stage.name}")
            if choice is not None:
                judge_choices[stage.name] = choice

st.subheader("Answers and LLM")
left, right = st.columns(2)
with left:
    generate = st.checkbox(
        "Generate answers", key="generator.on",
        help="Answer every question from the retrieved chunks, with citations (needed by groundedness).",
    )
    if generate:
        with st.expander("generator parameters"):
            generator_params = forms.params_form(STAGES.params_model(GENERATOR), key="generator.params",
                                                 exclude=("mode",))
with right:
    llm_default = forms.llm_backend_choice(key="llm.default")

# --- grid & YAML ---------------------------------------------------------------------------------
entry = sets[question_set]
data = {
    "name": name,
    "dataset": {"path": str(Path(entry["path"]).resolve()), "format": entry["format"],
                **({"limit": int(limit)} if limit else {})},
    **({"corpus": {"name": corpus}} if corpus != own else {}),
    **specs,
    "top_k": sorted(top_k),
    **({"judges": judge_choices} if judge_choices else {}),
    **({"generator": {"params": generator_params}} if generate else {}),
    **({"llm": {"default": llm_default}} if llm_default else {}),
}
try:
    config = config_from_dict(data, source="experiment form")
    grid = expand_grid(config)
except ConfigError as error:
    st.error(escape(str(error)))
    st.stop()

st.metric("Runs in the grid", len(grid))
used_modes = {(spec.type, spec.params["mode"]) for point in grid for spec in point.judges}
judge_modes = {judge: [mode for mode in MODE_ORDER if (judge, mode) in used_modes] for judge in judge_choices}
if judge_modes:
    described = [f"{judge} ({', '.join(modes)})" for judge, modes in judge_modes.items()]
    st.caption("Judge modes in the grid: " + " \N{MULTIPLICATION SIGN} ".join(described))
yaml_text = config_to_yaml(config)
with st.expander("Experiment YAML (what `ragkit run` takes)"):
    st.code(yaml_text, language="yaml")
st.download_button("Download YAML", yaml_text, file_name=f"{name}.yaml", mime="application/x-yaml")

if st.button("Estimate (dry run)", help="What the run would build, embed and call, and how long that took on this "
             "machine so far; nothing is computed. The same as `ragkit run X.yaml --dry-run`."):
    try:
        st.code(format_estimate(dry_run(config, state.results_root() / config.name)), language=None)
    except ConfigError as error:
        st.error(escape(str(error)))

executor = st.radio("Execute on", EXECUTORS, horizontal=True, key="executor",
                    help="local: in one background process. ray: chunk sets, indexes and question shards as Ray "
                         "tasks on a local Ray (needs the ray extra); the tables are the same.")
if st.button("Run", type="primary"):
    try:
        job = state.job_manager().start(config, executor=executor)
    except ConfigError as error:
        st.error(escape(str(error)))
    else:
        st.success(f"Started job {job.job_id}: follow it on the Runs page. Results go to {escape(str(job.out_dir))}.")
