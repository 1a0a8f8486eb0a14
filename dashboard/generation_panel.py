"""The question-sets page's generation estimate: what `ragkit questions generate` would cost on a
corpus (calls exact, tokens estimated), and the command that runs it. Generation itself is long
LLM work, so the page does not run it inside a rerun; the command does, and its output folder is
imported above like any set."""

from __future__ import annotations

import shlex

import streamlit as st

from dashboard import state
from dashboard.safe_text import escape
from ragkit.registry import ConfigError

BUNDLED = "covidqa_sample (bundled)"


def show() -> None:
    from ragkit.qa.generation import QUESTION_TYPES, GenerationParams, dry_run_counts, plan_generation

    with st.expander("Generate a question set from a corpus", expanded=False):
        corpora = [BUNDLED, *state.corpora_table()["name"].tolist()]
        corpus = st.selectbox("Corpus", corpora, key="gen_corpus")
        n = int(st.number_input("Questions", min_value=1, max_value=100_000, value=200, key="gen_n"))
        types = st.multiselect("Types", list(QUESTION_TYPES), default=list(QUESTION_TYPES), key="gen_types")
        seed = int(st.number_input("Seed", min_value=0, value=0, key="gen_seed"))
        if not st.button("Estimate", key="gen_estimate"):
            return
        try:
            params = GenerationParams(n=n, types=types or list(QUESTION_TYPES), seed=seed)
            if corpus == BUNDLED:
                documents = list(state._dataset_documents(str(state.SAMPLE_QUESTION_SET)).values())
                argument = str(state.SAMPLE_QUESTION_SET)
            else:
                documents = list(state.load_corpus(corpus).documents)
                argument = corpus
            counts = dry_run_counts(plan_generation(documents, params), params)
        except (ConfigError, ValueError) as error:
            st.error(escape(error))
            return
        cols = st.columns(3)
        cols[0].metric("LLM calls", counts["calls"])
        cols[1].metric("Prompt tokens (estimate)", counts["prompt_tokens_estimate"])
        cols[2].metric("Completion tokens (at most)", counts["completion_tokens_max"])
        out = state.question_sets_dir() / "generated" / f"{state.sanitize_name(str(corpus).split(' ')[0])}-{n}"
        command = ["ragkit", "questions", "generate", argument, "--n", str(n), "--types", ",".join(params.types),
                   "--seed", str(seed), "--out", str(out)]
        st.caption("Run it (it can take long on a local model), then import the output folder above:")
        st.code(shlex.join(command), language="bash")
