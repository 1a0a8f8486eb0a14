"""Question sets: the questions of an evaluation and their ground truth.

Ground truth is kept as document ids (graded relevance) and character spans inside documents,
never as chunk ids, so every chunker is judged against the same truth.

Formats read by :func:`load_question_set`:

- ``beir``: a folder with ``queries.jsonl`` ({"_id", "text"}) and ``qrels/<split>.tsv``
  (query-id, corpus-id, score; header optional). Only queries judged in the split are kept, in
  the order they first appear in the qrels file. Scores are kept as floats (graded relevance);
  a row with score <= 0 marks a document as not relevant and is left out.
- ``squad``: a JSONL file (or a folder holding ``questions.jsonl``), one object per question with
  id, question, answer, doc_id, answer_start and optional answer_end (the COVID-QA layout), or
  the official SQuAD JSON nesting ``data/paragraphs/qas/answers``. In that nesting the doc id is
  the paragraph's ``document_id`` or ``id``; failing that, the article's ``id`` or ``title`` when
  the article has one paragraph, else ``"<article id or title>#<paragraph index>"`` because SQuAD
  offsets count from the start of the paragraph. Unanswerable SQuAD 2.0 questions are skipped
  (and logged); an offset that does not point at its answer moves to the nearest occurrence.
- ``jsonl`` / ``csv``: id (optional, default: the 1-based row number), question, and at least one
  of relevant_doc_ids (a list, a {doc_id: score} object, or a ';'-separated string) and answer.

A row that cannot be read raises ConfigError naming the file and line; nothing is dropped quietly.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from llama_index.core.schema import Document
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragkit.corpus.model import make_document
from ragkit.hashing import content_key
from ragkit.registry import ConfigError

logger = logging.getLogger(__name__)

FORMATS = ("auto", "beir", "squad", "jsonl", "csv")
# File and folder names that say nothing about the dataset; the folder above names it instead.
_GENERIC_NAMES = {"beir", "questions", "queries"}


class AnswerSpan(BaseModel):
    """A half-open character range [start, end) in a document of the corpus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_id: str = Field(min_length=1)
    start: int = Field(ge=0)
    end: int

    @model_validator(mode="after")
    def _check_order(self) -> AnswerSpan:
        if self.end <= self.start:
            raise ValueError(f"span end must be > start, got start={self.start}, end={self.end}")
        return self


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    relevant_docs: dict[str, float] = Field(default_factory=dict, description="doc id -> relevance (> 0).")
    spans: list[AnswerSpan] = Field(default_factory=list, description="Where the answer is, per document.")
    answers: list[str] = Field(default_factory=list, description="Reference answer texts.")

    @model_validator(mode="after")
    def _check_ground_truth(self) -> Question:
        if not self.text.strip():
            raise ValueError("question text is blank")
        if not self.relevant_docs and not self.answers:
            raise ValueError("a question needs relevant documents or an answer")
        not_relevant = {doc: score for doc, score in self.relevant_docs.items() if score <= 0}
        if not_relevant:
            raise ValueError(f"relevance scores must be > 0, got {not_relevant}")
        if any(not answer.strip() for answer in self.answers):
            raise ValueError("answers must not be blank")
        outside = sorted({span.doc_id for span in self.spans} - set(self.relevant_docs))
        if outside:
            raise ValueError(f"spans point into documents not among relevant_docs: {outside}")
        return self


class QuestionSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    format: str
    questions: list[Question]

    @model_validator(mode="after")
    def _check_unique_ids(self) -> QuestionSet:
        duplicates = _duplicates(q.id for q in self.questions)
        if duplicates:
            raise ValueError(f"duplicate question ids: {duplicates[:10]}")
        return self

    def count_judgements(self) -> int:
        """Number of (question, relevant document) pairs."""
        return sum(len(q.relevant_docs) for q in self.questions)

    def count_spans(self) -> int:
        return sum(len(q.spans) for q in self.questions)

    def ids_without_spans(self) -> list[str]:
        """Questions that have an answer and relevant docs but no span (the answer was not found)."""
        return [q.id for q in self.questions if q.answers and q.relevant_docs and not q.spans]

    def by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}

    def content_key(self) -> str:
        """Changes whenever a question or its ground truth changes, so cached metrics do too."""
        return content_key("questions", [q.model_dump(mode="json") for q in self.questions])


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, populate_by_name=True)


class _SquadRow(_Row):
    id: str
    question: str
    answer: str
    doc_id: str
    answer_start: int
    answer_end: int | None = None


class _SquadAnswer(_Row):
    text: str
    answer_start: int


class _SquadQA(_Row):
    id: str
    question: str
    answers: list[_SquadAnswer] = []
    is_impossible: bool = False


class _PlainRow(_Row):
    id: str | None = None
    question: str
    relevant_doc_ids: list[str] | dict[str, float] | str | None = None
    answer: list[str] | str | None = None


class _QueryRow(_Row):
    id: str = Field(alias="_id")
    text: str


class _CorpusRow(_Row):
    id: str = Field(alias="_id")
    title: str | None = None
    text: str


def load_question_set(
    path: str | Path,
    format: str = "auto",
    split: str = "test",
    limit: int | None = None,
    name: str | None = None,
) -> QuestionSet:
    """Read a question set; ``split`` selects the BEIR qrels file, ``limit`` keeps the first N."""
    path = Path(path)
    if format not in FORMATS:
        raise ConfigError(f"unknown question-set format '{format}'. Valid choices: {', '.join(FORMATS)}.")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be > 0, got {limit}")
    if not path.exists():
        raise ConfigError(f"question set not found: {path}")
    if format == "auto":
        format = detect_format(path)
    if format != "beir" and split != "test":
        raise ConfigError(f"split '{split}' applies only to beir datasets; {path} is read as {format}")
    if format == "beir":
        questions = _load_beir(path, split)
    elif format == "squad" and path.is_file() and path.suffix.lower() == ".json":
        questions = _load_squad_json(path)
    elif format == "squad":
        questions = _load_squad_jsonl(_file_in(path, "questions.jsonl"))
    elif format == "jsonl":
        questions = _load_plain_jsonl(_file_in(path, "questions.jsonl"))
    else:
        questions = _load_csv(_file_in(path, "questions.csv"))
    if not questions:
        raise ConfigError(f"no questions found in {path}" + (f" for split '{split}'" if format == "beir" else ""))
    duplicates = _duplicates(q.id for q in questions)
    if duplicates:
        raise ConfigError(f"{path}: duplicate question ids: {', '.join(duplicates[:10])}")
    return QuestionSet(name=name or _default_name(path), format=format, questions=questions[:limit])


def detect_format(path: Path) -> str:
    """The format 'auto' resolves to.

    A folder whose questions.jsonl carries answer offsets is read as squad even when it also has
    qrels/ (the bundled sample has both): spans and answers are richer ground truth than doc ids
    alone. Pass format='beir' to read such a folder through its qrels instead.
    """
    if path.is_dir():
        questions = path / "questions.jsonl"
        if questions.is_file() and _first_row_has_offsets(questions):
            return "squad"
        if (path / "qrels").is_dir():
            return "beir"
        if questions.is_file():
            return "jsonl"
        if (path / "questions.csv").is_file():
            return "csv"
        raise ConfigError(
            f"cannot detect the question-set format of folder {path}: expected qrels/ (beir), "
            "questions.jsonl (squad or jsonl) or questions.csv (csv)"
        )
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "squad" if _first_row_has_offsets(path) else "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix == ".json":
        return "squad"
    raise ConfigError(
        f"cannot detect the question-set format of {path} from its extension; "
        f"pass format= one of {', '.join(FORMATS[1:])}"
    )


def _load_beir(folder: Path, split: str) -> list[Question]:
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        available = ", ".join(sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))) or "none"
        raise ConfigError(f"beir split '{split}' not found: expected {qrels_path} (available splits: {available})")
    judged: dict[str, dict[str, float]] = {}
    first_line: dict[str, int] = {}
    for line_no, line in _numbered_lines(qrels_path):
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != 3:
            raise ConfigError(f"{qrels_path}, line {line_no}: expected query-id, corpus-id, score separated by tabs")
        query_id, doc_id, raw_score = fields
        try:
            score = float(raw_score)
        except ValueError:
            if line_no == 1:  # the BEIR header row
                continue
            raise ConfigError(f"{qrels_path}, line {line_no}: score '{raw_score}' is not a number") from None
        first_line.setdefault(query_id, line_no)
        docs = judged.setdefault(query_id, {})
        if score > 0:
            docs[doc_id] = score
        else:
            docs.pop(doc_id, None)

    queries_path = _file_in(folder, "queries.jsonl")
    texts = {}
    for line_no, obj in _jsonl_rows(queries_path):
        row = _parse_row(_QueryRow, obj, f"{queries_path}, line {line_no}")
        texts[row.id] = row.text
    questions = []
    for query_id, docs in judged.items():
        if not docs:
            continue
        where = f"{qrels_path}, line {first_line[query_id]}"
        if query_id not in texts:
            raise ConfigError(f"{where}: query '{query_id}' is not in {queries_path}")
        questions.append(_parse_row(Question, {"id": query_id, "text": texts[query_id], "relevant_docs": docs}, where))
    return questions


def _load_squad_jsonl(path: Path) -> list[Question]:
    questions = []
    for line_no, obj in _jsonl_rows(path):
        where = f"{path}, line {line_no}"
        row = _parse_row(_SquadRow, obj, where)
        end = row.answer_end if row.answer_end is not None else row.answer_start + len(row.answer)
        fields = {
            "id": row.id,
            "text": row.question,
            "relevant_docs": {row.doc_id: 1.0},
            "spans": [{"doc_id": row.doc_id, "start": row.answer_start, "end": end}],
            "answers": [row.answer],
        }
        questions.append(_parse_row(Question, fields, where))
    return questions


def _load_squad_json(path: Path) -> list[Question]:
    questions = []
    unanswerable = 0
    for doc_id, context, qas, where in _squad_paragraphs(path):
        for index, obj in enumerate(qas):
            place = f"{path}, {where}.qas[{index}]"
            qa = _parse_row(_SquadQA, obj, place)
            if qa.is_impossible:
                unanswerable += 1
                continue
            starts = [_align(context, answer.text, answer.answer_start) for answer in qa.answers]
            spans = dict.fromkeys((start, start + len(a.text)) for start, a in zip(starts, qa.answers))
            fields = {
                "id": qa.id,
                "text": qa.question,
                "relevant_docs": {doc_id: 1.0} if spans else {},
                "spans": [{"doc_id": doc_id, "start": start, "end": end} for start, end in spans],
                "answers": list(dict.fromkeys(answer.text for answer in qa.answers)),
            }
            questions.append(_parse_row(Question, fields, place))
    if unanswerable:
        logger.info("%s: skipped %d unanswerable (is_impossible) questions", path, unanswerable)
    return questions


def _squad_paragraphs(path: Path) -> Iterator[tuple[str, str, list[Any], str]]:
    """(doc_id, context, qas, JSON location) per paragraph of an official SQuAD file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}, line {error.lineno}: invalid JSON ({error.msg})") from None
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


def _load_plain_jsonl(path: Path) -> list[Question]:
    rows = [(line_no, number, obj) for number, (line_no, obj) in enumerate(_jsonl_rows(path), start=1)]
    return _plain_questions(path, rows)


def _load_csv(path: Path) -> list[Question]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = {(column or "").strip() for column in reader.fieldnames or []}
        if "question" not in columns or not columns & {"relevant_doc_ids", "answer"}:
            raise ConfigError(
                f"{path}: needs a 'question' column and 'relevant_doc_ids' and/or 'answer' "
                f"(optional 'id'); found columns: {', '.join(sorted(columns)) or 'none'}"
            )
        rows = []
        record_start = reader.line_num + 1
        for number, record in enumerate(reader, start=1):
            # Empty cells count as missing; cells beyond the header (key None, list value) are ignored.
            cells = {key.strip(): value.strip() or None for key, value in record.items() if isinstance(value, str)}
            rows.append((record_start, number, cells))
            record_start = reader.line_num + 1
    return _plain_questions(path, rows)


def _plain_questions(path: Path, rows: list[tuple[int, int, dict[str, Any]]]) -> list[Question]:
    questions = []
    for line_no, number, obj in rows:
        where = f"{path}, line {line_no}"
        row = _parse_row(_PlainRow, obj, where)
        relevant = row.relevant_doc_ids
        if isinstance(relevant, str):
            relevant = [doc.strip() for doc in relevant.split(";") if doc.strip()]
        if isinstance(relevant, list):
            relevant = dict.fromkeys(relevant, 1.0)
        answers = [row.answer] if isinstance(row.answer, str) else row.answer or []
        fields = {
            "id": row.id if row.id is not None else str(number),
            "text": row.question,
            "relevant_docs": relevant or {},
            "answers": [answer for answer in answers if answer.strip()],
        }
        questions.append(_parse_row(Question, fields, where))
    return questions


def load_dataset_corpus(path: str | Path) -> list[Document] | None:
    """The corpus shipped with a dataset: corpus.jsonl in its folder, or a SQuAD file's contexts.

    A BEIR row's title goes into metadata "title" and is not prepended to the text (chunkers do
    that when asked to contextualize). None means the dataset has no corpus of its own, so the
    experiment must name an ingested corpus.
    """
    path = Path(path)
    documents: dict[str, Document] = {}
    if path.is_file() and path.suffix.lower() == ".json":
        for doc_id, context, _, where in _squad_paragraphs(path):
            if doc_id in documents and documents[doc_id].text != context:
                raise ConfigError(f"{path}, {where}: doc id '{doc_id}' is used for two different contexts")
            documents[doc_id] = make_document(doc_id, context)
        return list(documents.values())
    corpus_path = (path if path.is_dir() else path.parent) / "corpus.jsonl"
    if not corpus_path.is_file():
        return None
    for line_no, obj in _jsonl_rows(corpus_path):
        row = _parse_row(_CorpusRow, obj, f"{corpus_path}, line {line_no}")
        if row.id in documents:
            raise ConfigError(f"{corpus_path}, line {line_no}: duplicate document id '{row.id}'")
        documents[row.id] = make_document(row.id, row.text, {"title": row.title} if row.title else None)
    return list(documents.values())


def resolve_answer_spans(question_set: QuestionSet, documents_by_id: Mapping[str, Document]) -> QuestionSet:
    """Add spans to questions that have answers and relevant docs but no spans.

    Each answer is looked up in each relevant document, exact text first, then ignoring case;
    its first occurrence becomes the span. Questions whose answer is found nowhere keep no span:
    their number is logged as a warning, and ``QuestionSet.ids_without_spans()`` lists them.
    """
    resolved = []
    unresolved = []
    for question in question_set.questions:
        if question.spans or not question.answers or not question.relevant_docs:
            resolved.append(question)
            continue
        spans = []
        for doc_id in question.relevant_docs:
            document = documents_by_id.get(doc_id)
            for answer in question.answers if document is not None else []:
                found = find_answer(document.text, answer)
                if found is not None:
                    spans.append(AnswerSpan(doc_id=doc_id, start=found[0], end=found[1]))
        if not spans:
            unresolved.append(question.id)
        resolved.append(question.model_copy(update={"spans": spans}))
    if unresolved:
        logger.warning("%s: no answer span found for %d questions", question_set.name, len(unresolved))
    return question_set.model_copy(update={"questions": resolved})


def find_answer(text: str, answer: str) -> tuple[int, int] | None:
    """(start, end) of the first occurrence of answer in text: exact, then ignoring case."""
    candidates = [candidate for candidate in dict.fromkeys((answer, answer.strip())) if candidate]
    for candidate in candidates:
        start = text.find(candidate)
        if start >= 0:
            return start, start + len(candidate)
    for candidate in candidates:
        match = re.search(re.escape(candidate), text, re.IGNORECASE)
        if match:
            return match.span()
    return None


def validate_against_corpus(question_set: QuestionSet, documents_by_id: Mapping[str, Document]) -> list[str]:
    """Human-readable problems: unknown doc ids, spans outside their document, and spans that do
    not read as any of the question's answers (ignoring case and surrounding whitespace)."""
    problems = []
    for question in question_set.questions:
        for doc_id in question.relevant_docs:
            if doc_id not in documents_by_id:
                problems.append(f"question {question.id}: relevant document '{doc_id}' is not in the corpus")
        expected = {answer.strip().casefold() for answer in question.answers}
        for span in question.spans:
            document = documents_by_id.get(span.doc_id)
            if document is None:
                continue  # reported above: a span's document is always among relevant_docs
            if span.end > len(document.text):
                problems.append(
                    f"question {question.id}: span [{span.start}, {span.end}) is outside document "
                    f"'{span.doc_id}' ({len(document.text)} chars)"
                )
                continue
            found = document.text[span.start : span.end]
            if expected and found.strip().casefold() not in expected:
                problems.append(
                    f"question {question.id}: span [{span.start}, {span.end}) in '{span.doc_id}' reads "
                    f"{_shorten(found)!r}, not the answer {_shorten(question.answers[0])!r}"
                )
    return problems


def _parse_row(model: type[BaseModel], obj: Any, where: str) -> Any:
    """Validate one row; ``where`` names the file and line (or JSON path) in the error."""
    try:
        return model.model_validate(obj)
    except ValidationError as error:
        parts = []
        for item in error.errors():
            field = ".".join(str(part) for part in item["loc"])
            parts.append(f"{field}: {item['msg']}" if field else item["msg"])
        raise ConfigError(f"{where}: {'; '.join(dict.fromkeys(parts))}") from None


def _duplicates(ids: Iterable[str]) -> list[str]:
    return sorted(question_id for question_id, count in Counter(ids).items() if count > 1)


def _numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8-sig") as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                yield line_no, line.rstrip("\r\n")


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for line_no, line in _numbered_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}, line {line_no}: invalid JSON ({error.msg})") from None
        if not isinstance(obj, dict):
            raise ConfigError(f"{path}, line {line_no}: expected a JSON object, got {type(obj).__name__}")
        yield line_no, obj


def _first_row_has_offsets(path: Path) -> bool:
    for _, line in _numbered_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            return False  # the loader reports the bad line
        return isinstance(obj, dict) and "answer_start" in obj
    return False


def _file_in(path: Path, default_name: str) -> Path:
    """The file itself, or default_name inside a folder; a missing file names the path expected."""
    target = path / default_name if path.is_dir() else path
    if not target.is_file():
        raise ConfigError(f"expected file not found: {target}")
    return target


def _default_name(path: Path) -> str:
    stem = path.name if path.is_dir() else path.stem
    if stem.lower() in _GENERIC_NAMES and path.resolve().parent.name:
        return path.resolve().parent.name
    return stem


def _shorten(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
