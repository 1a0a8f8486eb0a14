"""Reviewing a question set before it is used: accept, edit (the span re-verified) or reject each
question, then freeze the result into a content-hashed set experiments read like any other.

A review is a JSON file beside the set (``review.json`` in a set folder, ``<stem>.review.json``
beside a ``.jsonl`` file) mapping question id to its decision, so a review can stop and resume.
Edits are kept in the review, never written into the set under review: the set stays what was
generated, and the frozen copy is the reviewed one. Rows are the SQuAD-style JSONL rows of
``ragkit questions generate`` (or any squad JSONL set): id, question, doc_id, answer,
answer_start, answer_end, optional answer_parts, type, answerable.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragkit.errors import ConfigError, validation_problems
from ragkit.hashing import content_key
from ragkit.json_input import load_json
from ragkit.questions.generation.writer import QUESTIONS_FILE, read_rows, write_rows
from ragkit.storage.atomic import write_bytes_atomic, write_json_atomic

Status = Literal["accepted", "rejected", "edited"]


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status
    question: str | None = Field(default=None, description="The edited question text.")
    parts: list[dict[str, Any]] | None = Field(
        default=None, description="The edited answer parts: {doc_id, answer, answer_start, answer_end} each.")


class Review(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: dict[str, Decision] = Field(default_factory=dict)


def review_path(set_path: Path) -> Path:
    if set_path.suffix.lower() == ".jsonl":
        return set_path.with_name(f"{set_path.stem}.review.json")
    return set_path / "review.json"


def load_review(set_path: Path) -> Review:
    path = review_path(set_path)
    if not path.is_file():
        return Review()
    data = load_json(path.read_bytes(), str(path))
    try:
        return Review.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{path}: {validation_problems(error, 'field', 'the review', Review)}") from None


def save_review(set_path: Path, review: Review) -> Path:
    path = review_path(set_path)
    write_json_atomic(path, review.model_dump(mode="json", exclude_none=True))
    return path


def answer_parts(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's answers as parts (one for a plain row, none for an unanswerable one)."""
    if row.get("answerable") is False or row.get("answer_start") is None:
        return []
    if row.get("answer_parts"):
        return [dict(part) for part in row["answer_parts"]]
    return [{"doc_id": row["doc_id"], "answer": row["answer"], "answer_start": row["answer_start"],
             "answer_end": row.get("answer_end", row["answer_start"] + len(row["answer"]))}]


def decide(review: Review, question_id: str, status: Literal["accepted", "rejected"]) -> Review:
    decisions = {**review.decisions, question_id: Decision(status=status)}
    return Review(decisions=decisions)


def edit(review: Review, row: dict[str, Any], texts: dict[str, str], *, question: str | None = None,
         answer: str | None = None, part: int = 0, answer_start: int | None = None) -> Review:
    """Record an edit of the question text and/or one answer part. A new answer must be in the
    part's document: at ``answer_start`` when given, else the occurrence nearest the old span.
    An answer given to an unanswerable question makes it answerable: the span is looked for in
    its source document (``doc_id``), nearest the passage it was drawn from. ConfigError (one
    line) when it is not there; nothing is recorded then."""
    current = review.decisions.get(row["id"])
    parts = [dict(p) for p in (current.parts if current and current.parts else answer_parts(row))]
    text = (question if question is not None else (current.question if current and current.question
                                                     else row["question"])).strip()
    if not text:
        raise ConfigError(f"question {row['id']}: the edited question is blank")
    if answer is not None:
        if not parts:
            if not row.get("doc_id"):
                raise ConfigError(f"question {row['id']} is unanswerable and names no source document to find "
                                  "an answer in")
            drawn = ((row.get("generation") or {}).get("passages") or [{}])[0]
            parts = [{"doc_id": row["doc_id"], "answer": "", "answer_start": int(drawn.get("start", 0)),
                      "answer_end": int(drawn.get("start", 0))}]
        if not 0 <= part < len(parts):
            raise ConfigError(f"question {row['id']}: part {part} does not exist (valid: 0..{len(parts) - 1})")
        parts[part] = verify_answer(row["id"], parts[part], answer, texts, answer_start)
    decision = Decision(status="edited", question=text, parts=parts or None)
    return Review(decisions={**review.decisions, row["id"]: decision})


def verify_answer(question_id: str, old: dict[str, Any], answer: str, texts: dict[str, str],
                  answer_start: int | None) -> dict[str, Any]:
    doc_id = old["doc_id"]
    document = texts.get(doc_id)
    if document is None:
        raise ConfigError(f"question {question_id}: document '{doc_id}' is not in the corpus")
    answer = answer.strip()
    if not answer:
        raise ConfigError(f"question {question_id}: the edited answer is blank")
    if answer_start is not None:
        if document[answer_start:answer_start + len(answer)] != answer:
            raise ConfigError(f"question {question_id}: document '{doc_id}' does not read {answer!r} at "
                              f"{answer_start} (it reads {document[answer_start:answer_start + len(answer)]!r})")
        start = answer_start
    else:
        starts = _occurrences(document, answer)
        if not starts:
            raise ConfigError(f"question {question_id}: {answer!r} is not in document '{doc_id}'; an answer must be "
                              "an exact span of its document")
        start = min(starts, key=lambda offset: abs(offset - int(old["answer_start"])))
    return {"doc_id": doc_id, "answer": document[start:start + len(answer)], "answer_start": start,
            "answer_end": start + len(answer)}


def _occurrences(text: str, needle: str) -> list[int]:
    found, start = [], text.find(needle)
    while start >= 0:
        found.append(start)
        start = text.find(needle, start + 1)
    return found


def reviewed_rows(rows: list[dict[str, Any]], review: Review) -> list[dict[str, Any]]:
    """The accepted and edited rows, edits applied, in the set's order."""
    kept = []
    for row in rows:
        decision = review.decisions.get(row["id"])
        if decision is None or decision.status == "rejected":
            continue
        row = copy.deepcopy(row)
        if decision.status == "edited":
            row["question"] = decision.question or row["question"]
            if decision.parts:
                head = decision.parts[0]
                row.update(doc_id=head["doc_id"], answer=head["answer"], answer_start=head["answer_start"],
                           answer_end=head["answer_end"])
                row.pop("answerable", None)  # an unanswerable question given an answer in review
                if len(decision.parts) > 1:
                    row["answer_parts"] = decision.parts
            row["reviewed"] = "edited"
        else:
            row["reviewed"] = "accepted"
        kept.append(row)
    return kept


def pending(rows: list[dict[str, Any]], review: Review) -> list[str]:
    return [row["id"] for row in rows if row["id"] not in review.decisions]


class FrozenSet(BaseModel):
    path: str
    content_key: str
    questions: int
    rejected: int


def freeze(set_path: Path, out_root: Path, *, name: str | None = None, allow_pending: bool = False) -> FrozenSet:
    """Write the reviewed set to ``out_root/<name>-<content key>/`` (questions.jsonl, frozen.json,
    and the set's corpus.jsonl when it has one). The key hashes the reviewed rows, so the same
    review freezes to the same folder, and an experiment on it is keyed by what was reviewed."""
    rows = read_rows(set_path)
    review = load_review(set_path)
    waiting = pending(rows, review)
    if waiting and not allow_pending:
        raise ConfigError(f"{len(waiting)} question(s) are not reviewed yet (first: {', '.join(waiting[:5])}); "
                          "accept, edit or reject them, or freeze with pending questions left out")
    kept = reviewed_rows(rows, review)
    if not kept:
        raise ConfigError(f"{set_path}: no accepted question to freeze")
    key = content_key("frozen-question-set", kept)
    stem = name or (set_path.stem if set_path.suffix.lower() == ".jsonl" else set_path.name)
    folder = out_root / f"{stem}-{key}"
    write_rows(folder / QUESTIONS_FILE, kept)
    corpus = (set_path if set_path.is_dir() else set_path.parent) / "corpus.jsonl"
    if corpus.is_file():
        write_bytes_atomic(folder / "corpus.jsonl", corpus.read_bytes())
    rejected = sum(decision.status == "rejected" for decision in review.decisions.values())
    write_json_atomic(folder / "frozen.json", {"source": str(set_path), "content_key": key, "questions": len(kept),
                                               "rejected": rejected, "left_pending": len(waiting)})
    return FrozenSet(path=str(folder), content_key=key, questions=len(kept), rejected=rejected)


class PassageView(BaseModel):
    """One answer part in its passage, for showing a question under review: before, answer, after."""

    doc_id: str
    before: str
    answer: str
    after: str


def review_passages(row: dict[str, Any], texts: dict[str, str], decision: Decision | None = None) -> list[PassageView]:
    """Each answer part (edits applied) in its sentence with one sentence either side; for an
    unanswerable question, the passage it was drawn from (generation record) or nothing."""
    from ragkit.questions.wording import passage_around

    parts = decision.parts if decision is not None and decision.parts else answer_parts(row)
    views = []
    for part in parts:
        text = texts.get(part["doc_id"])
        if text is None:
            continue
        start, end = int(part["answer_start"]), int(part["answer_end"])
        left, right = passage_around(text, start, end)
        views.append(PassageView(doc_id=part["doc_id"], before=text[left:start], answer=text[start:end],
                                 after=text[end:right]))
    if not parts:
        for passage in (row.get("generation") or {}).get("passages", [])[:1]:
            text = texts.get(passage["doc_id"], "")
            views.append(PassageView(doc_id=passage["doc_id"], before=text[passage["start"]:passage["end"]],
                                     answer="", after=""))
    return views


# A set is worth running when at most this share of its questions is pending or rejected.
MOST_UNREVIEWED = 0.5


class ReviewState(BaseModel):
    """How far a generated set's review has come, and whether an experiment on it is warned about."""

    total: int
    accepted: int  # accepted as generated or after an edit
    edited: int
    rejected: int
    pending: int
    warning: str | None = Field(default=None, description="Set when most questions are unreviewed or rejected.")

    @property
    def summary(self) -> str:
        return (f"{self.accepted} accepted ({self.edited} edited), {self.pending} pending, {self.rejected} rejected "
                f"of {self.total}")


def review_state(set_path: Path) -> ReviewState | None:
    """The review counts of a set that is reviewed in ragkit: a generated set (its generation
    record beside it) or one with a review file; None for any other set (a human-written dataset
    expects no review). A frozen set holds only reviewed questions. The warning is set when more
    than ``MOST_UNREVIEWED`` of the questions are pending or rejected: an experiment on the set as
    it is asks every question, unreviewed and rejected ones too."""
    from ragkit.questions.generation.writer import set_paths

    set_path = Path(set_path)
    frozen = (set_path if set_path.is_dir() else set_path.parent) / "frozen.json"
    generated = set_paths(set_path)[1].is_file()
    if not (generated or review_path(set_path).is_file() or frozen.is_file()):
        return None
    try:
        rows = read_rows(set_path)
    except (OSError, ValueError, ConfigError):
        return None
    if frozen.is_file():
        edited = sum(row.get("reviewed") == "edited" for row in rows)
        return ReviewState(total=len(rows), accepted=len(rows), edited=edited, rejected=0, pending=0)
    review = load_review(set_path)
    statuses = [review.decisions[row["id"]].status for row in rows if row.get("id") in review.decisions]
    rejected = statuses.count("rejected")
    edited = statuses.count("edited")
    accepted = statuses.count("accepted") + edited
    waiting = len(rows) - len(statuses)
    warning = None
    if rows and (waiting + rejected) > MOST_UNREVIEWED * len(rows):
        warning = (f"most questions of this set are unreviewed or rejected ({waiting} pending, {rejected} rejected of "
                   f"{len(rows)}): an experiment on it asks all of them. Review them on the Question sets page "
                   "(`ragkit questions review`) and freeze the set (`ragkit questions freeze`) to run on the accepted "
                   "ones only.")
    return ReviewState(total=len(rows), accepted=accepted, edited=edited, rejected=rejected, pending=waiting,
                       warning=warning)
