"""The ground truth of an evaluation: answer spans, questions and question sets.

Ground truth is kept as document ids (graded relevance) and character spans inside documents,
never as chunk ids, so every chunker is judged against the same truth.

Answer semantics: alternatives are any-of, parts are all-of. A question's answer has one part
unless ``answer_parts`` says otherwise; each span carries the number of the part it answers
(``AnswerSpan.group``), and the spans of one part are alternatives, any one of which answers that
part. A question is answered when every part is.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragkit.hashing import content_key
from ragkit.questions.rows import duplicates
from ragkit.quoting import clipped, quoted
from ragkit.settings import ENV_PREFIX, get_settings


class AnswerSpan(BaseModel):
    """A half-open character range [start, end) in a document of the corpus.

    Spans of one question with the same ``group`` are alternatives (any one of them answers);
    different groups are parts of a multi-part answer (all are needed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_id: str = Field(min_length=1)
    start: int = Field(ge=0)
    end: int
    group: int = Field(default=0, ge=0, description="Answer part this span is an alternative for.")

    @model_validator(mode="after")
    def _check_order(self) -> AnswerSpan:
        if self.end <= self.start:
            raise ValueError(f"span end must be > start, got start={self.start}, end={self.end}")
        return self


class GradedSpan(BaseModel):
    """A span judged for a question with a relevance grade (ragkit.labels): graded ground truth.

    ``grade`` is on the person's scale, 0 not relevant, 1 partly, 2 relevant (the LLM judge's
    0-3 grades are mapped onto it); ``source`` says whose grade it is. Optional: a question set
    without labels has none, and ``spans`` / ``relevant_docs`` stay the ground truth metrics read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_id: str = Field(min_length=1)
    start: int = Field(ge=0)
    end: int
    grade: int = Field(ge=0, le=2, description="0 not relevant, 1 partly, 2 relevant.")
    source: Literal["human", "judge"] = "human"

    @model_validator(mode="after")
    def _check_order(self) -> GradedSpan:
        if self.end <= self.start:
            raise ValueError(f"graded span end must be > start, got start={self.start}, end={self.end}")
        return self


Route = Literal["documents", "conversational", "web"]


class Turn(BaseModel):
    """One earlier turn of the conversation a follow-up question belongs to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)

    @model_validator(mode="after")
    def _not_blank(self) -> Turn:
        if not self.content.strip():
            raise ValueError("a conversation turn's content is blank")
        return self


class Question(BaseModel):
    """One question and its ground truth.

    ``answers`` are the reference texts. Without ``answer_parts`` the answer has one part and the
    texts are its alternatives. With ``answer_parts`` part i lists the alternatives of part i
    (span group i), and ``answers`` is every part's alternatives in order, filled in from
    ``answer_parts`` when not given. Spans are numbered by part: 0..G-1 for G parts; with
    ``answer_parts`` a part may have no span (its answer was not found in any document).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    relevant_docs: dict[str, float] = Field(default_factory=dict, description="doc id -> relevance (> 0).")
    spans: list[AnswerSpan] = Field(default_factory=list, description="Where the answer is, per document.")
    answers: list[str] = Field(default_factory=list, description="Reference answer texts.")
    answer_parts: list[list[str]] = Field(
        default_factory=list,
        description="Alternatives per part of a multi-part answer; empty for a one-part answer.",
    )
    history: list[Turn] = Field(default_factory=list, description="The conversation before this question.")
    expected_route: Route | None = Field(
        default=None, description="Where a router should send the question (scored as routing accuracy)."
    )
    answerable: bool = Field(
        default=True, description="False: the documents cannot answer it, and abstaining is the right answer."
    )
    graded_spans: list[GradedSpan] = Field(
        default_factory=list, description="Pooled spans with a relevance grade (labels from ragkit.labels)."
    )
    question_type: str | None = Field(
        default=None, description="How the question was made (factoid, paraphrase, multi_hop, unanswerable), if known."
    )
    source_doc: str | None = Field(
        default=None,
        description="The document the question was written from when no span or judgement says so "
        "(an unanswerable question drawn from a document's topic).",
    )

    passages: list[AnswerSpan] = Field(
        default_factory=list,
        description="Relevant passages: the question's reference contexts located in the corpus (sets made "
        "by ragas or LlamaIndex); each is needed, so span metrics score one group per passage when the "
        "answer has no span.",
    )
    documents: list[str] = Field(
        default_factory=list,
        description="The document(s) the user chose to ask about (the question's `document` field): a "
        "retriever with scope named_doc searches only these. Not ground truth: metrics never read it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _answers_from_parts(cls, data: Any) -> Any:
        if isinstance(data, dict) and "answers" not in data:
            parts = data.get("answer_parts")
            if isinstance(parts, list) and all(isinstance(part, list) for part in parts):
                data = {**data, "answers": [text for part in parts for text in part]}
        return data

    @model_validator(mode="after")
    def _check_ground_truth(self) -> Question:
        if not self.text.strip():
            raise ValueError("question text is blank")
        self._check_lengths()
        if self.answerable and not self.relevant_docs and not self.answers:
            raise ValueError("a question needs relevant documents or an answer (or answerable: false)")
        not_relevant = {doc: score for doc, score in self.relevant_docs.items() if score <= 0}
        if not_relevant:
            raise ValueError(f"relevance scores must be > 0, got {quoted(not_relevant)}")
        if any(not answer.strip() for answer in self.answers):
            raise ValueError("answers must not be blank")
        outside = sorted({span.doc_id for span in self.spans} - set(self.relevant_docs))
        if outside:
            raise ValueError(f"spans point into documents not among relevant_docs: {quoted(outside)}")
        outside = sorted({passage.doc_id for passage in self.passages} - set(self.relevant_docs))
        if outside:
            raise ValueError(f"passages point into documents not among relevant_docs: {quoted(outside)}")
        self._check_parts()
        return self

    def _check_lengths(self) -> None:
        """A question or a reference answer longer than its setting is refused, not cut: cut, it
        would be another question, and whole, it would go to the embedder and the LLMs."""
        settings = get_settings()
        if len(self.text) > settings.max_question_chars:
            raise ValueError(f"question '{clipped(self.id, 100)}' is {len(self.text):,} characters long, over the "
                             f"limit of {settings.max_question_chars:,} ({ENV_PREFIX}MAX_QUESTION_CHARS)")
        longest = max(self.answers, key=len, default="")
        if len(longest) > settings.max_answer_chars:
            raise ValueError(f"an answer of question '{clipped(self.id, 100)}' is {len(longest):,} characters long, "
                             f"over the limit of {settings.max_answer_chars:,} ({ENV_PREFIX}MAX_ANSWER_CHARS)")

    def _check_parts(self) -> None:
        groups = sorted({span.group for span in self.spans})
        if not self.answer_parts:
            if groups != list(range(len(groups))):
                raise ValueError(f"question {clipped(self.id)}: span groups must be numbered 0..G-1 without gaps, "
                                 f"got {quoted(groups)}")
            return
        if any(not part for part in self.answer_parts):
            raise ValueError(f"question {clipped(self.id)}: every answer part needs at least one answer")
        if self.answers != [text for part in self.answer_parts for text in part]:
            raise ValueError(f"question {clipped(self.id)}: answers must be the answer_parts' texts in order")
        beyond = [group for group in groups if group >= len(self.answer_parts)]
        if beyond:
            raise ValueError(
                f"question {clipped(self.id)}: span groups {beyond} have no answer part "
                f"(groups are numbered 0..{len(self.answer_parts) - 1} for {len(self.answer_parts)} parts)"
            )

    def span_groups(self) -> list[list[AnswerSpan]]:
        """The spans per answer part, ordered by part: the question is answered when every inner
        list has a span that is covered (any one of them).

        An unresolved part is an empty list, so it can never be covered. The number of parts is
        ``len(answer_parts)`` when given, else one per span group, else one if the question has
        answers (whose spans were not found: ``[[]]``), else none (``[]``: relevance only).
        """
        if self.answer_parts:
            count = len(self.answer_parts)
        elif self.spans:
            count = max(span.group for span in self.spans) + 1
        else:
            count = 1 if self.answers else 0
        groups: list[list[AnswerSpan]] = [[] for _ in range(count)]
        for span in self.spans:
            groups[span.group].append(span)
        return groups

    def scored_span_groups(self) -> list[list[AnswerSpan]]:
        """What span metrics score: the answer's ``span_groups()`` when some part has a span;
        else, given relevant passages, one group per passage (all are needed: a set made by
        ragas or LlamaIndex holds the contexts its reference answer was written from); else the
        answer's groups, empty (nothing to score at the span level)."""
        groups = self.span_groups()
        if any(groups) or not self.passages:
            return groups
        return [[passage] for passage in self.passages]

    def key_dump(self) -> dict[str, Any]:
        """The question as JSON for content keys: fields added after keys were first published
        are left out while at their default, so a question set that does not use them keeps
        its key (and every run its id)."""
        dumped = self.model_dump(mode="json")
        for name in ADDED_FIELDS:
            if dumped[name] == _json_default(name):
                del dumped[name]
        return dumped

    def content_key(self) -> str:
        """Changes whenever the question or its ground truth changes: results are keyed per (run,
        question content), so an edited question is answered again and the others are reused."""
        return content_key("question", self.key_dump())

    @property
    def source_document(self) -> str | None:
        """The document the question was drawn from: the resampling cluster of statistics.

        Questions written from the same document share its wording and difficulty, so they are not
        independent; confidence intervals and tests resample documents, not questions. The
        answer's document is where the question came from, so it is the first span's document;
        without spans the most relevant judged document stands in (ties: the first listed), then
        ``source_doc``. None when the question has none of them: the caller decides (e.g. a
        cluster of its own).
        """
        if self.spans:
            return self.spans[0].doc_id
        if self.relevant_docs:
            return max(self.relevant_docs, key=self.relevant_docs.__getitem__)
        return self.source_doc


# Added with follow-up questions and routing, then graded labels and generated sets, then the
# user's chosen documents, then located passages; see Question.key_dump.
ADDED_FIELDS = ("history", "expected_route", "answerable", "graded_spans", "question_type", "source_doc",
                "documents", "passages")


@functools.cache
def _json_default(name: str) -> Any:
    # Cached (pydantic's get_default is slow, and every committed question's key asks for it);
    # the value is only compared, never changed.
    return Question.model_fields[name].get_default(call_default_factory=True)


class QuestionSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    format: str
    questions: list[Question]

    @model_validator(mode="after")
    def _check_unique_ids(self) -> QuestionSet:
        repeated = duplicates(q.id for q in self.questions)
        if repeated:
            raise ValueError(f"duplicate question ids: {quoted(repeated[:10])}")
        return self

    def count_judgements(self) -> int:
        """Number of (question, relevant document) pairs."""
        return sum(len(q.relevant_docs) for q in self.questions)

    def count_spans(self) -> int:
        return sum(len(q.spans) for q in self.questions)

    def ids_without_spans(self) -> list[str]:
        """Questions that have an answer and relevant docs but no span (no part of the answer was
        found)."""
        return [q.id for q in self.questions if q.answers and q.relevant_docs and not q.spans]

    def by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}

    def content_key(self) -> str:
        """Changes whenever a question or its ground truth changes, so cached metrics do too."""
        return content_key("questions", [q.key_dump() for q in self.questions])
