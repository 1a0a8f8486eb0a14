"""Where a pool's inputs come from: a results folder's tables and the corpus the runs used."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ragkit.errors import ConfigError
from ragkit.labels.pooling import Pool, PoolParams, build_pool

ALL_RUNS = "*"  # PoolParams.runs == ["*"]: every run of the folder


def corpus_texts(source: str | Path | None, runs: pd.DataFrame) -> dict[str, str] | None:
    """doc_id -> text from a dataset folder's corpus.jsonl or an ingested corpus (default: the
    runs' corpus, when it was ingested); None when neither is found."""
    from ragkit.corpus.store import CorpusStore
    from ragkit.questions import load_dataset_corpus

    if source and Path(source).exists():
        documents = load_dataset_corpus(source)
        if documents is None:
            raise ConfigError(f"--corpus {source}: no corpus.jsonl there; give a dataset folder or a corpus name")
        return {document.id_: document.text for document in documents}
    name = str(source) if source else (str(runs["corpus"].dropna().iloc[0])
                                       if "corpus" in runs and runs["corpus"].notna().any() else None)
    if name is None:
        return None
    try:
        corpus = CorpusStore().load(name)
    except ConfigError:
        if source:
            raise
        return None
    return {document.id_: document.text for document in corpus.documents}


def make_pool(root: str | Path, params: PoolParams, corpus: str | Path | None = None) -> tuple[Pool, bool]:
    """The pool of a results folder's runs (not saved yet); (pool, whether chunk texts were found)."""
    from ragkit.results import ResultStore

    results = ResultStore(root)
    runs = results.read("runs")
    if params.runs == [ALL_RUNS]:
        params = params.model_copy(update={"runs": sorted(runs["run_id"].astype(str))})
    columns = ["run_id", "question_id", "rank", "doc_id", "start_char", "end_char"]
    texts = corpus_texts(corpus, runs)
    pool = build_pool(params, results.read("retrievals", columns=columns, run_ids=params.runs),
                      results.read("questions"), results.read("answers", run_ids=params.runs), texts)
    return pool, texts is not None
