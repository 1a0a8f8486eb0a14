"""The question-sets page's generation section: the method (an LLM, or extractive with no LLM),
the model that will write the questions and what it can do, what `ragkit questions generate`
would cost on a corpus (calls exact, tokens estimated), a button that runs that command as a
background job (ragkit.app.jobs; a rerun never does LLM work itself), the jobs' progress and outcome
(kept of asked, a poor yield as a warning with what to do next), and, once a job is done, its set
registered so it appears in the list and the review below."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import streamlit as st

from dashboard import state
from dashboard.safe_text import escape
from ragkit.corpus.validation import sanitize_name
from ragkit.errors import ConfigError
from ragkit.questions import catalogue

BUNDLED = catalogue.SAMPLE_NAME
DEFAULT_LLM = "default (Ollama if it answers, else the embedded model)"
LLM_CHOICES = [DEFAULT_LLM, "local", "ollama"]
METHOD_CHOICES: dict[str, Literal["llm", "extractive"]] = {"LLM: a model writes each question": "llm",
                  "Extractive: tables, headings, definitions, figures (no LLM)": "extractive"}
REFRESH_S = 2.0


def show() -> None:
    from ragkit.experiments.estimate import llm_seconds
    from ragkit.questions.generation import QUESTION_TYPES, GenerationParams, dry_run_counts, plan_generation
    from ragkit.questions.generation.extractive import plan_extractive
    from ragkit.questions.generation.outcome import model_notice
    from ragkit.questions.generation.sampling import EXTRACTIVE_TYPES
    from ragkit.questions.sources import llm_spec

    with st.expander("Generate a question set from a corpus", expanded=False):
        corpora = [BUNDLED, *state.corpora_table()["name"].tolist()]
        corpus = st.selectbox("Corpus", corpora, key="gen_corpus")
        method = METHOD_CHOICES[st.radio("Method", list(METHOD_CHOICES), key="gen_method", horizontal=True)]
        all_types = list(EXTRACTIVE_TYPES if method == "extractive" else QUESTION_TYPES)
        n = int(st.number_input("Questions", min_value=1, max_value=100_000, value=200, key="gen_n"))
        types = st.multiselect("Types", all_types, default=all_types,
                               key="gen_types" if method == "llm" else "gen_types_extractive")
        seed = int(st.number_input("Seed", min_value=0, value=0, key="gen_seed"))
        llm = DEFAULT_LLM
        if method == "llm":
            llm = st.selectbox("LLM", LLM_CHOICES, key="gen_llm")
            st.info(escape(model_notice("llm", state.generation_model(None if llm == DEFAULT_LLM else llm))))
        else:
            st.caption(escape(model_notice("extractive", None)))
        embeddings = st.checkbox("Also find near-duplicates by embedding (MiniLM)", value=True, key="gen_embeddings")
        argument = str(catalogue.SAMPLE_QUESTION_SET) if corpus == BUNDLED else str(corpus)
        estimate, generate = st.columns([1, 1])
        if estimate.button("Estimate", key="gen_estimate"):
            try:
                params = GenerationParams(n=n, method=method, types=types or all_types, seed=seed)
                if corpus == BUNDLED:
                    documents = list(state.dataset_documents(argument).values())
                else:
                    documents = list(state.load_corpus(corpus).documents)
                if method == "extractive":
                    found = len(plan_extractive(documents, params.n, params.types, params.seed))
                    counts = {"calls": 0, "prompt_tokens_estimate": 0, "completion_tokens_max": 0}
                    st.caption(f"{found} of {n} questions found in the documents' structure.")
                else:
                    counts = dry_run_counts(plan_generation(documents, params), params)
            except (ConfigError, ValueError) as error:
                st.error(escape(error))
            else:
                cols = st.columns(4)
                cols[0].metric("LLM calls", counts["calls"])
                cols[1].metric("Prompt tokens (estimate)", counts["prompt_tokens_estimate"])
                cols[2].metric("Completion tokens (at most)", counts["completion_tokens_max"])
                if method == "llm":
                    spec = llm_spec(None if llm == DEFAULT_LLM else llm, None)
                    seconds, measured = llm_seconds(spec, counts["calls"], state.data_dir())
                    cols[3].metric("Time (estimate)", "unknown" if seconds is None else f"~{seconds:,.0f} s",
                                   help=f"From this machine's seconds per call of {spec.type}: {measured}")
                command = ["ragkit", "questions", "generate", argument, "--method", method, "--n", str(n), "--types",
                           ",".join(params.types), "--seed", str(seed), "--out", "SET_FOLDER"]
                st.caption("The same on the command line:")
                st.code(shlex.join(command), language="bash")
        if generate.button("Generate", key="gen_start", type="primary"):
            stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S}"
            slug = sanitize_name(str(corpus).split(" ")[0])
            out = catalogue.catalogue_dir() / "generated" / f"{slug}-{n}-{stamp}"
            try:
                job = state.job_manager().start_generation(
                    argument, out, n=n, types=types or all_types, seed=seed, method=method,
                    llm=None if llm == DEFAULT_LLM else llm, embeddings=embeddings)
                st.success(f"Started generation job {escape(job.job_id)}; the set appears below when it is done.")
            except ConfigError as error:
                st.error(escape(error))
        _jobs_panel()


@st.fragment(run_every=REFRESH_S)
def _jobs_panel() -> None:
    jobs = [job for job in state.job_manager().list() if job.kind == "questions"]
    if not jobs:
        return
    known = {Path(entry["path"]) for entry in catalogue.question_sets().values()}
    for job in jobs[:5]:
        fraction = job.done / job.total if job.total else 0.0
        st.progress(fraction, text=escape(f"{job.experiment}: {job.state_text()} · {job.done}/{job.total or '?'}"))
        if job.error:
            st.error(escape(job.error))
        elif job.outcome and job.outcome.get("poor"):
            st.warning(escape(f"{job.outcome['summary']}. Next: {job.outcome.get('advice') or 'see the log'}"))
        elif job.state == "failed":
            st.code(job.log_tail or "(no output)", language=None)
        out = Path(job.out_dir)
        if job.state == "done" and out not in known and (out / "questions.jsonl").is_file():
            # Registered once, so the set shows in the list and the review like an imported one.
            catalogue.register_question_set(out.name, out, "squad")
            st.rerun(scope="app")
