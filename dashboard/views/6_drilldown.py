"""Question drill-down: one question, what 2-4 runs retrieved, answered, scored and decided for it, side by side."""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

import streamlit as st

from dashboard import state, traces
from dashboard.safe_text import escape, html_block
from dashboard.selection import name_unreadable, pick_results
from ragkit.analysis.failures import question_verdicts
from ragkit.analysis.ground_truth import MarkedChunk, mark_retrievals
from ragkit.questions import catalogue, resolve_answer_spans

st.title("Question drill-down")

experiment, results, run_ids = pick_results(max_runs=4, default_runs=2)
unreadable_notice = st.empty()  # filled at the end, once the page has read its tables

# Question text and answer spans come from the question set the experiment used.
sets = catalogue.question_sets()
used = state.job_manager().dataset_of(state.results_location(experiment))
options = list(sets)
if used and all(entry["path"] != used for entry in sets.values()):
    sets[used] = {"name": used, "path": used, "format": "auto"}
    options.insert(0, used)
if not options:
    st.info("Import the experiment's question set on the Question sets page to see question texts.")
    st.stop()
run_rows = results.runs.set_index("run_id")
first = run_rows.loc[run_ids[0]]
# Best guess: the dataset of the job that wrote these results, else the set named like the corpus.
default = next((i for i, key in enumerate(options) if sets[key]["path"] == used), None)
if default is None:
    default = next((i for i, key in enumerate(options) if Path(sets[key]["path"]).name == first["corpus"]), 0)
entry = sets[st.selectbox("Question set the experiment used", options, index=default)]
documents = state.documents_for(str(first["corpus"]), str(first["corpus_id"]), entry["path"])
questions = resolve_answer_spans(state.load_questions(entry["path"], entry["format"]), documents).by_id()

retrieved = results.retrievals[results.retrievals["run_id"].isin(run_ids)]
question_ids = list(dict.fromkeys(retrieved["question_id"].dropna().tolist()))
if not question_ids:
    st.info("These runs retrieved nothing yet.")
    name_unreadable(experiment, unreadable_notice)
    st.stop()
question_id = st.selectbox(
    "Question", question_ids, index=state.query_choice("q", question_ids),
    format_func=lambda q: f"{q}: {questions[q].text[:100]}" if q in questions else q,
)
state.set_query(q=question_id)
answers = state.view("question_rows", experiment, run_ids, "answers", question_id)
judgements = state.view("question_rows", experiment, run_ids, "judgements", question_id)
scored = results.scores[results.scores["run_id"].isin(run_ids) & (results.scores["question_id"] == question_id)]
failure_classes = state.view("failure_classes", experiment, run_ids)
question = questions.get(question_id) if question_id is not None else None
if question is None:
    st.warning(f"Question {escape(question_id)} is not in this question set: pick the one the experiment used.")
else:
    st.markdown(f"**{escape(question.text)}**")
    if question.answers:
        st.caption("Answer: " + escape(question.answers[0]) + " · relevant: "
                   + escape(", ".join(question.relevant_docs)))


def breadcrumb(doc_id: str, start: int) -> str:
    sections = sorted((documents[doc_id].metadata.get("sections") or []) if doc_id in documents else [])
    position = bisect_right([s[0] for s in sections], start) - 1
    return str(sections[position][1]) if position >= 0 else ""


def highlighted(chunk: MarkedChunk) -> str:
    """The chunk text as escaped HTML, the answer spans inside it marked."""
    return "".join(f"<mark>{escape(part.text)}</mark>" if part.answer else escape(part.text)
                   for part in chunk.segments)


for column, run_id in zip(st.columns(len(run_ids)), run_ids):
    with column:
        st.markdown(f"**{escape(run_rows.loc[run_id, 'label'])}**")
        traces.show_failure_class(failure_classes, run_id, question_id)
        rows = retrieved[(retrieved["run_id"] == run_id) & (retrieved["question_id"] == question_id)]
        rows = rows.sort_values("rank")
        answer = answers[(answers["run_id"] == run_id) & (answers["question_id"] == question_id)]
        cited: set[str] = set()
        if not answer.empty:
            traces.show_answer(answer.iloc[0], dict(zip(rows["chunk_id"], rows["rank"])))
            cited = set(traces.citations(answer.iloc[0]))
        verdicts = question_verdicts(scored[scored["run_id"] == run_id])
        if not verdicts.empty:
            traces.show_verdicts(verdicts)
        decisions = judgements[(judgements["run_id"] == run_id) & (judgements["question_id"] == question_id)]
        if not decisions.empty:
            st.markdown("**Judge decisions**, in order")
            for judgement in decisions.itertuples():
                traces.show_judgement(judgement)
        per_document = judgements[(judgements["run_id"] == run_id) & judgements["question_id"].isna()]
        if not per_document.empty:
            with st.expander(f"Per-document chunking decisions ({len(per_document)})"):
                for judgement in per_document.itertuples():
                    traces.show_judgement(judgement)
        if not answer.empty or not verdicts.empty or not decisions.empty:
            st.markdown("**Retrieved chunks**")
        for chunk in mark_retrievals(rows, question, documents):
            crumb = breadcrumb(chunk.doc_id, chunk.start_char)
            truth = (" · :green[relevant: answer span]" if chunk.relevant_span
                     else " · :green[relevant: document]" if chunk.relevant_doc else " · :gray[not relevant]")
            st.markdown(
                f"**#{chunk.rank}** · score {chunk.score:.3f} · {escape(chunk.doc_id)}"
                + (f" · {escape(crumb)}" if crumb else "") + truth
                + (" · :blue[cited]" if chunk.chunk_id in cited else "")
            )
            with st.container(height=200):
                st.markdown(html_block(highlighted(chunk) or "(document not found)"), unsafe_allow_html=True)
name_unreadable(experiment, unreadable_notice)
