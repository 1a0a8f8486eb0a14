"""Question sets: import BEIR, SQuAD-style, JSONL or CSV (upload or path), preview and count."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from dashboard import generation_panel, review_panel, state
from dashboard.safe_text import escape
from ragkit.errors import ConfigError
from ragkit.questions import FORMATS, catalogue
from ragkit.questions.interop.report import read_import_report, report_table

if TYPE_CHECKING:
    from streamlit.runtime.uploaded_file_manager import UploadedFile

st.title("Question sets")

# --- import --------------------------------------------------------------------------------------
with st.expander("Import a question set", expanded=False):
    source = st.radio("From", ["Upload", "Path on this machine"], horizontal=True)
    name = st.text_input("Name", value="my-questions")
    format = st.selectbox("Format", FORMATS, help="auto detects BEIR folders, SQuAD JSON/JSONL, plain JSONL and CSV.")
    files: list[UploadedFile] | None
    if source == "Upload":
        files = st.file_uploader(
            "Files", accept_multiple_files=True, type=["jsonl", "json", "csv", "tsv"],
            help="One file (SQuAD JSON/JSONL, JSONL, CSV), or a BEIR set: queries.jsonl, corpus.jsonl "
                 "and the qrels <split>.tsv files.",
        )
        given = None
    else:
        files = None
        given = st.text_input("Path", value="",
                              help="A BEIR folder, a SQuAD-style folder or file, or a JSONL/CSV file.")
    if st.button("Import", type="primary"):
        try:
            if files:
                target = catalogue.save_checked_question_set_uploads(files, name, format)
            elif given:
                target = Path(given).expanduser()
            else:
                raise ConfigError("upload files or give a path")
            loaded = state.load_questions(str(target), format)
            catalogue.register_question_set(name, target, format)
            st.success(f"Imported '{escape(name)}': {len(loaded.questions)} questions ({loaded.format}).")
        except ConfigError as error:
            st.error(escape(error))

generation_panel.show()

# --- list & preview --------------------------------------------------------------------------------
known = catalogue.question_sets()
st.dataframe(pd.DataFrame(list(known.values()), columns=["name", "path", "format"]), hide_index=True)
if not known:
    st.info("No question set yet: import one above.")
    st.stop()

chosen = st.selectbox("Preview", list(known), key="preview_set")
entry = known[chosen]
try:
    questions = state.load_questions(entry["path"], entry["format"])
except ConfigError as error:
    st.error(escape(error))
    st.stop()

cols = st.columns(4)
cols[0].metric("Questions", len(questions.questions))
cols[1].metric("Relevance judgements", questions.count_judgements())
cols[2].metric("Answer spans", questions.count_spans())
cols[3].metric("Format", questions.format)
st.dataframe(
    pd.DataFrame(
        [
            {"id": q.id, "question": q.text, "relevant docs": ", ".join(q.relevant_docs),
             "answer": q.answers[0] if q.answers else "", "spans": len(q.spans), "passages": len(q.passages)}
            for q in questions.questions[:200]
        ]
    ),
    hide_index=True,
)
if len(questions.questions) > 200:
    st.caption(f"First 200 of {len(questions.questions)} questions.")

# --- import report (a set imported from ragas or LlamaIndex) -------------------------------------
imported = read_import_report(entry["path"])
if imported is not None:
    st.subheader("Import report")
    st.caption(f"{imported.format} set {escape(imported.source)} over corpus {escape(imported.corpus)}: each "
               "reference context located in the corpus as text; a located one is a relevant passage.")
    report_cols = st.columns(4)
    report_cols[0].metric("Located share",
                          "n/a" if imported.located_share is None else f"{imported.located_share:.0%}")
    report_cols[1].metric("Without ground truth", len(imported.without_ground_truth()))
    report_cols[2].metric("Contexts located", f"{imported.contexts_located} of {imported.contexts}")
    report_cols[3].metric("Documents", len(imported.per_document))
    st.dataframe(pd.DataFrame([{"status": status, "questions": count} for status, count in imported.totals.items()]),
                 hide_index=True)
    for reason, count in imported.reasons.items():
        st.warning(escape(f"{count} contexts not located: {reason}"))
    st.dataframe(pd.DataFrame(report_table(imported)), hide_index=True)

# --- quality ----------------------------------------------------------------------------------------
st.subheader("Quality")
quality = state.question_quality(entry["path"], entry["format"])
if quality is None:
    st.info("This set ships no corpus.jsonl and its generation.json names no ingested corpus; check it "
            "against a corpus with `ragkit questions check SET --corpus NAME`.")
else:
    quality_cols = st.columns(5)
    quality_cols[0].metric("Documents without questions", f"{quality['documents_without_questions']:.0%}")
    quality_cols[1].metric("Duplicates", quality["duplicates"])
    quality_cols[2].metric("Answer locatable",
                   "n/a" if quality["answer_locatable"] is None else f"{quality['answer_locatable']:.0%}")
    quality_cols[3].metric("Word overlap (mean)",
                   "n/a" if quality["word_overlap"] is None else f"{quality['word_overlap']['mean']:.2f}")
    quality_cols[4].metric("bm25 ranks the source first",
                   "n/a" if quality["bm25_source_first"] is None else f"{quality['bm25_source_first']:.0%}")
    # Per type (an extractive set's types are its methods): lexical bias shows here, e.g. a cloze
    # question copies its sentence, so bm25 finds its source by construction.
    bm25_by_type = quality.get("bm25_source_first_by_type") or {}
    st.dataframe(pd.DataFrame([{"type": kind, "questions": count,
                                "word overlap": quality["word_overlap_by_type"].get(kind),
                                "bm25 ranks the source first": (f"{bm25_by_type[kind]:.0%}" if kind in bm25_by_type
                                                                else "n/a")}
                               for kind, count in quality["types"].items()]),
                 hide_index=True)
    for warning in quality["warnings"]:
        st.warning(escape(warning))

# --- review -----------------------------------------------------------------------------------------
review_panel.show(entry)
