"""A short description of what a corpus is about, written once per corpus and read back after.

The router compares each question with it (heuristic: shared vocabulary; llm: the model reads it).
Two methods:

- ``heuristic``: the document titles plus the corpus' most distinctive words, no LLM. A word's
  weight is the sum over documents of ``log(1 + count in the document) * log(1 + N / df)``, so
  a word that many documents use often ranks high and a word every document uses once does not.
- ``llm``: the model summarises the titles and opening lines of the documents (both capped, to
  fit a small model's context). A reply that cannot be used falls back to the heuristic summary,
  and the file records that (``fell_back``, ``error``, ``raw_reply``).

The summary is stored as JSON under ``cache_dir``, keyed by corpus id, method and model, written
atomically, so concurrent runs share one file and a crash never leaves half of one. A failed call
to the model (an ``LLMError``: a timeout, a server error) is not cached: the fallback is returned
for this run and the next run asks again. An unreachable backend (``BackendUnavailable``) is
raised, as everywhere, so the executor stops instead of blaming the corpus.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragkit.corpus.model import Corpus
from ragkit.errors import LLMError
from ragkit.hashing import content_key
from ragkit.llms.calls import LLMClient
from ragkit.storage.atomic import write_json_atomic
from ragkit.text import content_words

SummaryMethod = Literal["heuristic", "llm"]

# Bump when a method's output changes: older cached summaries are then written again.
SUMMARY_FORMAT = 1
STAGE = "corpus:summary"

TITLES_SHOWN = 40  # heuristic: titles listed; llm: documents shown to the model
DISTINCTIVE_WORDS = 150
OPENING_CHARS = 160  # llm: characters of each document's opening shown
PROMPT_CHARS = 4000  # llm: the whole document listing, cut to fit a small model's context
SUMMARY_MAX_TOKENS = 160


@dataclass(frozen=True)
class CorpusSummary:
    """What the cache file holds. ``fell_back``: the llm method's reply was unusable and ``text``
    is the heuristic summary (``error`` says why)."""

    corpus_id: str
    method: SummaryMethod
    model: str | None
    text: str
    fell_back: bool = False
    error: str | None = None
    raw_reply: str | None = None


class SummaryReply(BaseModel):
    summary: str = Field(min_length=1, description="Two or three sentences on what the documents cover.")


SYSTEM = "You describe a collection of documents. Reply with one JSON object only."


def corpus_summary(corpus: Corpus, cache_dir: Path, method: SummaryMethod,
                   llm: LLMClient | None = None) -> str:
    """The corpus' summary text: read from ``cache_dir`` when written before, else written now."""
    return summarise_corpus(corpus, cache_dir, method, llm).text


def summarise_corpus(corpus: Corpus, cache_dir: Path, method: SummaryMethod,
                     llm: LLMClient | None = None) -> CorpusSummary:
    """``corpus_summary`` with its record (model, fallback, error), for a caller that reports it."""
    if method not in ("heuristic", "llm"):
        raise ValueError(f"corpus summary method must be 'heuristic' or 'llm', got {method!r}")
    if method == "llm" and llm is None:
        raise ValueError("corpus summary method 'llm' needs an LLM client")
    model = f"{llm.backend.name}:{llm.backend.model_name}" if method == "llm" and llm is not None else None
    path = summary_path(cache_dir, corpus.corpus_id, method, model)
    cached = _read(path, corpus.corpus_id, method, model)
    if cached is not None:
        return cached
    if method == "heuristic" or llm is None:
        summary = CorpusSummary(corpus.corpus_id, method, model, heuristic_summary(corpus))
    else:
        summary, cacheable = _llm_summary(corpus, llm, model)
        if not cacheable:
            return summary
    write_json_atomic(path, {"format": SUMMARY_FORMAT, "corpus_name": corpus.name,
                             "documents": len(corpus.documents), **asdict(summary)})
    return summary


def summary_path(cache_dir: Path, corpus_id: str, method: SummaryMethod, model: str | None) -> Path:
    """One file per (corpus, method, model); the model part is hashed to keep names short and safe."""
    return cache_dir / f"{corpus_id}-{method}-{content_key(SUMMARY_FORMAT, model, length=8)}.json"


def _read(path: Path, corpus_id: str, method: SummaryMethod, model: str | None) -> CorpusSummary | None:
    """The cached summary, or None when missing or unreadable (then it is written again)."""
    try:
        entry: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if (entry.get("format"), entry.get("corpus_id"), entry.get("method"), entry.get("model")) != (
            SUMMARY_FORMAT, corpus_id, method, model) or not isinstance(entry.get("text"), str):
        return None
    return CorpusSummary(corpus_id, method, model, entry["text"], bool(entry.get("fell_back")),
                         entry.get("error"), entry.get("raw_reply"))


def heuristic_summary(corpus: Corpus) -> str:
    titles = [_title(document.metadata, document.id_) for document in corpus.documents]
    shown = "; ".join(titles[:TITLES_SHOWN]) + (f"; ... ({len(titles) - TITLES_SHOWN} more)"
                                                 if len(titles) > TITLES_SHOWN else "")
    words = distinctive_words([document.text for document in corpus.documents], DISTINCTIVE_WORDS)
    return (f"{len(titles)} documents in '{corpus.name}'.\nTitles: {shown}\n"
            f"Frequent distinctive words: {', '.join(words)}")


def distinctive_words(texts: list[str], count: int) -> list[str]:
    """The ``count`` heaviest words (weight in the module docstring); ties in alphabetical order."""
    per_document = [Counter(content_words(text)) for text in texts]
    document_frequency = Counter(word for counts in per_document for word in counts)
    total = len(texts)
    weight: dict[str, float] = {}
    for counts in per_document:
        for word, seen in counts.items():
            weight[word] = weight.get(word, 0.0) + math.log1p(seen) * math.log1p(total / document_frequency[word])
    return [word for word, _ in sorted(weight.items(), key=lambda item: (-item[1], item[0]))[:count]]


def build_prompt(corpus: Corpus) -> str:
    lines = []
    for document in corpus.documents[:TITLES_SHOWN]:
        opening = " ".join(document.text.split())[:OPENING_CHARS]
        lines.append(f"- {_title(document.metadata, document.id_)}: {opening}")
    listing = "\n".join(lines)[:PROMPT_CHARS]
    return (f"A collection of {len(corpus.documents)} documents. Titles and opening lines:\n{listing}\n\n"
            "In two or three sentences, what subjects do these documents cover? "
            'Reply as JSON: {"summary": "..."}')


def _llm_summary(corpus: Corpus, llm: LLMClient, model: str | None) -> tuple[CorpusSummary, bool]:
    """The model's summary, or the heuristic one with the reason; the flag says whether to cache it."""
    try:
        result = llm.call(build_prompt(corpus), stage=STAGE, schema=SummaryReply, system=SYSTEM,
                          max_tokens=SUMMARY_MAX_TOKENS)
    except LLMError as error:
        return CorpusSummary(corpus.corpus_id, "llm", model, heuristic_summary(corpus), True, str(error)), False
    text = " ".join(result.parsed.summary.split()) if result.parsed is not None else ""
    if not text:
        error_text = result.parse_error or "empty summary"
        return CorpusSummary(corpus.corpus_id, "llm", model, heuristic_summary(corpus), True, error_text,
                             result.text), True
    return CorpusSummary(corpus.corpus_id, "llm", model, text, raw_reply=result.text), True


def _title(metadata: dict[str, Any], doc_id: str) -> str:
    title = metadata.get("title")
    return " ".join(str(title).split()) if title else doc_id
