"""Where the commands on question sets get their documents, LLM and embedder from.

A corpus is named as experiments name it: a dataset folder (or file) shipping ``corpus.jsonl``,
files or a folder to ingest, or the name of a corpus ingested with ``ragkit ingest``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from ragkit.errors import ConfigError


@dataclass(frozen=True)
class CorpusSource:
    name: str
    documents: list[Any]  # LlamaIndex Documents
    corpus_file: Path | None  # the dataset's corpus.jsonl, copied beside a generated set

    def by_id(self) -> dict[str, Any]:
        return {document.id_: document for document in self.documents}


def load_corpus_source(value: str) -> CorpusSource:
    from ragkit.corpus.store import CorpusStore
    from ragkit.questions.corpus import load_dataset_corpus

    path = Path(value).expanduser()
    if path.exists():
        documents = load_dataset_corpus(path)
        if documents is not None:
            corpus_file = (path if path.is_dir() else path.parent) / "corpus.jsonl"
            return CorpusSource(path.resolve().name, documents, corpus_file if corpus_file.is_file() else None)
        store = CorpusStore()
        name = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in path.resolve().name).lstrip(".")[:64]
        report = store.ingest([path], name=name or "corpus")
        if not report.ok:
            raise ConfigError(f"{path}: no file could be ingested")
        return CorpusSource(report.corpus_name, list(store.load(report.corpus_name).documents), None)
    return CorpusSource(value, list(CorpusStore().load(value).documents), None)


def set_documents(set_path: Path, corpus: str | None) -> CorpusSource | None:
    """The documents a question set is checked against: --corpus, else the set's own corpus.jsonl,
    else the ingested corpus its generation record names (a set generated from ``ragkit ingest``)."""
    if corpus:
        return load_corpus_source(corpus)
    from ragkit.questions.corpus import load_dataset_corpus

    documents = load_dataset_corpus(set_path)
    if documents is not None:
        return CorpusSource(set_path.name, documents, None)
    recorded = recorded_corpus(set_path)
    if recorded is None:
        return None
    from ragkit.corpus.store import CorpusStore

    store = CorpusStore()
    if not any(info.name == recorded for info in store.list()):
        return None
    return CorpusSource(recorded, list(store.load(recorded).documents), None)


def recorded_corpus(set_path: Path) -> str | None:
    """The corpus name a generated set's record (generation.json) names, or None."""
    import json

    from ragkit.questions.generation.writer import set_paths

    if set_path.is_file() and set_path.suffix.lower() != ".jsonl":
        return None
    _, record_path = set_paths(set_path)
    try:
        corpus = json.loads(record_path.read_text(encoding="utf-8")).get("corpus")
    except (OSError, ValueError, AttributeError):
        return None
    return corpus if isinstance(corpus, str) and corpus else None


def generation_model(llm: str | None) -> str:
    """The model ``ragkit questions generate --llm LLM`` would run (default: the probed default
    backend), named without loading it."""
    from ragkit.llms import llms, resolve_default_backend
    from ragkit.registry import ComponentSpec

    spec = ComponentSpec(type=llm) if llm else resolve_default_backend()
    try:
        return str(llms.build(spec).model_name)
    except (ConfigError, ValueError) as error:
        return f"{spec.type} ({error})"


def build_llm_client(llm: str | None, model: str | None, url: str | None = None) -> Any:
    """An LLMClient over the named backend (default: Ollama if it answers, else the embedded model),
    caching into the data directory like every other call; ``url`` is a server's base_url."""
    from ragkit.llms import LLMClient, llms, resolve_default_backend
    from ragkit.registry import ComponentSpec
    from ragkit.settings import get_settings

    params = {**({"model": model} if model else {}), **({"base_url": url} if url else {})}
    if url and llm not in ("ollama", "openai"):
        raise ConfigError(f"--llm-url {url!r} needs --llm ollama or --llm openai")
    spec = ComponentSpec(type=llm, params=params) if llm else resolve_default_backend()
    backend = llms.build(spec)
    problem = backend.problem()
    if problem:
        raise ConfigError(f"llm '{spec.type}' cannot run: {problem}")
    return LLMClient.for_data_dir(backend, get_settings().resolved_data_dir())


def minilm_embed() -> Callable[[list[str]], np.ndarray] | None:
    """MiniLM sentence vectors for near-duplicate detection, or None when the model cannot load."""
    try:
        from ragkit.embedders.local import MiniLMEmbedder, MiniLMParams

        embedder = MiniLMEmbedder(MiniLMParams())
        embedder.embed_model()
    except (ImportError, OSError, ValueError):
        return None
    return lambda texts: embedder.embed_texts(texts)


def validated(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """The params model, or a one-line ConfigError naming the bad option and what is valid."""
    try:
        return model.model_validate(values)
    except ValidationError as error:
        item = error.errors()[0]
        field = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"--{field.split('.')[0].replace('_', '-')} {item.get('input')!r}: {message}") from None


def llm_spec(llm: str | None, model: str | None) -> Any:
    """The backend spec ``build_llm_client`` builds for these options (default: Ollama if it
    answers, else the embedded model)."""
    from ragkit.llms import resolve_default_backend
    from ragkit.registry import ComponentSpec

    return ComponentSpec(type=llm, params={"model": model} if model else {}) if llm else resolve_default_backend()
