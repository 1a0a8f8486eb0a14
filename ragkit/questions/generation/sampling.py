"""Where each generated question comes from: balanced over documents, then over their sections.

Sampling reads document text, never a chunker's chunks, so the ground truth (character spans in
the document) survives any chunker. The plan is pure and seeded: the same corpus, types, n and
seed give the same passages and answer spans, which is what lets a dry run count the calls that
the real run then makes.

Balance: the questions' types are shuffled, then the i-th question goes to the i-th document of
a seeded shuffle of the documents, round robin, so the counts per document differ by at most one.
Within a document the k-th question uses the k-th of its sections (seeded order, round robin).
Sections are the loader's ``sections`` metadata (headings); a document without them is cut into
runs of sentences of about ``section_chars`` characters.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragkit.errors import ConfigError
from ragkit.text import multilingual_content_words, sentence_spans

QUESTION_TYPES = ("factoid", "paraphrase", "multi_hop", "unanswerable")
EXTRACTIVE_TYPES = ("table", "heading", "definition", "cloze")  # the extractive method's (``extractive``)
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]]")
_ATTEMPTS = 4  # passages tried per document for one question
_LEADING_GLUE = re.compile(r"(?:and|or|but|which|that|while|whereas)\s+", re.IGNORECASE)


class TextDocument(Protocol):
    """What sampling reads of a document (a LlamaIndex Document has these)."""

    id_: str
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Passage:
    doc_id: str
    section: str
    start: int
    end: int


@dataclass(frozen=True)
class Slot:
    """One planned question: its type, its passages (two for multi_hop) and the answer span chosen
    in each (document offsets; none for unanswerable)."""

    number: int
    type: str
    passages: tuple[Passage, ...]
    answers: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Section:
    name: str
    start: int
    end: int


def type_counts(n: int, types: Sequence[str]) -> dict[str, int]:
    """n split over the types as evenly as possible; earlier types take the remainder."""
    return {kind: n // len(types) + (index < n % len(types)) for index, kind in enumerate(types)}


def plan_slots(documents: Sequence[TextDocument], n: int, types: Sequence[str], seed: int, *,
               passage_chars: int = 900, section_chars: int = 2000, max_answer_words: int = 12,
               min_document_chars: int = 200) -> list[Slot]:
    """The passages and answer spans of ``n`` questions (fewer only if a passage has no span)."""
    usable = sorted((d for d in documents if len(d.text.strip()) >= min_document_chars), key=lambda d: d.id_)
    if not usable:
        raise ConfigError(f"no document has at least {min_document_chars} characters of text to ask about")
    if "multi_hop" in types and len(usable) < 2:
        raise ConfigError("multi_hop questions need at least two documents; drop it from --types")
    rng = random.Random(seed)
    kinds = [kind for kind, count in type_counts(n, types).items() for _ in range(count)]
    rng.shuffle(kinds)
    order = list(usable)
    rng.shuffle(order)
    sections = {d.id_: _shuffled(document_sections(d, section_chars), rng) for d in order}
    uses: dict[str, int] = {}

    def next_passage(document: TextDocument) -> Passage:
        number = uses.get(document.id_, 0)
        uses[document.id_] = number + 1
        own = sections[document.id_]
        return pick_passage(document, own[number % len(own)], passage_chars, rng)

    slots = []
    for number, kind in enumerate(kinds):
        first = order[number % len(order)]
        chosen = [first] + ([order[(number + 1) % len(order)]] if kind == "multi_hop" else [])
        passages: list[Passage] = []
        answers: list[tuple[int, int]] = []
        for document in chosen:
            # A passage without a phrase to ask about (a table, a list of names) gives way to the
            # document's next one; still seeded, so the plan stays the same for the same seed.
            for _ in range(_ATTEMPTS):
                passage = next_passage(document)
                span = None if kind == "unanswerable" else pick_answer(document.text, passage, max_answer_words, rng)
                if kind == "unanswerable" or span is not None:
                    break
            passages.append(passage)
            if span is not None:
                answers.append(span)
        if kind != "unanswerable" and len(answers) < len(chosen):
            continue
        slots.append(Slot(number=number, type=kind, passages=tuple(passages), answers=tuple(answers)))
    return slots


def _shuffled(items: list[Section], rng: random.Random) -> list[Section]:
    items = list(items)
    rng.shuffle(items)
    return items


def document_sections(document: TextDocument, section_chars: int) -> list[Section]:
    """The document's sections from its ``sections`` metadata ([start, name] pairs), skipping
    those with under 100 characters (a heading alone); else runs of whole sentences."""
    text = document.text
    marks = document.metadata.get("sections") or []
    found = []
    for index, mark in enumerate(marks):
        start = int(mark[0])
        end = int(marks[index + 1][0]) if index + 1 < len(marks) else len(text)
        if end - start >= 100:
            found.append(Section(str(mark[1]), start, end))
    if found:
        return found
    runs: list[Section] = []
    run_start: int | None = None
    for s, e in sentence_spans(text):
        run_start = s if run_start is None else run_start
        if e - run_start >= section_chars:
            runs.append(Section(f"part {len(runs) + 1}", run_start, e))
            run_start = None
    if run_start is not None:
        runs.append(Section(f"part {len(runs) + 1}", run_start, len(text.rstrip())))
    return runs or [Section("part 1", 0, len(text))]


def pick_passage(document: TextDocument, section: Section, passage_chars: int, rng: random.Random) -> Passage:
    """Consecutive whole sentences of the section, from a random one, up to ``passage_chars``."""
    sentences = sentence_spans(document.text, section.start, section.end)
    first = rng.randrange(len(sentences)) if sentences else 0
    if not sentences:
        return Passage(document.id_, section.name, section.start, section.end)
    # Start early enough that the passage can fill up when the random sentence is near the end.
    while first > 0 and sentences[-1][1] - sentences[first][0] < passage_chars:
        first -= 1
    start, end = sentences[first][0], sentences[first][1]
    for _, e in sentences[first + 1:]:
        if e - start > passage_chars:
            break
        end = e
    return Passage(document.id_, section.name, start, min(end, start + max(passage_chars, 1) * 2))


def pick_answer(text: str, passage: Passage, max_words: int, rng: random.Random) -> tuple[int, int] | None:
    """A phrase of the passage to be the answer: a clause (between commas, colons, brackets) of 2 to
    ``max_words`` words with a content word; else a short sentence; None if the passage has neither."""
    candidates = []
    for s, e in sentence_spans(text, passage.start, passage.end):
        cursor = s
        for match in [*_CLAUSE_BREAK.finditer(text, s, e), None]:
            stop = match.start() if match else e
            candidates.append(_trim(text, cursor, stop))
            cursor = match.end() if match else e
        candidates.append(_trim(text, s, e))
    good = [(s, e) for s, e in dict.fromkeys(candidates)
            if e > s and 2 <= len(text[s:e].split()) <= max_words and multilingual_content_words(text[s:e])]
    return rng.choice(good) if good else None


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Without surrounding spaces, a leading conjunction and a final full stop: an answer is a
    phrase, not a sentence or a clause's glue."""
    while start < end and (text[start].isspace() or text[start] in "\"'"):
        start += 1
    glue = _LEADING_GLUE.match(text, start, end)
    if glue:
        start = glue.end()
    while end > start and (text[end - 1].isspace() or text[end - 1] in ".!?\"'"):
        end -= 1
    return start, end
