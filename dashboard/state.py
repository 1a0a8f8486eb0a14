"""The one module that owns caching and on-disk dashboard state.

Stores are cached with ``st.cache_resource`` and DataFrames with ``st.cache_data(ttl=...)``.
Every cached function takes the data directory (and whatever else selects its value) as an
argument, so two data directories (two tests, or a changed RAGKIT_DATA_DIR) never share an entry.
Pages call the plain helpers below, never ``st.cache_*`` themselves.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard.safe_text import escape
from ragkit.corpus.store import CorpusStore
from ragkit.corpus.validation import sanitize_name
from ragkit.errors import ConfigError
from ragkit.jobs import JobManager
from ragkit.settings import get_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_QUESTION_SET = REPO_ROOT / "datasets" / "covidqa_sample"
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


def inside(path: Path, root: Path) -> Path:
    """``path`` resolved, refusing anything outside ``root`` (uploads never escape the data dir).

    Resolving follows symbolic links, so a link inside ``root`` that points out is refused too.
    """
    try:
        resolved, root = path.resolve(), root.resolve()
    except (OSError, RuntimeError, ValueError) as error:  # a link loop, a NUL byte in the path
        raise ConfigError(f"{path!r} cannot be resolved: {error}") from None
    if resolved != root and root not in resolved.parents:
        raise ConfigError(f"{path} is outside {root}")
    return resolved


def save_uploads(files: list[Any], *folders: str) -> list[Path]:
    """Write Streamlit UploadedFiles to <data_dir>/uploads/<folders...>/<sanitized name>.

    Files whose names sanitise alike get a "2-", "3-"... prefix rather than overwrite each
    other, and a name that is already a symbolic link is refused, never written through.
    Size limits are checked when the files are ingested (``CorpusStore.ingest``).
    """
    root = data_dir() / "uploads"
    folder = inside(root.joinpath(*(sanitize_name(part) for part in folders)), root)
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    taken: set[str] = set()  # casefolded: on macOS and Windows "A.txt" and "a.txt" are one file
    for uploaded in files:
        name = sanitize_name(uploaded.name)
        copy = 1
        while name.casefold() in taken:
            copy += 1
            name = sanitize_name(f"{copy}-{sanitize_name(uploaded.name)}")
        taken.add(name.casefold())
        target = folder / name  # not the resolved path: a link at this name must not be written through
        inside(target, folder)
        _write_without_following(target, uploaded.getvalue())
        paths.append(target)
    return paths


def _write_without_following(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:  # O_NOFOLLOW: the name is a symbolic link
        raise ConfigError(f"cannot write the upload {path.name}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


# --- stores (cache_resource) ---------------------------------------------------------------------


@st.cache_resource
def _corpus_store(root: str) -> CorpusStore:
    return CorpusStore(Path(root))


def corpus_store() -> CorpusStore:
    return _corpus_store(str(data_dir()))


@st.cache_resource
def _job_manager(jobs_dir: str) -> JobManager:
    return JobManager(Path(jobs_dir))


def job_manager() -> JobManager:
    return _job_manager(str(data_dir() / "jobs"))


# --- corpora ---------------------------------------------------------------------------------


@st.cache_data(ttl=DATA_TTL_S)
def _corpora_table(root: str, stamp: float) -> pd.DataFrame:
    rows = [
        {
            "name": info.name,
            "documents": info.documents,
            "files": info.files,
            "size_mb": round(info.total_bytes / 1024 / 1024, 3),
            "types": ", ".join(f"{kind} ({count})" for kind, count in sorted(info.file_types.items())),
            "created": info.created,
        }
        for info in _corpus_store(root).list()
    ]
    return pd.DataFrame(rows, columns=["name", "documents", "files", "size_mb", "types", "created"])


def _folder_stamp(folder: Path) -> float:
    """Changes whenever a file is added, replaced or removed in ``folder`` (cache key part)."""
    if not folder.exists():
        return 0.0
    return sum(p.stat().st_mtime for p in folder.iterdir()) + len(list(folder.iterdir()))


def corpora_table() -> pd.DataFrame:
    root = data_dir()
    return _corpora_table(str(root), _folder_stamp(root / "corpora"))


@st.cache_resource(max_entries=4)
def _corpus(root: str, name: str, stamp: float):
    return _corpus_store(root).load(name)


def load_corpus(name: str):
    root = data_dir()
    return _corpus(str(root), name, _folder_stamp(root / "corpora"))


@st.cache_data(ttl=DATA_TTL_S, max_entries=32)
def chunk_preview(
    root: str, corpus: str, corpus_stamp: float, doc_id: str, chunker: str, params_json: str
) -> pd.DataFrame:
    """One document's chunks under one chunker: boundaries, breadcrumb, token count, text."""
    from ragkit.chunkers.base import chunkers
    from ragkit.chunkers.token import cl100k_tokenizer

    document = _corpus(root, corpus, corpus_stamp).by_id()[doc_id]
    nodes = chunkers.build({"type": chunker, "params": json.loads(params_json)}).chunk([document])
    tokenizer = cl100k_tokenizer()
    return pd.DataFrame(
        [
            {
                "chunk": node.metadata.get("chunk_index"),
                "start_char": node.metadata.get("start_char"),
                "end_char": node.metadata.get("end_char"),
                "breadcrumb": node.metadata.get("breadcrumb", ""),
                "tokens": len(tokenizer(node.text)),
                "text": node.text,
            }
            for node in nodes
        ]
    )


def preview_chunks(corpus: str, doc_id: str, chunker: str, params: dict[str, Any]) -> pd.DataFrame:
    root = data_dir()
    return chunk_preview(str(root), corpus, _folder_stamp(root / "corpora"), doc_id, chunker,
                         json.dumps(params, sort_keys=True))


# --- question sets -----------------------------------------------------------------------------


def question_sets_dir() -> Path:
    return data_dir() / "question_sets"


def question_sets() -> dict[str, dict[str, str]]:
    """name -> {name, path, format}: the bundled sample first, then what the user imported."""
    known: dict[str, dict[str, str]] = {}
    if SAMPLE_QUESTION_SET.exists():
        known["covidqa_sample (bundled)"] = {
            "name": "covidqa_sample (bundled)", "path": str(SAMPLE_QUESTION_SET), "format": "squad",
        }
    folder = question_sets_dir()
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            known[str(entry["name"])] = {"name": str(entry["name"]), "path": str(entry["path"]),
                                         "format": str(entry.get("format", "auto"))}
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a hand-edited, broken entry is left out rather than breaking the page
    return known


def register_question_set(name: str, path: Path, format: str) -> dict[str, str]:
    folder = question_sets_dir()
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"name": name, "path": str(Path(path).resolve()), "format": format}
    target = inside(folder / f"{sanitize_name(name)}.json", folder)
    target.write_text(json.dumps(entry, indent=2), encoding="utf-8")
    return entry


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _question_set(path: str, format: str, split: str, mtime: float):
    from ragkit.qa import load_question_set

    return load_question_set(path, format=format, split=split)


def load_questions(path: str, format: str = "auto", split: str = "test"):
    target = Path(path)
    mtime = target.stat().st_mtime if target.exists() else 0.0
    return _question_set(path, format, split, mtime)


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _question_quality(path: str, format: str, mtime: float) -> dict[str, Any] | None:
    from ragkit.qa import load_question_set
    from ragkit.qa.quality import quality_report

    documents = _dataset_documents(path)
    if not documents:
        return None
    return quality_report(load_question_set(path, format=format), documents).model_dump(mode="json")


def question_quality(path: str, format: str = "auto") -> dict[str, Any] | None:
    """The quality report of a set against its own corpus.jsonl (None when it ships none)."""
    target = Path(path)
    return _question_quality(path, format, target.stat().st_mtime if target.exists() else 0.0)


@st.cache_resource(max_entries=4)
def _dataset_documents(path: str):
    from ragkit.qa import load_dataset_corpus

    documents = load_dataset_corpus(path)
    return {d.id_: d for d in documents} if documents else {}


def documents_for(corpus_name: str, corpus_id: str, dataset_path: str | None) -> dict:
    """Documents by id of the corpus a run used: an ingested corpus, else the dataset's own."""
    store = corpus_store()
    if any(info.name == corpus_name and info.corpus_id == corpus_id for info in store.list()):
        return load_corpus(corpus_name).by_id()
    return _dataset_documents(dataset_path) if dataset_path else {}


# --- results -------------------------------------------------------------------------------------


def experiments() -> list[str]:
    """Results folders under results_root() that hold at least a runs table, by name; then those
    under RAGKIT_REMOTE_RESULTS, by their s3:// location."""
    root = results_root()
    local = sorted(p.name for p in root.iterdir() if (p / "runs").is_dir()) if root.exists() else []
    remote = get_settings().remote_results
    return local + (_remote_experiments(remote, _s3_endpoint()) if remote else [])


def _s3_endpoint() -> str | None:
    # A cache key part: the same s3:// location on another server is other data.
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


@st.cache_data(ttl=DATA_TTL_S, show_spinner=False)
def _remote_experiments(root: str, endpoint: str | None) -> list[str]:
    from ragkit.folders import remote_results_folders

    try:
        return remote_results_folders(root)
    except _storage_errors() as error:
        st.warning(f"Results on object storage ({escape(root)}) cannot be listed: {escape(error)}")
        return []


def _storage_errors() -> tuple[type[Exception], ...]:
    """What reading object storage raises when it is unreachable or refuses: a user's problem to
    show, not a traceback. pyarrow's S3 filesystem raises OSError."""
    errors: tuple[type[Exception], ...] = (ConfigError, OSError)  # no s3 extra: ObjectFolder says which
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors += (BotoCoreError, ClientError)  # no endpoint, no credentials, no such bucket
    except ImportError:
        pass
    return errors


def _stop_on_storage_error(folder: str | Path, read: Any) -> Any:
    """``read()``; for results on object storage, an error reading them stops the page with a
    message naming the location (local folders keep their own errors)."""
    if isinstance(folder, Path):
        return read()
    try:
        return read()
    except _storage_errors() as error:
        st.error(f"Results on object storage ({escape(folder)}) cannot be read: {escape(error)}")
        st.stop()


def unreadable(experiment: str) -> list[str]:
    """One line per file of the experiment's results that this process's reads could not use
    (ragkit.integrity): the page shows what it could read and names the rest."""
    from ragkit.results import ResultStore

    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: ResultStore(folder).unreadable())


def results_location(experiment: str) -> str | Path:
    """Where an experiment of ``experiments()`` lives: an s3:// location stays itself."""
    from ragkit.folders import is_remote

    return experiment if is_remote(experiment) else results_root() / experiment


# A folder whose modification time is older than this is stamped by that time alone.
QUIET_FOLDER_S = 2.0


def _entries_stamp(folder: Path) -> tuple:
    """Changes whenever a file is added, replaced or removed directly in ``folder``. Results files
    are written by a rename into their folder (ragkit.atomic), which sets the folder's modification
    time: one stat, where stamping every file took 0.3 s per page at a thousand runs. The time
    advances in clock ticks, so two writes within one tick leave it unchanged: while the folder
    changed in the last QUIET_FOLDER_S, every file's time is added (``_folder_stamp``)."""
    try:
        changed = folder.stat().st_mtime_ns
    except FileNotFoundError:
        return (0,)
    if time.time() - changed / 1e9 > QUIET_FOLDER_S:
        return (changed,)
    return (changed, _folder_stamp(folder))


def _results_stamp(folder: str | Path) -> Any:
    if isinstance(folder, Path):
        return _entries_stamp(folder / "_commits") + _entries_stamp(folder / "runs")
    return _remote_stamp(folder, _s3_endpoint())


@st.cache_data(ttl=REMOTE_STAMP_TTL_S, show_spinner=False)
def _remote_stamp(location: str, endpoint: str | None) -> tuple:
    # Two LIST requests: reused for a few seconds, as every chart of a render asks.
    from ragkit.folders import folder_state

    return endpoint, folder_state(location, "_commits", "runs")


@st.cache_resource(ttl=DATA_TTL_S, max_entries=8)
def _results(folder: str, stamp: Any):
    """Shared, not copied: Results reads its lazy tables once for every page and session."""
    from ragkit.analysis import load_results

    return load_results(folder)


def load_results(experiment: str):
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _results(str(folder), _results_stamp(folder)))


@st.cache_data(ttl=DATA_TTL_S, max_entries=64)
def _view(folder: str, stamp: Any, name: str, run_ids: tuple[str, ...] | None, args: tuple) -> Any:
    from ragkit.analysis.views import VIEWS

    return VIEWS[name](_results(folder, stamp).subset(list(run_ids) if run_ids is not None else None), *args)


def view(name: str, experiment: str, run_ids: list[str] | None, *args: Any) -> Any:
    """``ragkit.analysis.views.<name>(results of these runs, *args)``, cached per results folder
    state: the one cached helper every page's tables and charts come through."""
    folder = results_location(experiment)
    return _stop_on_storage_error(folder, lambda: _view(
        str(folder), _results_stamp(folder), name, tuple(run_ids) if run_ids is not None else None,
        tuple(tuple(arg) if isinstance(arg, list) else arg for arg in args)))


@st.cache_data(ttl=DATA_TTL_S, max_entries=16)
def _label_tables(folder: str, stamp: Any, labels_stamp: tuple) -> Any:
    from ragkit.folders import as_location
    from ragkit.labels.tables import label_tables as tables_of

    return tables_of(as_location(folder))


def label_tables(experiment: str) -> Any:
    """ragkit.labels.tables.label_tables of an experiment, cached per state of its results and labels."""
    from ragkit.labels.store import SESSIONS_FOLDER, LabelStore

    folder = results_location(experiment)
    files = LabelStore(folder).files
    labels_stamp = tuple((entry.stem, entry.tag) for entry in files.list(SESSIONS_FOLDER, ".parquet"))
    return _stop_on_storage_error(folder, lambda: _label_tables(str(folder), _results_stamp(folder), labels_stamp))


def dataset_of(out_dir: str | Path) -> str | None:
    """The dataset path of the job that wrote ``out_dir``, when a dashboard job did (dashboard
    jobs write local folders only)."""
    import yaml

    if not isinstance(out_dir, Path):
        return None
    target = Path(out_dir).resolve()
    manager = job_manager()
    for folder in sorted(manager.jobs_dir.iterdir()) if manager.jobs_dir.exists() else []:
        try:
            job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
            if Path(job["out_dir"]).resolve() == target:
                config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
                return str(config["dataset"]["path"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


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
