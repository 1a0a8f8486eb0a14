"""A short description of each document, for a router that decides about the document a question
is asked of (the dynamic-documents design summarises the loaded document, not the collection).

Two methods, per document, as the corpus summary (``ragkit.corpus.summary``) has them:

- ``heuristic``: the title plus the document's ``DOCUMENT_WORDS`` most distinctive words against
  the other documents (weight ``log(1 + count) * log(1 + N / df)``, ``ragkit.corpus.profile.domain_tags``).
- ``llm``: the model reads the title and the opening ``OPENING_CHARS`` characters of the document
  and answers ``{"summary": ...}``; a reply that cannot be used keeps that document's heuristic
  summary, recorded (``fell_back``, ``error``).

The summaries are one JSON file per (corpus, method, model) under ``cache_dir`` (written
atomically, shared by concurrent runs). A failed call (``LLMError``) is not written: the next run
asks again; every other reply is, so a document is asked about once per corpus and model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llama_index.core.schema import Document

from ragkit.corpus.model import Corpus
from ragkit.corpus.profile import domain_tags
from ragkit.corpus.summary import SummaryMethod, SummaryReply
from ragkit.errors import LLMError
from ragkit.hashing import content_key
from ragkit.llms.calls import LLMClient
from ragkit.storage.atomic import write_json_atomic

# Bump when a method's output changes: files written before are then written again.
DOCUMENT_SUMMARY_FORMAT = 1
STAGE = "corpus:document_summary"
DOCUMENT_WORDS = 60  # heuristic: distinctive words per document
OPENING_CHARS = 2000  # llm: characters of the document's opening shown
SUMMARY_MAX_TOKENS = 160
SYSTEM = "You describe a document. Reply with one JSON object only."


@dataclass(frozen=True)
class DocumentSummary:
    doc_id: str
    text: str
    fell_back: bool = False  # llm: the reply was unusable and ``text`` is the heuristic summary
    error: str | None = None


def document_summaries(corpus: Corpus, cache_dir: Path, method: SummaryMethod,
                       llm: LLMClient | None = None) -> dict[str, DocumentSummary]:
    """Each document's summary by id: read from ``cache_dir`` when written before, else written now."""
    if method not in ("heuristic", "llm"):
        raise ValueError(f"document summary method must be 'heuristic' or 'llm', got {method!r}")
    if method == "llm" and llm is None:
        raise ValueError("document summary method 'llm' needs an LLM client")
    model = f"{llm.backend.name}:{llm.backend.model_name}" if method == "llm" and llm is not None else None
    path = document_summary_path(cache_dir, corpus.corpus_id, method, model)
    cached = _read(path, corpus.corpus_id, method, model)
    if cached is not None:
        return cached
    documents = list(corpus.documents)
    rules = heuristic_summaries(documents)
    summaries, cacheable = rules, True
    if method == "llm" and llm is not None:
        summaries = []
        for document, fallback in zip(documents, rules):
            summary, answered = llm_summary(document, fallback, llm)
            summaries.append(summary)
            cacheable = cacheable and answered
    if cacheable:
        write_json_atomic(path, {"format": DOCUMENT_SUMMARY_FORMAT, "corpus_id": corpus.corpus_id, "method": method,
                                 "model": model, "documents": [asdict(summary) for summary in summaries]})
    return {summary.doc_id: summary for summary in summaries}


def document_summary_path(cache_dir: Path, corpus_id: str, method: SummaryMethod, model: str | None) -> Path:
    return cache_dir / f"{corpus_id}-documents-{method}-{content_key(DOCUMENT_SUMMARY_FORMAT, model, length=8)}.json"


def _read(path: Path, corpus_id: str, method: SummaryMethod, model: str | None) -> dict[str, DocumentSummary] | None:
    """The cached summaries, or None when missing or unreadable (then they are written again)."""
    try:
        entry: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if (entry.get("format"), entry.get("corpus_id"), entry.get("method"), entry.get("model")) != (
                DOCUMENT_SUMMARY_FORMAT, corpus_id, method, model):
            return None
        summaries = [DocumentSummary(**item) for item in entry["documents"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return {summary.doc_id: summary for summary in summaries}


def _title(document: Document) -> str:
    title = document.metadata.get("title")
    return " ".join(str(title).split()) if title else document.id_


def heuristic_summaries(documents: list[Document]) -> list[DocumentSummary]:
    words = domain_tags([document.text for document in documents], DOCUMENT_WORDS)
    return [DocumentSummary(document.id_, f"'{_title(document)}'. Frequent distinctive words: {', '.join(own)}")
            for document, own in zip(documents, words)]


def build_prompt(document: Document) -> str:
    opening = " ".join(document.text.split())[:OPENING_CHARS]
    return (f"A document titled '{_title(document)}'. Its opening:\n{opening}\n\n"
            "In two or three sentences, what subjects does this document cover? "
            'Reply as JSON: {"summary": "..."}')


def llm_summary(document: Document, fallback: DocumentSummary, llm: LLMClient) -> tuple[DocumentSummary, bool]:
    """The model's summary of ``document``, or ``fallback`` with the reason; the flag is False
    after a failed call (not a reply to remember)."""
    try:
        result = llm.call(build_prompt(document), stage=STAGE, schema=SummaryReply, system=SYSTEM,
                          max_tokens=SUMMARY_MAX_TOKENS)
    except LLMError as error:
        return DocumentSummary(document.id_, fallback.text, True, str(error)), False
    text = " ".join(result.parsed.summary.split()) if result.parsed is not None else ""
    if not text:
        return DocumentSummary(document.id_, fallback.text, True, result.parse_error or "empty summary"), True
    return DocumentSummary(document.id_, text), True
