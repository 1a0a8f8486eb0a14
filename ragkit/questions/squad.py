"""The ``squad`` question-set format: questions with answer offsets in a document.

Two layouts:

- JSONL (the COVID-QA layout; a file, or a folder holding ``questions.jsonl``): one object per
  question with id, question, answer, doc_id, answer_start and optional answer_end (default:
  answer_start + len(answer)). One answer per row, so the question's one span is group 0.
  Generated sets (``ragkit questions generate``) add, and this reader keeps: ``type``;
  ``answerable: false`` with a null ``answer_start`` and no answer (the row's doc_id is the
  document the question was drawn from); ``answer_parts`` for a multi-part answer, a list of
  {doc_id, answer, answer_start, answer_end}, part i being span group i (the row's own answer
  fields repeat part 0); ``passages``, relevant passages ({doc_id, start, end}, an import's
  located contexts). Other fields (the generation record) are ignored.
- The official SQuAD JSON nesting ``data/paragraphs/qas/answers``. The doc id is the paragraph's
  ``document_id`` or ``id``; failing that, the article's ``id`` or ``title`` when the article has
  one paragraph, else ``"<article id or title>#<paragraph index>"`` because SQuAD offsets count
  from the start of the paragraph. All ``answers`` of a question are annotators' variants of one
  answer: alternatives, so every span is group 0 (identical spans are kept once). Unanswerable
  SQuAD 2.0 questions are skipped (and logged); an offset that does not point at its answer moves
  to the nearest occurrence.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from ragkit.errors import ConfigError
from ragkit.json_input import load_json
from ragkit.questions.model import Question
from ragkit.questions.rows import RowModel, jsonl_rows, parse_row, read_bytes

logger = logging.getLogger(__name__)


class _SquadPart(RowModel):
    doc_id: str
    answer: str
    answer_start: int
    answer_end: int | None = None


class _SquadRow(RowModel):
    id: str
    question: str
    # Required keys, null only in an unanswerable row (a missing key is still named as missing).
    answer: str | None
    doc_id: str | None
    answer_start: int | None
    answer_end: int | None = None
    graded_spans: list[dict[str, Any]] | None = None
    answerable: bool = True
    type: str | None = None
    answer_parts: list[_SquadPart] | None = None
    passages: list[dict[str, Any]] | None = None


class _SquadAnswer(RowModel):
    text: str
    answer_start: int


class _SquadQA(RowModel):
    id: str
    question: str
    answers: list[_SquadAnswer] = Field(default_factory=list)
    is_impossible: bool = False


def load_squad_jsonl(path: Path) -> list[Question]:
    questions = []
    for line_no, obj in jsonl_rows(path):
        where = f"{path}, line {line_no}"
        row = parse_row(_SquadRow, obj, where)
        fields = _question_fields(row, where)
        if row.graded_spans:
            fields["graded_spans"] = row.graded_spans
        if row.passages:
            fields["passages"] = row.passages
        questions.append(parse_row(Question, fields, where))
    return questions


def _question_fields(row: _SquadRow, where: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"id": row.id, "text": row.question}
    if row.type is not None:
        fields["question_type"] = row.type
    if not row.answerable:
        return {**fields, "answerable": False, "source_doc": row.doc_id}
    if row.answer is None or row.answer_start is None or row.doc_id is None:
        raise ConfigError(f"{where}: an answerable row needs doc_id, answer and answer_start (or answerable: false)")
    if row.answer_parts:
        parts = row.answer_parts
        spans = [{"doc_id": part.doc_id, "start": part.answer_start, "group": group,
                  "end": part.answer_end if part.answer_end is not None else part.answer_start + len(part.answer)}
                 for group, part in enumerate(parts)]
        return {**fields, "relevant_docs": dict.fromkeys((part.doc_id for part in parts), 1.0), "spans": spans,
                "answer_parts": [[part.answer] for part in parts]}
    end = row.answer_end if row.answer_end is not None else row.answer_start + len(row.answer)
    return {
        **fields,
        "relevant_docs": {row.doc_id: 1.0},
        "spans": [{"doc_id": row.doc_id, "start": row.answer_start, "end": end, "group": 0}],
        "answers": [row.answer],
    }


def load_squad_json(path: Path) -> list[Question]:
    questions = []
    unanswerable = 0
    for doc_id, context, qas, where in squad_paragraphs(path):
        for index, obj in enumerate(qas):
            place = f"{path}, {where}.qas[{index}]"
            qa = parse_row(_SquadQA, obj, place)
            if qa.is_impossible:
                unanswerable += 1
                continue
            starts = [_align(context, answer.text, answer.answer_start) for answer in qa.answers]
            spans = dict.fromkeys((start, start + len(a.text)) for start, a in zip(starts, qa.answers))
            fields = {
                "id": qa.id,
                "text": qa.question,
                "relevant_docs": {doc_id: 1.0} if spans else {},
                "spans": [{"doc_id": doc_id, "start": start, "end": end, "group": 0} for start, end in spans],
                "answers": list(dict.fromkeys(answer.text for answer in qa.answers)),
            }
            questions.append(parse_row(Question, fields, place))
    if unanswerable:
        logger.info("%s: skipped %d unanswerable (is_impossible) questions", path, unanswerable)
    return questions


def squad_paragraphs(path: Path) -> Iterator[tuple[str, str, list[Any], str]]:
    """(doc_id, context, qas, JSON location) per paragraph of an official SQuAD file."""
    data = load_json(read_bytes(path), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ConfigError(f"{path}: expected SQuAD JSON of the form {{'data': [{{'paragraphs': [...]}}]}}")
    for a_index, article in enumerate(data["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ConfigError(f"{path}, data[{a_index}]: expected a 'paragraphs' list")
        article_name = str(article.get("id") or article.get("title") or f"article{a_index}")
        for p_index, paragraph in enumerate(paragraphs):
            where = f"data[{a_index}].paragraphs[{p_index}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise ConfigError(f"{path}, {where}: expected a paragraph with a 'context' string")
            own_id = paragraph.get("document_id", paragraph.get("id"))
            if own_id is not None:
                doc_id = str(own_id)
            elif len(paragraphs) == 1:
                doc_id = article_name
            else:
                doc_id = f"{article_name}#{p_index}"
            yield doc_id, paragraph["context"], paragraph.get("qas") or [], where


def _align(context: str, answer: str, start: int) -> int:
    """The offset of the occurrence of answer nearest to start (annotated offsets may be off)."""
    if context[start : start + len(answer)] == answer:
        return start
    occurrences = [match.start() for match in re.finditer(re.escape(answer), context)] if answer else []
    return min(occurrences, key=lambda offset: abs(offset - start)) if occurrences else start
