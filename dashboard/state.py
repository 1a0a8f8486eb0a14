"""The one module that owns caching: thin ``st.cache_*`` wrappers over ragkit, and the
query-parameter helpers that make a comparison a link.

Stores are cached with ``st.cache_resource`` and DataFrames with ``st.cache_data(ttl=...)``.
Every cached function takes the data directory (and whatever else selects its value) as an
argument, so two data directories (two tests, or a changed RAGKIT_DATA_DIR) never share an entry;
a stamp of what it read (``ragkit.storage.folder_stamps``) makes it read again once that changed. Pages
call the plain helpers below, never ``st.cache_*`` themselves. What is cached is computed in
ragkit (uploads, the question-set catalogue, previews, listings: see docs/architecture.md).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from dashboard.safe_text import escape
from ragkit.corpus import listing
from ragkit.corpus.store import CorpusStore
from ragkit.questions import catalogue
from ragkit.settings import get_settings
from ragkit.storage import folder_stamps, folders
from ragkit.storage.folder_stamps import folder_stamp, s3_endpoint
from ragkit.storage.folders import storage_errors

if TYPE_CHECKING:
    from ragkit.app.jobs import JobManager

DATA_TTL_S = 30
# The sidebar probes Ollama on every page: a short timeout, and the answer reused for a while.
PROBE_TIMEOUT_S = 0.3
PROBE_TTL_S = 30
# How long a results prefix on object storage is taken as unchanged (its state is two LISTs).
REMOTE_STAMP_TTL_S = 5


# --- where things live -------------------------------------------------------------------------


def data_dir() -> Path:
    return get_settings().resolved_data_dir()


def results_root() -> Path:
    return get_settings().results_root()


# --- stores (cache_resource) ---------------------------------------------------------------------


@st.cache_resource
def _corpus_store(root: str) -> CorpusStore:
    return CorpusStore(Path(root))


def corpus_store() -> CorpusStore:
    return _corpus_store(str(data_dir()))


@st.cache_resource
def _job_manager(jobs_dir: str) -> JobManager:
    # Imported here, as chunk_preview below: the experiment configs and LlamaIndex they load took
    # seconds of a server's first session on every page, the Compare page's included.
    from ragkit.app.jobs import JobManager

    return JobManager(Path(jobs_dir))


def job_manager() -> JobManager:
    return _job_manager(str(data_dir() / "jobs"))


# --- corpora ---------------------------------------------------------------------------------


@st.cache_data(ttl=DATA_TTL_S)
def _corpora_table(root: str, stamp: float) -> pd.DataFrame:
    return listing.corpora_table(_corpus_store(root).list())


def corpora_table() -> pd.DataFrame:
    root = data_dir()
    return _corpora_table(str(root), folder_stamp(root / "corpora"))


@st.cache_data(ttl=DATA_TTL_S, max_entries=8)
def _documents_table(root: str, name: str, stamp: float) -> pd.DataFrame:
    return listing.documents_table(_corpus_store(root).files(name))


def documents_table(name: str) -> pd.DataFrame:
    """ragkit.corpus.listing.documents_table of one corpus: one row per source file."""
    root = data_dir()
    return _documents_table(str(root), name, folder_stamp(root / "corpora"))


@st.cache_resource(max_entries=4)
def _corpus(root: str, name: str, stamp: float):
    return _corpus_store(root).load(name)


def load_corpus(name: str):
    root = data_dir()
    return _corpus(str(root), name, folder_stamp(root / "corpora"))


@st.cache_data(ttl=DATA_TTL_S, max_entries=32)
def _chunk_preview(root: str, corpus: str, corpus_stamp: float, doc_id: str, chunker: str,
                   params_json: str) -> pd.DataFrame:
    document = _corpus(root, corpus, corpus_stamp).by_id()[doc_id]
    from ragkit.chunkers.preview import chunk_preview

    return chunk_preview(document, chunker, json.loads(params_json))


def preview_chunks(corpus: str, doc_id: str, chunker: str, params: dict[str, Any]) -> pd.DataFrame:
    """ragkit.chunkers.preview.chunk_preview of one document of an ingested corpus."""
    root = data_dir()
    return _chunk_preview(str(root), corpus, folder_stamp(root / "corpora"), doc_id, chunker,
                          json.dumps(params, sort_keys=True))


# --- question sets -----------------------------------------------------------------------------


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _question_set(path: str, format: str, split: str, mtime: float):
    from ragkit.questions import load_question_set

    return load_question_set(path, format=format, split=split)


def _mtime(path: str) -> float:
    target = Path(path)
    return target.stat().st_mtime if target.exists() else 0.0


def load_questions(path: str, format: str = "auto", split: str = "test"):
    return _question_set(path, format, split, _mtime(path))


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _question_quality(path: str, format: str, mtime: float) -> dict[str, Any] | None:
    return catalogue.question_quality(path, format, documents=dataset_documents(path))


def question_quality(path: str, format: str = "auto") -> dict[str, Any] | None:
    """ragkit.questions.catalogue.question_quality of a set, cached until its file changes."""
    return _question_quality(path, format, _mtime(path))


@st.cache_data(ttl=30, show_spinner=False)
def generation_model(llm: str | None) -> str:
    """ragkit.questions.sources.generation_model (the default backend is probed: kept 30 s)."""
    from ragkit.questions.sources import generation_model as name

    return name(llm)


@st.cache_resource(max_entries=4)
def dataset_documents(path: str) -> dict[str, Any]:
    """ragkit.questions.catalogue.dataset_documents, shared by every page and session."""
    return catalogue.dataset_documents(path)


def documents_for(corpus_name: str, corpus_id: str, dataset_path: str | None) -> dict:
    """Documents by id of the corpus a run used: an ingested corpus, else the dataset's own."""
    if any(info.name == corpus_name and info.corpus_id == corpus_id for info in corpus_store().list()):
        return load_corpus(corpus_name).by_id()
    return dataset_documents(dataset_path) if dataset_path else {}


# --- results -------------------------------------------------------------------------------------


def experiments() -> list[str]:
    """Results folders under results_root() that hold at least a runs table, by name; then those
    under RAGKIT_REMOTE_RESULTS, by their s3:// location."""
    remote = get_settings().remote_results
    local = folders.local_results_folders(results_root())
    return local + (_remote_experiments(remote, s3_endpoint()) if remote else [])


@st.cache_data(ttl=DATA_TTL_S, show_spinner=False)
def _remote_experiments(root: str, endpoint: str | None) -> list[str]:
    try:
        return folders.remote_results_folders(root)
    except storage_errors() as error:
        st.warning(f"Results on object storage ({escape(root)}) cannot be listed: {escape(error)}")
        return []


def _stop_on_storage_error(folder: str | Path, read: Any) -> Any:
    """``read()``; for results on object storage, an error reading them stops the page with a
    message naming the location (local folders keep their own errors)."""
    if isinstance(folder, Path):
        return read()
    try:
        return read()
    except storage_errors() as error:
        st.error(f"Results on object storage ({escape(folder)}) cannot be read: {escape(error)}")
        st.stop()


def results_location(experiment: str) -> str | Path:
    """Where an experiment of ``experiments()`` lives: an s3:// location stays itself."""
    return folders.results_location(experiment, results_root())


def unreadable(experiment: str) -> list[str]:
    """ResultStore.unreadable of an experiment (ragkit.results.integrity): the page shows what it could
    read and names the rest."""
    from ragkit.results import ResultStore

    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: ResultStore(folder).unreadable())


# The stamp each results folder was last read at, by folder: a newer one supersedes its Results.
_LAST_STAMPS: dict[str, Any] = {}
_LAST_STAMPS_LOCK = threading.Lock()


def _results_stamp(folder: str | Path) -> Any:
    """The folder's state now. Once a folder has moved on, its Results of the former state (the
    largest entries, lazily read tables) is dropped rather than held until max_entries pushes it out."""
    stamp = (folder_stamps.local_results_stamp(folder) if isinstance(folder, Path)
             else _remote_stamp(folder, s3_endpoint()))
    with _LAST_STAMPS_LOCK:
        former = _LAST_STAMPS.get(str(folder))
        _LAST_STAMPS[str(folder)] = stamp
    if former is not None and former != stamp:
        _results.clear(str(folder), former)
    return stamp


@st.cache_data(ttl=REMOTE_STAMP_TTL_S, show_spinner=False)
def _remote_stamp(location: str, endpoint: str | None) -> tuple:
    # Two LIST requests: reused for a few seconds, as every chart of a render asks.
    return folder_stamps.remote_results_stamp(location)


# Loaded results, views and figures are keyed by the folder's state (its stamp), so an entry stays
# right for as long as its key is asked: none expires (a refresh every 30 s recomputed an unchanged
# folder's views, about 0.8 s of CPU each time, under the GIL every session shares). A changed folder
# is a new key; max_entries bounds what older states leave behind.
@st.cache_resource(max_entries=8)
def _results(folder: str, stamp: Any):
    """Shared, not copied: Results reads its lazy tables once for every page and session."""
    from ragkit.analysis import load_results

    return load_results(folder)


def load_results(experiment: str):
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _results(str(folder), _results_stamp(folder)))


# The selected runs go into a cache key as one string: Streamlit hashes a tuple element by element,
# and with 1,000 runs that was 0.35 s of a 0.45 s warm page run (seven cached calls).
_RUNS_SEPARATOR = "\x1f"


def _runs_key(run_ids: list[str] | None) -> str | None:
    return _RUNS_SEPARATOR.join(run_ids) if run_ids is not None else None


def _run_ids(runs: str | None) -> list[str] | None:
    if runs is None:
        return None
    return runs.split(_RUNS_SEPARATOR) if runs else []


def _args_key(args: tuple) -> tuple:
    """A view's arguments as a cache key: lists (chosen metrics) as tuples, which hash."""
    return tuple(tuple(arg) if isinstance(arg, list) else arg for arg in args)


@st.cache_data(max_entries=64)
def _view(folder: str, stamp: Any, name: str, runs: str | None, args: tuple) -> Any:
    from ragkit.analysis.views import VIEWS

    return VIEWS[name](_results(folder, stamp).subset(_run_ids(runs)), *args)


def view(name: str, experiment: str, run_ids: list[str] | None, *args: Any) -> Any:
    """``ragkit.analysis.views.<name>(results of these runs, *args)``, cached per results folder
    state: the one cached helper every page's tables and charts come through."""
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _view(
        str(folder), _results_stamp(folder), name, _runs_key(run_ids),
        _args_key(args)))


@st.cache_data(max_entries=64)
def _table(folder: str, stamp: Any, table: str, view_name: str, runs: str | None, args: tuple) -> pd.DataFrame:
    from ragkit.analysis import report

    return getattr(report, table)(_view(folder, stamp, view_name, runs, args))


def table(table: str, view_name: str, experiment: str, run_ids: list[str] | None, *args: Any) -> pd.DataFrame:
    """``ragkit.analysis.report.<table>(view(view_name, ...))``: a view as the text table a page shows,
    formatted once per results folder state for every session (a factor table of a 1,000-run grid is
    hundreds of rows formatted cell by cell, which every session's script run repeated)."""
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _table(
        str(folder), _results_stamp(folder), table, view_name, _runs_key(run_ids),
        _args_key(args)))


@st.cache_resource(max_entries=64)
def _chart(folder: str, stamp: Any, chart: str, view_name: str, runs: str | None, args: tuple, options: tuple,
           title: str) -> Any:
    """Shared, not copied: st.plotly_chart only reads the figure (``to_dict``), and no page changes it."""
    from ragkit.analysis import charts

    table, run_ids = _results(folder, stamp).runs, _run_ids(runs)
    selected = table[table["run_id"].isin(run_ids)] if run_ids is not None else table
    figure = getattr(charts, chart)(_view(folder, stamp, view_name, runs, args), selected, **dict(options))
    return figure.update_layout(title=title) if title else figure


def chart(chart: str, view_name: str, experiment: str, run_ids: list[str] | None, *args: Any, title: str = "",
          **options: Any) -> Any:
    """``ragkit.analysis.charts.<chart>(view(view_name, ...), the selected runs, **options)`` titled ``title``:
    built once per results folder state for every session. Building the figures (plotly validates every
    property) was most of a page run once the views were cached: each session rebuilt them."""
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _chart(
        str(folder), _results_stamp(folder), chart, view_name, _runs_key(run_ids),
        _args_key(args), tuple(sorted(options.items())), title))


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _label_tables(folder: str, stamp: Any, labels_stamp: tuple) -> Any:
    from ragkit.labels.tables import label_tables as tables_of
    from ragkit.storage.folders import as_location

    return tables_of(as_location(folder))


def label_tables(experiment: str) -> Any:
    """ragkit.labels.tables.label_tables of an experiment, cached per state of its results and labels."""
    from ragkit.labels.store import SESSIONS_FOLDER, LabelStore

    folder = results_location(experiment)
    files = LabelStore(folder).files
    labels_stamp = tuple((entry.stem, entry.tag) for entry in files.list(SESSIONS_FOLDER, ".parquet"))
    return _stop_on_storage_error(folder, lambda: _label_tables(str(folder), _results_stamp(folder), labels_stamp))


# --- comparison selection (st.query_params) ------------------------------------------------------


def query_choice(key: str, options: list[str], default: str | None = None) -> int | None:
    """Index of the query-param value among ``options`` (for a selectbox's ``index=``)."""
    value = st.query_params.get(key, default)
    if value in options:
        return options.index(value)
    return 0 if options else None


def query_list(key: str, options: list[str], default: list[str]) -> list[str]:
    raw = st.query_params.get(key)
    chosen = [item for item in raw.split(",") if item in options] if raw else []
    return chosen or default


def set_query(**values: str | list[str] | None) -> None:
    for key, value in values.items():
        if value is None or value == [] or value == "":
            st.query_params.pop(key, None)
        else:
            text = ",".join(value) if isinstance(value, list) else str(value)
            if st.query_params.get(key) != text:
                st.query_params[key] = text


# --- sidebar -----------------------------------------------------------------------------------


@st.cache_data(ttl=PROBE_TTL_S)
def _default_llm(ollama_url: str, ollama_model: str) -> tuple[str, str]:
    """(backend, model) that resolve_default_backend picks now; url and model key the cache."""
    from ragkit.llms.base import llms
    from ragkit.llms.defaults import resolve_default_backend

    spec = resolve_default_backend(get_settings(), probe_timeout_s=PROBE_TIMEOUT_S)
    return spec.type, llms.build(spec).model_name


def default_llm() -> tuple[str, str, str, bool]:
    """(backend, model, Ollama URL, whether Ollama answers there): probed at most every PROBE_TTL_S."""
    settings = get_settings()
    backend, model = _default_llm(settings.ollama_url, settings.ollama_model)
    # resolve_default_backend picks ollama exactly when the server answers: one probe tells both.
    return backend, model, settings.ollama_url, backend == "ollama"
