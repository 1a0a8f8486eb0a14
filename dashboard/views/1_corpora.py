"""Corpora: upload files, see what was ingested or skipped, list, delete corpora or single documents,
preview chunks."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitAPIException

from dashboard import forms, state
from dashboard.safe_text import escape
from ragkit.app.uploads import save_uploads
from ragkit.chunkers import chunkers
from ragkit.errors import ConfigError, IngestError
from ragkit.settings import get_settings

st.title("Corpora")

# --- upload --------------------------------------------------------------------------------------
with st.form("ingest", clear_on_submit=False):
    st.subheader("Add files")
    try:
        files = st.file_uploader(
            "Drop files here", accept_multiple_files=True, type=list(get_settings().allowed_types),
            help=f"Up to {get_settings().max_file_mb:g} MB per file (RAGKIT_MAX_FILE_MB).",
        )
    except StreamlitAPIException as error:  # e.g. a NUL byte in a file name: refused, nothing stored
        st.error(f"Upload refused: {escape(error)}. Nothing was stored; reload the page to choose other files.")
        files = []
    name = st.text_input("Corpus name", value="my-corpus",
                         help="New or existing corpus; a file with the same name replaces the old one.")
    submitted = st.form_submit_button("Ingest", type="primary")

if submitted:
    if not files:
        st.warning("Choose at least one file.")
    else:
        bar = st.progress(0.0, text="Saving uploads...")
        try:
            paths = save_uploads(files, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
            report = state.corpus_store().ingest(
                paths, name,
                progress=lambda done, total, doc: bar.progress(done / max(total, 1), text=escape(doc or "done")),
            )
        except (IngestError, ConfigError) as error:
            st.error(escape(error))
        else:
            bar.progress(1.0, text=f"{report.ingested_count} of {len(report.files)} files ingested")
            st.dataframe(
                pd.DataFrame([{"file": f.doc_id, "status": f.status, "documents": f.documents, "reason": f.reason}
                              for f in report.files]),
                hide_index=True,
            )

# --- list & delete -------------------------------------------------------------------------------
st.subheader("Corpora")
table = state.corpora_table()
if table.empty:
    st.info("No corpus yet: upload files above, or run `ragkit ingest FOLDER --corpus NAME`.")
    st.stop()
st.dataframe(table, hide_index=True)

with st.expander("Delete a corpus"):
    doomed = st.selectbox("Corpus to delete", table["name"].tolist(), key="delete_name")
    confirm = st.checkbox(f"Yes, delete '{escape(doomed)}' with its chunk sets and indexes", key="delete_confirm")
    if st.button("Delete", disabled=not confirm, type="secondary"):
        state.corpus_store().delete(doomed)
        st.success(f"Deleted corpus '{escape(doomed)}'.")
        st.rerun()

# --- one corpus's documents ---------------------------------------------------------------------
st.subheader("Documents of a corpus")
listed = st.selectbox("Corpus", table["name"].tolist(), key="docs_corpus")
documents = state.documents_table(listed)
st.dataframe(documents, hide_index=True)
with st.expander("Delete documents"):
    st.caption("The remaining documents make a new version of the corpus, with a new corpus id: runs on the "
               "old version keep their results, and running an experiment again computes new runs.")
    chosen_docs = st.multiselect("Documents to delete", documents["doc_id"].tolist(), key="delete_docs")
    confirm_docs = st.checkbox(f"Yes, delete {len(chosen_docs)} document(s) from '{escape(listed)}'",
                               key="delete_docs_confirm")
    if st.button("Delete documents", disabled=not (chosen_docs and confirm_docs), type="secondary"):
        try:
            new_version = state.corpus_store().delete_documents(listed, chosen_docs)
        except ConfigError as error:  # every document chosen, or one deleted meanwhile elsewhere
            st.error(escape(error))
        else:
            st.success(f"Deleted {len(chosen_docs)} document(s) from '{escape(listed)}': new corpus id "
                       f"{new_version.corpus_id}.")
            st.rerun()

# --- preview -------------------------------------------------------------------------------------
st.subheader("Preview a document and its chunks")
chosen = st.selectbox("Corpus", table["name"].tolist(), key="preview_corpus")
corpus = state.load_corpus(chosen)
doc_ids = [document.id_ for document in corpus.documents]
doc_id = st.selectbox("Document", doc_ids, key="preview_doc")
names = chunkers.names()
chunker = st.selectbox("Chunker", names, index=names.index("recursive") if "recursive" in names else 0)
with st.expander(f"{chunker} parameters"):
    params = forms.params_form(chunkers.params_model(chunker), key=f"preview.{chunker}")

document = corpus.by_id()[doc_id]
left, right = st.columns(2)
with left:
    st.caption(f"{len(document.text):,} characters · metadata: " +
               escape(", ".join(k for k in document.metadata if k not in ("page_starts", "sections"))))
    st.text_area("Document text", document.text[:20_000], height=500, disabled=True)
with right:
    try:
        chunks = state.preview_chunks(chosen, doc_id, chunker, params)
    except Exception as error:  # noqa: BLE001 - a chunker that needs a model, or bad params: show, don't crash
        st.error(f"{chunker}: {escape(error)}")
    else:
        st.caption(f"{len(chunks)} chunks · median {int(chunks['tokens'].median()) if len(chunks) else 0} tokens")
        st.dataframe(chunks, hide_index=True, height=500)
