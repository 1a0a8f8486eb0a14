"""Question sets to and from other tools: ragas, LlamaIndex, BEIR, TREC qrels.

``export_question_set`` / ``import_question_set`` dispatch on the format name. What each format
cannot hold is said in its module; spans and passages survive ragas and LlamaIndex through their
contexts, not BEIR or TREC (document-level judgements only). An import locates every context in
the corpus as text (``ragkit.questions.passages``) and says what it found (``report``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.questions.interop.beir_trec import read_trec_qrels, write_beir, write_trec_qrels
from ragkit.questions.interop.contexts import imported_questions
from ragkit.questions.interop.llamaindex_format import llamaindex_samples, write_llamaindex
from ragkit.questions.interop.ragas_format import ragas_rows, ragas_samples, write_ragas
from ragkit.questions.interop.report import ImportReport, import_report
from ragkit.questions.model import QuestionSet
from ragkit.questions.passages import MIN_SHARE

EXPORT_FORMATS = ("ragas", "llamaindex", "beir", "trec")
IMPORT_FORMATS = ("ragas", "llamaindex")

__all__ = [
    "EXPORT_FORMATS",
    "IMPORT_FORMATS",
    "ImportReport",
    "ImportResult",
    "export_question_set",
    "import_question_set",
    "ragas_rows",
    "read_trec_qrels",
]


def export_question_set(question_set: QuestionSet, format: str, out: Path,
                        documents: Mapping[str, Any] | None = None) -> str:
    """Write the set in ``format`` to ``out``; returns a one-line summary of what was written."""
    texts = {doc_id: document.text for doc_id, document in (documents or {}).items()}
    count = len(question_set.questions)
    if format in ("ragas", "llamaindex"):
        if not texts and question_set.count_spans():
            raise ConfigError(f"exporting to {format} needs the corpus (--corpus): contexts are document text")
        (write_ragas if format == "ragas" else write_llamaindex)(question_set, texts, out)
        return f"{count} questions written to {out} ({format})"
    if format == "beir":
        left = write_beir(question_set, out, documents)
        return f"{count - left} questions written to {out} (beir)" + (f"; {left} without a relevant document left out"
                                                                     if left else "")
    if format == "trec":
        left = write_trec_qrels(question_set, out)
        return f"{count - left} questions' judgements written to {out} (trec qrels)" + (
            f"; {left} without a relevant document left out" if left else "")
    raise ConfigError(f"unknown export format '{format}'. Valid choices: {', '.join(EXPORT_FORMATS)}.")


@dataclass(frozen=True)
class ImportResult:
    """An imported set and its report (``ragkit.questions.interop.report``)."""

    questions: QuestionSet
    report: ImportReport


def import_question_set(path: Path, format: str, documents: Mapping[str, Any], name: str | None = None,
                        min_share: float = MIN_SHARE, corpus: str = "") -> ImportResult:
    """Read a ragas or LlamaIndex set against the corpus its contexts come from: each context
    located as text (``ragkit.questions.passages``), the outcome in the report. (BEIR folders are read by
    ``load_question_set`` itself.)"""
    texts = {doc_id: document.text for doc_id, document in documents.items()}
    if format not in IMPORT_FORMATS:
        raise ConfigError(f"unknown import format '{format}'. Valid choices: {', '.join(IMPORT_FORMATS)} "
                          "(BEIR folders and squad/jsonl/csv files are read directly)")
    if not path.exists() or (format == "llamaindex" and not path.is_file()):
        raise ConfigError(f"question set not found: {path}")
    samples = ragas_samples(path) if format == "ragas" else llamaindex_samples(path)
    if not samples:
        raise ConfigError(f"no questions found in {path}")
    questions, matches = imported_questions(samples, texts, min_share)
    kept = [question for question in questions if question is not None]
    report = import_report([sample.id for sample in samples], matches, [sample.reference for sample in samples],
                           [question is not None for question in questions], str(path), format, corpus)
    report = report.model_copy(update={"answer_spans": sum(len(question.spans) for question in kept)})
    if not kept:
        raise ConfigError(f"{path}: no question has a located context or a reference answer: nothing to import "
                          f"({'; '.join(f'{r} ({n})' for r, n in list(report.reasons.items())[:3])})")
    question_set = QuestionSet(name=name or path.stem, format=format, questions=kept)
    return ImportResult(question_set, report)
