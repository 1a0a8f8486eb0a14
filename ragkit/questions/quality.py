"""A quality report for any question set, generated or imported (``ragkit questions check``).

What makes a set untrustworthy, measured: questions piled on a few documents, one type only,
duplicates, answers that are not where the set says, questions that copy their source's words,
and a set keyword search solves by construction (bm25 ranks the source document first).

- The source of a question is ``Question.source_document`` (first span's document, else its most
  relevant judged document, else ``source_doc``); its source passage is the sentence(s) of its
  first span with one sentence either side, or the whole source document without a span.
- BM25 is ``DocumentBM25``: in-memory Okapi BM25 over whole documents (not chunks, not an
  experiment's index), so the number does not depend on any chunker.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from ragkit.questions.dedup import Embed, find_duplicates
from ragkit.questions.document_bm25 import DocumentBM25
from ragkit.questions.model import Question, QuestionSet
from ragkit.questions.spans import REFUSED_REASON, answers_refused_as_spans, find_answer
from ragkit.questions.wording import passage_around, word_overlap

# Above these, the report warns: written questions overlap their source about 0.1, copied ones 0.5+.
HIGH_OVERLAP = 0.5
KEYWORD_SOLVED = 0.8


class Spread(BaseModel):
    mean: float
    median: float
    minimum: float
    maximum: float


class QualityReport(BaseModel):
    name: str
    questions: int
    documents: int | None = Field(description="Documents in the corpus; None when no corpus was given.")
    questions_per_document: Spread | None
    documents_without_questions: float | None = Field(description="Share of the corpus' documents with no question.")
    types: dict[str, int]
    unanswerable: int
    duplicates: int = Field(description="Questions that repeat an earlier one.")
    duplicate_pairs: list[tuple[str, str, str]] = Field(description="(question id, id it repeats, how), first 20.")
    duplicates_by: str
    answer_checked: int = Field(description="Answerable questions with an answer text to look for.")
    answer_locatable: float | None = Field(description="Share of those whose answer is found where the set says.")
    answers_not_looked_for: int = Field(
        default=0, description=f"Answer parts without a span that are never looked for as one: {REFUSED_REASON} "
                               "(ragkit.questions.spans.locatable_answer).")
    word_overlap: Spread | None = Field(description="Question-to-source-passage content-word overlap.")
    word_overlap_by_type: dict[str, float]
    bm25_checked: int
    bm25_source_first: float | None = Field(description="Share of questions whose source document bm25 ranks first.")
    bm25_source_first_by_type: dict[str, float] = Field(
        default_factory=dict, description="The same per question type (an extractive set's types are its methods).")
    warnings: list[str]


def quality_report(question_set: QuestionSet, documents: Mapping[str, Any] | None = None,
                   embed: Embed | None = None) -> QualityReport:
    """``documents`` maps doc id to a document (with ``.text``); without it, only the set itself
    is measured (no coverage, locatability, overlap or bm25)."""
    questions = question_set.questions
    texts = {doc_id: document.text for doc_id, document in (documents or {}).items()}
    types = Counter(question.question_type or ("unanswerable" if not question.answerable else "unlabelled")
                    for question in questions)
    duplicates = find_duplicates([q.text for q in questions], embed)
    report: dict[str, Any] = {
        "name": question_set.name, "questions": len(questions), "types": dict(types),
        "unanswerable": sum(not q.answerable for q in questions), "duplicates": len(duplicates),
        "duplicate_pairs": [(questions[d.index].id, questions[d.of].id, d.how) for d in duplicates[:20]],
        "duplicates_by": "normalised text and embedding cosine" if embed else "normalised text",
        "documents": len(texts) if documents is not None else None,
        "questions_per_document": None, "documents_without_questions": None,
        "answer_checked": 0, "answer_locatable": None, "word_overlap": None, "word_overlap_by_type": {},
        "answers_not_looked_for": answers_refused_as_spans(question_set),
        "bm25_checked": 0, "bm25_source_first": None, "bm25_source_first_by_type": {},
    }
    if texts:
        report.update(_coverage(questions, texts))
        report.update(_locatable(questions, texts))
        report.update(_overlap(questions, texts))
        report.update(_bm25(questions, texts))
    report["warnings"] = _warnings(report)
    return QualityReport(**report)


def _spread(values: list[float]) -> Spread:
    return Spread(mean=statistics.fmean(values), median=statistics.median(values), minimum=min(values),
                  maximum=max(values))


def _coverage(questions: list[Question], texts: Mapping[str, str]) -> dict[str, Any]:
    counts = Counter(q.source_document for q in questions if q.source_document in texts)
    per_document = [float(counts.get(doc_id, 0)) for doc_id in texts]
    return {"questions_per_document": _spread(per_document),
            "documents_without_questions": sum(count == 0 for count in per_document) / len(per_document)}


def _locatable(questions: list[Question], texts: Mapping[str, str]) -> dict[str, Any]:
    """An answer is locatable when each span reads as an alternative of its part (ignoring case and
    surrounding space), or, without spans, when an answer occurs in a relevant document."""
    checked = found = 0
    for question in questions:
        if not question.answerable or not question.answers:
            continue
        checked += 1
        if question.spans:
            found += all(_span_reads(question, span.doc_id, span.start, span.end, span.group, texts)
                         for span in question.spans)
        else:
            found += any(find_answer(texts[doc], answer) is not None
                         for doc in question.relevant_docs if doc in texts for answer in question.answers)
    return {"answer_checked": checked, "answer_locatable": found / checked if checked else None}


def _span_reads(question: Question, doc_id: str, start: int, end: int, group: int, texts: Mapping[str, str]) -> bool:
    text = texts.get(doc_id)
    if text is None or end > len(text):
        return False
    alternatives = question.answer_parts[group] if question.answer_parts else question.answers
    return text[start:end].strip().casefold() in {answer.strip().casefold() for answer in alternatives}


def source_passage(question: Question, texts: Mapping[str, str]) -> str | None:
    if question.spans and question.spans[0].doc_id in texts:
        span = question.spans[0]
        text = texts[span.doc_id]
        start, end = passage_around(text, span.start, min(span.end, len(text)))
        return text[start:end]
    source = question.source_document
    return texts.get(source) if source else None


def _overlap(questions: list[Question], texts: Mapping[str, str]) -> dict[str, Any]:
    by_type: dict[str, list[float]] = {}
    values = []
    for question in questions:
        passage = source_passage(question, texts)
        if passage is None:
            continue
        value = word_overlap(question.text, passage)
        values.append(value)
        by_type.setdefault(question.question_type or "unlabelled", []).append(value)
    return {"word_overlap": _spread(values) if values else None,
            "word_overlap_by_type": {kind: statistics.fmean(v) for kind, v in by_type.items()}}


def _bm25(questions: list[Question], texts: Mapping[str, str]) -> dict[str, Any]:
    sourced = [q for q in questions if q.answerable and q.source_document in texts]
    if not sourced or len(texts) < 2:
        return {}
    index = DocumentBM25(list(texts), list(texts.values()))
    by_type: dict[str, list[bool]] = {}
    for question in sourced:
        by_type.setdefault(question.question_type or "unlabelled", []).append(
            index.ranks_first(question.text, question.source_document or ""))
    first = sum(sum(hits) for hits in by_type.values())
    return {"bm25_checked": len(sourced), "bm25_source_first": first / len(sourced),
            "bm25_source_first_by_type": {kind: sum(hits) / len(hits) for kind, hits in by_type.items()}}


def _warnings(report: dict[str, Any]) -> list[str]:
    warnings = []
    if report["duplicates"]:
        warnings.append(f"{report['duplicates']} question(s) repeat another one")
    if report["documents_without_questions"] and report["documents_without_questions"] > 0.5:
        warnings.append(f"{report['documents_without_questions']:.0%} of the documents have no question")
    if report["answer_locatable"] is not None and report["answer_locatable"] < 1:
        warnings.append(f"{1 - report['answer_locatable']:.0%} of the answers are not found where the set says")
    overlap = report["word_overlap"]
    if overlap is not None and overlap.mean > HIGH_OVERLAP:
        warnings.append(f"questions copy their source's words (mean overlap {overlap.mean:.2f} > {HIGH_OVERLAP})")
    if report["bm25_source_first"] is not None and report["bm25_source_first"] >= KEYWORD_SOLVED:
        warnings.append(f"keyword search solves this set by construction: bm25 ranks the source document first "
                        f"for {report['bm25_source_first']:.0%} of the questions")
    return warnings


def format_report(report: QualityReport) -> str:
    """The report as readable lines for the terminal."""
    missing = "n/a (no corpus)" if report.documents is None else "n/a"

    def share(value: float | None) -> str:
        return missing if value is None else f"{value:.0%}"

    lines = [f"question set '{report.name}': {report.questions} questions"]
    if report.questions_per_document is not None:
        spread = report.questions_per_document
        lines.append(f"per document ({report.documents} documents): mean {spread.mean:.1f}, median "
                     f"{spread.median:g}, min {spread.minimum:g}, max {spread.maximum:g}; without any: "
                     f"{share(report.documents_without_questions)}")
    lines.append("types: " + ", ".join(f"{kind} {count}" for kind, count in sorted(report.types.items())))
    lines.append(f"duplicates: {report.duplicates} (by {report.duplicates_by})")
    lines.append(f"answer locatable: {share(report.answer_locatable)} of {report.answer_checked}"
                 + (" (no question has an answer text)" if report.documents is not None and not report.answer_checked
                    else ""))
    if report.answers_not_looked_for:
        lines.append(f"answers not located as spans: {report.answers_not_looked_for} ({REFUSED_REASON})")
    if report.word_overlap is not None:
        by_type = ", ".join(f"{kind} {value:.2f}" for kind, value in sorted(report.word_overlap_by_type.items()))
        lines.append(f"word overlap with the source: mean {report.word_overlap.mean:.2f}, median "
                     f"{report.word_overlap.median:.2f} ({by_type})")
    by_type_bm25 = ", ".join(f"{kind} {value:.0%}" for kind, value in sorted(report.bm25_source_first_by_type.items()))
    lines.append(f"bm25 ranks the source document first: {share(report.bm25_source_first)} of "
                 f"{report.bm25_checked} (in-memory BM25 over whole documents)"
                 + (f" ({by_type_bm25})" if len(report.bm25_source_first_by_type) > 1 else ""))
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    return "\n".join(lines) + "\n"
