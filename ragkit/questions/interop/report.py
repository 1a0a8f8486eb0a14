"""What an import of another tool's question set found: per question and in total.

Per question: its contexts, how many were located, the best match score, the documents, and the
reason when one was not. A question is **located** when every context is, **partly located** when
some are (both have ground truth: relevant documents and passages), **not located** when none is
(no ground truth: kept for its reference answer, or left out without one, ``left_out``), and
**unanswerable** when it has neither a context nor a reference answer (the right answer is to
abstain). The totals add up to the questions; the located share is
(located + partly located) / (questions - unanswerable).

The report is printed, written beside the set (``import_report.json``, or
``<stem>.import_report.json`` beside a ``.jsonl`` set) and shown on the Question sets page.
``check_located`` refuses a share below the minimum, naming the three most common reasons.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragkit.errors import ConfigError
from ragkit.questions.passages import ContextMatch

REPORT_FILE = "import_report.json"
DEFAULT_MIN_LOCATED = 0.8
STATUSES = ("located", "partly located", "not located", "unanswerable")


class QuestionOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    status: str
    contexts: int
    located: int
    score: float = Field(description="The best match score of its contexts (share of words in order).")
    documents: list[str]
    reasons: list[str]


class ImportReport(BaseModel):
    """The outcome of one import; ``totals`` counts questions by status and sums to ``questions``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    format: str
    corpus: str
    questions: int
    left_out: list[str] = Field(default_factory=list, description="Questions not imported: no located context "
                                "and no reference answer.")
    totals: dict[str, int]
    located_share: float | None
    contexts: int
    contexts_located: int
    answer_spans: int
    per_document: dict[str, int]
    reasons: dict[str, int]
    rows: list[QuestionOutcome]

    def without_ground_truth(self) -> list[str]:
        return [row.id for row in self.rows if row.status == "not located"]

    def summary(self) -> str:
        """The report as a few printed lines."""
        share = "n/a" if self.located_share is None else f"{self.located_share:.1%}"
        lines = [
            f"{self.questions} questions from {self.source} ({self.format}) over corpus {self.corpus}: "
            + ", ".join(f"{self.totals[status]} {status}" for status in STATUSES)
            + f"; located share {share}",
            f"contexts located: {self.contexts_located} of {self.contexts}; answer spans: {self.answer_spans} "
            "(a reference answer written by an LLM is rarely a span: the passages are the ground truth)",
            f"documents with located passages: {len(self.per_document)}"
            + (" (" + ", ".join(f"{doc} {count}" for doc, count in list(self.per_document.items())[:10])
               + (", ..." if len(self.per_document) > 10 else "") + ")" if self.per_document else ""),
        ]
        missing = self.without_ground_truth()
        if missing:
            lines.append(f"without ground truth: {len(missing)} questions ({', '.join(missing[:10])}"
                         + (", ..." if len(missing) > 10 else "") + ")")
        if self.left_out:
            lines.append(f"left out: {len(self.left_out)} questions with no located context and no reference answer")
        if self.reasons:
            lines.append("reasons: " + "; ".join(f"{reason} ({count})" for reason, count in self.reasons.items()))
        return "\n".join(lines)


def import_report(ids: Sequence[str], matches: Sequence[Sequence[ContextMatch]], references: Sequence[str],
                  kept: Sequence[bool], source: str, format: str, corpus: str) -> ImportReport:
    """The report of the samples (their ids, context outcomes, reference texts, whether each became a
    question); ``answer_spans`` is left 0 for the caller, who has the questions."""
    rows = [_outcome(question_id, found, reference) for question_id, found, reference
            in zip(ids, matches, references, strict=True)]
    totals = {status: sum(row.status == status for row in rows) for status in STATUSES}
    answerable = len(rows) - totals["unanswerable"]
    per_document: Counter[str] = Counter(p.passage.doc_id for found in matches for p in found if p.passage)
    reasons: Counter[str] = Counter(reason for row in rows for reason in row.reasons)
    return ImportReport(
        source=source, format=format, corpus=corpus, questions=len(rows), totals=totals,
        located_share=(totals["located"] + totals["partly located"]) / answerable if answerable else None,
        contexts=sum(row.contexts for row in rows), contexts_located=sum(row.located for row in rows),
        answer_spans=0, left_out=[question_id for question_id, keep in zip(ids, kept, strict=True) if not keep],
        per_document=dict(per_document.most_common()), reasons=dict(reasons.most_common()), rows=rows,
    )


def _outcome(question_id: str, found: Sequence[ContextMatch], reference: str) -> QuestionOutcome:
    located = sum(match.passage is not None for match in found)
    if not found and not reference.strip():
        status = "unanswerable"
    elif found and located == len(found):
        status = "located"
    elif located:
        status = "partly located"
    else:
        status = "not located"
    reasons = [match.reason for match in found if match.reason]
    if not found and status != "unanswerable":
        reasons = ["no reference context"]
    return QuestionOutcome(
        id=question_id, status=status, contexts=len(found), located=located,
        score=max((match.score for match in found), default=0.0),
        documents=list(dict.fromkeys(match.passage.doc_id for match in found if match.passage)), reasons=reasons)


def report_path(questions_file: Path) -> Path:
    """Where a set's import report lives: beside its questions file."""
    if questions_file.name == "questions.jsonl":
        return questions_file.with_name(REPORT_FILE)
    return questions_file.with_name(f"{questions_file.stem}.{REPORT_FILE}")


def write_report(report: ImportReport, path: Path) -> Path:
    from ragkit.storage.atomic import make_dirs, write_json_atomic

    make_dirs(path.parent)
    write_json_atomic(path, report.model_dump(mode="json"))
    return path


def read_import_report(set_path: str | Path) -> ImportReport | None:
    """The import report of a question set (its folder or questions file), or None if it has none."""
    path = Path(set_path)
    candidates = [path / REPORT_FILE] if path.is_dir() else [report_path(path)]
    for candidate in candidates:
        if candidate.is_file():
            try:
                return ImportReport.model_validate(json.loads(candidate.read_text(encoding="utf-8")))
            except (ValueError, OSError):
                return None
    return None


def report_table(report: ImportReport) -> list[dict[str, Any]]:
    """One row per question, for a table."""
    return [{"id": row.id, "status": row.status, "contexts located": f"{row.located}/{row.contexts}",
             "score": row.score, "documents": ", ".join(row.documents), "reasons": "; ".join(row.reasons)}
            for row in report.rows]


def check_located(report: ImportReport, min_located: float, allow_partial: bool, written: Path | None) -> None:
    """Refuse (ConfigError, exit 2) a located share below ``min_located`` unless ``allow_partial``."""
    if allow_partial or report.located_share is None or report.located_share >= min_located:
        return
    located = report.totals["located"] + report.totals["partly located"]
    answerable = report.questions - report.totals["unanswerable"]
    common = ", ".join(f"{reason} ({count})" for reason, count in list(report.reasons.items())[:3])
    where = f"; report: {written}" if written else ""
    raise ConfigError(
        f"only {located} of {answerable} questions ({report.located_share:.0%}) located in the corpus, below "
        f"--min-located {min_located:.0%}; most common reasons: {common or 'none recorded'}{where}. "
        "Check the corpus is the one the set was made from, or pass --allow-partial to import anyway")
