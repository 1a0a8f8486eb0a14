"""Question sets: the questions of an evaluation and their ground truth.

Ground truth is kept as document ids (graded relevance) and character spans inside documents,
never as chunk ids, so every chunker is judged against the same truth. Alternative answers are
any-of and the parts of a multi-part answer are all-of (see :mod:`ragkit.questions.model`).

Formats read by :func:`load_question_set`, one reader module each:

- ``beir`` (:mod:`ragkit.questions.beir`): a folder with ``queries.jsonl`` ({"_id", "text"}) and
  ``qrels/<split>.tsv`` (query-id, corpus-id, score; header optional). Only queries judged in the
  split are kept, in the order they first appear in the qrels file. Scores are kept as floats
  (graded relevance); a row with score <= 0 marks a document as not relevant and is left out.
- ``squad`` (:mod:`ragkit.questions.squad`): a JSONL file (or a folder holding ``questions.jsonl``), one
  object per question with id, question, answer, doc_id, answer_start and optional answer_end
  (the COVID-QA layout; generated sets add ``type``, ``answer_parts`` and ``answerable: false``),
  or the official SQuAD JSON nesting ``data/paragraphs/qas/answers``. In
  that nesting the doc id is the paragraph's ``document_id`` or ``id``; failing that, the
  article's ``id`` or ``title`` when the article has one paragraph, else
  ``"<article id or title>#<paragraph index>"`` because SQuAD offsets count from the start of the
  paragraph. A question's answers are alternatives (one group). Unanswerable SQuAD 2.0 questions
  are skipped (and logged); an offset that does not point at its answer moves to the nearest
  occurrence.
- ``jsonl`` / ``csv`` (:mod:`ragkit.questions.plain`): id (optional, default: the 1-based row number),
  question, and at least one of relevant_doc_ids (a list, a {doc_id: score} object, or a
  ';'-separated string) and an answer: ``answer`` (alternatives) or ``answer_parts`` (a multi-part
  answer; CSV parts separated by ``||``).

A row that cannot be read raises ConfigError naming the file and line; nothing is dropped quietly.

Beside the readers: ``generation/`` (sets generated from a corpus, answers exact spans),
``quality`` (the report of ``ragkit questions check``), ``review`` (accept / edit / reject, freeze)
and ``interop/`` (ragas, LlamaIndex, BEIR, TREC qrels).
"""

from __future__ import annotations

from pathlib import Path

from ragkit.errors import ConfigError
from ragkit.questions.beir import load_beir
from ragkit.questions.corpus import load_dataset_corpus
from ragkit.questions.model import AnswerSpan, GradedSpan, Question, QuestionSet, Turn
from ragkit.questions.plain import load_csv, load_plain_jsonl
from ragkit.questions.rows import duplicates, file_in, first_row_has_offsets
from ragkit.questions.spans import find_answer, resolve_answer_spans, validate_against_corpus
from ragkit.questions.squad import load_squad_json, load_squad_jsonl
from ragkit.quoting import clipped

__all__ = [
    "FORMATS",
    "AnswerSpan",
    "GradedSpan",
    "Question",
    "QuestionSet",
    "Turn",
    "detect_format",
    "find_answer",
    "load_dataset_corpus",
    "load_question_set",
    "resolve_answer_spans",
    "validate_against_corpus",
]

FORMATS = ("auto", "beir", "squad", "jsonl", "csv")
# File and folder names that say nothing about the dataset; the folder above names it instead.
_GENERIC_NAMES = {"beir", "questions", "queries"}


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
        raise ConfigError(f"unknown question-set format '{clipped(format)}'. Valid choices: {', '.join(FORMATS)}.")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be > 0, got {limit}")
    if not path.exists():
        raise ConfigError(f"question set not found: {path}")
    if format == "auto":
        format = detect_format(path)
    if format != "beir" and split != "test":
        raise ConfigError(f"split '{clipped(split)}' applies only to beir datasets; {path} is read as {format}")
    if format == "beir":
        questions = load_beir(path, split)
    elif format == "squad" and path.is_file() and path.suffix.lower() == ".json":
        questions = load_squad_json(path)
    elif format == "squad":
        questions = load_squad_jsonl(file_in(path, "questions.jsonl"))
    elif format == "jsonl":
        questions = load_plain_jsonl(file_in(path, "questions.jsonl"))
    else:
        questions = load_csv(file_in(path, "questions.csv"))
    if not questions:
        in_split = f" for split '{clipped(split)}'" if format == "beir" else ""
        raise ConfigError(f"no questions found in {path}{in_split}")
    repeated = duplicates(q.id for q in questions)
    if repeated:
        named = ", ".join(clipped(question_id) for question_id in repeated[:10])
        raise ConfigError(f"{path}: duplicate question ids: {named}")
    return QuestionSet(name=name or _default_name(path), format=format, questions=questions[:limit])


def detect_format(path: Path) -> str:
    """The format 'auto' resolves to.

    A folder whose questions.jsonl carries answer offsets is read as squad even when it also has
    qrels/ (the bundled sample has both): spans and answers are richer ground truth than doc ids
    alone. Pass format='beir' to read such a folder through its qrels instead.
    """
    if path.is_dir():
        questions = path / "questions.jsonl"
        if questions.is_file() and first_row_has_offsets(questions):
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
        return "squad" if first_row_has_offsets(path) else "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix == ".json":
        return "squad"
    raise ConfigError(
        f"cannot detect the question-set format of {path} from its extension; "
        f"pass format= one of {', '.join(FORMATS[1:])}"
    )


def _default_name(path: Path) -> str:
    stem = path.name if path.is_dir() else path.stem
    if stem.lower() in _GENERIC_NAMES and path.resolve().parent.name:
        return path.resolve().parent.name
    return stem
