"""Questions from the documents' own structure, no LLM: every answer is an exact character span.

Four kinds (the question's ``type``), each read from the document text as ragkit's parsers write it:

- ``table``: a table row, "What was <row label> for <column header>?", the cell as the answer.
  Rows are read in the three shapes the parsers leave: CSV lines ("column: value; column: value",
  the first column's value the row label), pipe rows (DOCX "a | b | c" and Markdown "| a | b |",
  the first row the header) and PDF statement lines ("Net revenue 12,345 11,002" under a header
  line of periods, one per figure: "2026 2025", "FY2024 FY2023", "Q3 Q2"). HTML tables are not
  read: the HTML parser puts each cell on a line of its own, so rows cannot be told apart.
- ``heading``: a section heading as the query (the ``sections`` metadata, else a short line without
  final punctuation before a paragraph); the section's body (its first 2,000 characters) is the
  answer span, so any chunk of the section is relevant.
- ``definition``: "What is X?" from a sentence "X is/are/refers to/means a ...", the rest of the
  sentence as the answer.
- ``cloze``: a sentence with a number, date or name taken out ("... in ___ ...: when?"), the
  phrase as the answer (``answer_types``).

Sampling reuses the LLM generator's balance: the i-th question goes to the i-th document of a
seeded shuffle, round robin over the documents that still have candidates, and wants the i-th
type of a seeded shuffle of the asked types (another type of the same document when it has none).
The same documents, types, n and seed give the same set. Duplicates and templates are dropped as
the LLM generator drops them; rows and record have its format, ``method: "extractive"`` added.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragkit.errors import ConfigError
from ragkit.questions.dedup import Embed, find_duplicates
from ragkit.questions.generation.answer_types import AnswerType, typed_spans
from ragkit.questions.generation.generate import GeneratedSet, find_templates
from ragkit.questions.generation.outcome import yield_outcome
from ragkit.questions.generation.sampling import EXTRACTIVE_TYPES, TextDocument, document_sections, type_counts
from ragkit.questions.wording import normalise_question, word_overlap
from ragkit.text import FUNCTION_WORDS, multilingual_content_words, sentence_spans

RECORD_FORMAT = 1
HEADING_BODY_CHARS = 2000
_CLOZE_ASK: dict[AnswerType, str] = {"number": "how much", "date": "when", "name": "who"}
_NUMBER_CELL = r"\(?-?\$?\d[\d,]*(?:\.\d+)?%?\)?"
_STATEMENT_ROW = re.compile(rf"^(?P<label>[A-Za-z][^\d\n]*?[A-Za-z)])(?P<cells>(?:[ \t]+{_NUMBER_CELL})+)[ \t]*$")
_CELL = re.compile(rf"{_NUMBER_CELL}")
_PERIOD = re.compile(r"(?:FY|Q[1-4] ?)?'?(?:19|20)\d{2}|Q[1-4]|H[12]")  # a statement's column: 2025, FY2024, Q3
_CSV_CELL = re.compile(r"(?:^|; )(?P<column>[^:;\n]{1,60}): (?P<value>[^;\n]*)")
_CSV_SEGMENT = re.compile(r"[^:;\n]{1,60}: [^:;\n]{1,80}")  # every "; " part of a CSV row is "column: value"
# "X is a ...", "The X (ABC) are the ...": at the start of a sentence (after a "Label:" prefix).
_DEFINITION = re.compile(
    r"(?P<term>[A-Z][\w-]*(?: [\w-]+){0,3}?)(?: \([A-Za-z0-9-]{2,12}\))? "
    r"(?P<verb>is|are|refers to|means) (?P<definition>(?:a|an|the|any) [^.;]{10,200})")
_LABEL = re.compile(r"(?:[A-Z][\w-]*(?: [\w-]+){0,2}: )+")  # "Abstract: ", "Text: ", "IMPORTANCE: "
_CLOZE_WORDS = 14  # words kept on each side of the blank
_GENERIC_HEADINGS = frozenset(
    "abstract introduction background methods method materials results discussion conclusion conclusions "
    "references acknowledgements acknowledgments appendix summary contents text overview notes".split())
_TERM_STARTS = frozenset("it this that these those there which what who he she they we one each here such "
                         "its their our".split())
_METADATA_LABELS = ("authors", "author", "doi", "sha", "license", "date", "keywords", "affiliations")


@dataclass(frozen=True)
class Candidate:
    """One possible question: its text, type, the answer span and the passage it is read from."""

    type: str
    question: str
    doc_id: str
    section: str
    answer: tuple[int, int]
    passage: tuple[int, int]


def document_candidates(document: TextDocument) -> dict[str, list[Candidate]]:
    """Every question the document's structure offers, by type, in document order."""
    found: dict[str, list[Candidate]] = {kind: [] for kind in EXTRACTIVE_TYPES}
    text, doc_id = document.text, document.id_
    found["table"] = table_candidates(text, doc_id)
    found["heading"] = heading_candidates(document)
    table_lines = {c.passage for c in found["table"]}
    for start, end in sentence_spans(text):
        if (start, end) in table_lines or end - start < 30 or "://" in text[start:end]:
            continue
        found["definition"].extend(_definitions(text, doc_id, start, end))
        found["cloze"].extend(_clozes(text, doc_id, start, end))
    return found


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def table_candidates(text: str, doc_id: str) -> list[Candidate]:
    found: list[Candidate] = []
    lines = _lines(text)
    header: list[tuple[int, int]] | None = None  # the current pipe table's header cells
    header_words: list[str] | None = None  # the last line that could head a statement's figures
    for start, end in lines:
        line = text[start:end]
        if "|" in line and not set(line.strip()) <= set("|-: "):
            cells = _pipe_cells(text, start, end)
            if header is None or len(cells) != len(header):
                header = cells
                continue
            found.extend(_row_questions(text, doc_id, cells[0], list(zip(header[1:], cells[1:])), (start, end)))
            continue
        if set(line.strip()) <= set("|-: ") and line.strip():
            continue  # a Markdown table's rule line
        header = None
        if "; " in line and all(_CSV_SEGMENT.fullmatch(segment) for segment in line.split("; ")):
            pairs = [((start + m.start("column"), start + m.end("column")),
                      (start + m.start("value"), start + m.end("value"))) for m in _CSV_CELL.finditer(line)]
            if len(pairs) >= 2 and pairs[0][1][1] > pairs[0][1][0]:
                # The first column's value names the row: "Region: North; Cases: 120".
                found.extend(_row_questions(text, doc_id, pairs[0][1], pairs[1:], (start, end)))
                continue
        statement = _STATEMENT_ROW.match(line)
        if statement and header_words:
            figures = [(start + statement.start("cells") + m.start(), start + statement.start("cells") + m.end())
                       for m in _CELL.finditer(statement.group("cells"))]
            if len(figures) == len(header_words):
                label = (start + statement.start("label"), start + statement.end("label"))
                found.extend(_statement_questions(text, doc_id, label, header_words, figures, (start, end)))
                continue
        tokens = line.split()
        if tokens and len(tokens) <= 8 and all(_PERIOD.fullmatch(token) for token in tokens):
            header_words = tokens
        elif line.strip() and not statement:
            header_words = None
    return found


def _pipe_cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Offsets of each cell of a pipe row, without the empty ends of "| a | b |"."""
    parts = text[start:end].split("|")
    cells, cursor = [], start
    for index, part in enumerate(parts):
        if part.strip() or 0 < index < len(parts) - 1:
            left = len(part) - len(part.lstrip())
            cells.append((cursor + left, cursor + left + len(part.strip())))
        cursor += len(part) + 1
    return cells


def _row_questions(text: str, doc_id: str, label: tuple[int, int], pairs: list[tuple[tuple[int, int], tuple[int, int]]],
                   row: tuple[int, int]) -> list[Candidate]:
    name = text[label[0]:label[1]].strip()
    if not multilingual_content_words(name):
        return []
    return [Candidate("table", f"What was {name} for {text[c[0]:c[1]].strip()}?", doc_id, "table", v, row)
            for c, v in pairs if v[1] > v[0] and text[c[0]:c[1]].strip() and text[v[0]:v[1]].strip()]


def _statement_questions(text: str, doc_id: str, label: tuple[int, int], columns: list[str],
                         figures: list[tuple[int, int]], row: tuple[int, int]) -> list[Candidate]:
    name = text[label[0]:label[1]].strip()
    return [Candidate("table", f"What was {name} for {column}?", doc_id, "table", figure, row)
            for column, figure in zip(columns, figures)]


def heading_candidates(document: TextDocument) -> list[Candidate]:
    text = document.text
    marks = document.metadata.get("sections") or []
    headings: list[tuple[str, int, int]] = []  # (heading, body start, body end)
    if marks:
        for section in document_sections(document, 2000):
            if section.name.startswith("part "):
                continue
            line_end = text.find("\n", section.start, section.end)
            body = line_end + 1 if line_end >= 0 else section.start
            headings.append((section.name.split(" > ")[-1], body, section.end))
    else:
        lines = _lines(text)
        for index, (start, end) in enumerate(lines[:-1]):
            line = text[start:end].strip()
            following = [(s, e) for s, e in lines[index + 1:index + 3] if text[s:e].strip()]
            if not following or not _looks_like_heading(line):
                continue
            body_start = following[0][0]
            if following[0][1] - body_start >= 200:
                headings.append((line, body_start, len(text)))
        headings = [(name, body, next((b for _, b, _ in headings if b > body), end))
                    for name, body, end in headings]
    found = []
    for name, body, end in headings:
        end = min(end, body + HEADING_BODY_CHARS)
        while end > body and text[end - 1].isspace():
            end -= 1
        words = multilingual_content_words(name)
        if len(words) < 2 or name.casefold().strip(" :") in _GENERIC_HEADINGS or end - body < 100:
            continue
        found.append(Candidate("heading", name, document.id_, name, (body, end), (body, end)))
    return found


def _looks_like_heading(line: str) -> bool:
    """A short capitalised line without final punctuation that does not end on a function word
    (a line broken mid-sentence does: "... the leading causes of")."""
    tokens = line.split()
    return (2 <= len(tokens) <= 12 and line[:1].isupper() and line[-1] not in ".,;:" and "://" not in line
            and not re.match(r"^[\w -]{1,30}: ", line) and tokens[-1].casefold() not in FUNCTION_WORDS)


def _sentence_body(text: str, start: int, end: int) -> tuple[int, str] | None:
    """Where the sentence's own words start (after a "Label: " prefix), and the label; None for a
    metadata line ("Authors: ...", "DOI: ...")."""
    label = _LABEL.match(text, start, end)
    if label is None:
        return start, ""
    if label.group(0).split(":")[0].strip().casefold() in _METADATA_LABELS:
        return None
    return label.end(), label.group(0)


def _definitions(text: str, doc_id: str, start: int, end: int) -> list[Candidate]:
    body = _sentence_body(text, start, end)
    if body is None:
        return []
    match = _DEFINITION.match(text, body[0], end)
    if match is None:
        return []
    term = match.group("term").strip()
    if term.split()[0].casefold() in _TERM_STARTS or not multilingual_content_words(term):
        return []
    article, _, rest = term.partition(" ")
    if article in ("A", "An", "The") and rest:
        term = f"{article.lower()} {rest}"  # "What is a coronavirus?", the sentence's capital dropped
    verb = "are" if match.group("verb") == "are" else "is"
    return [Candidate("definition", f"What {verb} {term}?", doc_id, "", match.span("definition"), (start, end))]


def _clozes(text: str, doc_id: str, start: int, end: int) -> list[Candidate]:
    body = _sentence_body(text, start, end)
    if body is None:
        return []
    found = []
    for kind in ("number", "date", "name"):
        for s, e in typed_spans(text, kind, body[0], end)[:1]:  # one question per type and sentence
            before = text[body[0]:s].split()[-_CLOZE_WORDS:]
            after = text[e:end].rstrip().rstrip(".!?").split()[:_CLOZE_WORDS]
            if len(before) + len(after) < 5:
                continue
            question = " ".join([*before, "___", *after]) + f": {_CLOZE_ASK[kind]}?"
            found.append(Candidate("cloze", question, doc_id, "", (s, e), (start, end)))
    return found


def plan_extractive(documents: Sequence[TextDocument], n: int, types: Sequence[str], seed: int) -> list[Candidate]:
    """``n`` candidates (fewer when the documents offer fewer), balanced over documents, then types."""
    rng = random.Random(seed)
    order = sorted(documents, key=lambda d: d.id_)
    rng.shuffle(order)
    pools: dict[str, dict[str, list[Candidate]]] = {}
    for document in order:
        offered = document_candidates(document)
        pools[document.id_] = {kind: _shuffled(offered[kind], rng) for kind in types if offered[kind]}
    kinds = [kind for kind, count in type_counts(n, types).items() for _ in range(count)]
    rng.shuffle(kinds)
    live = [d.id_ for d in order if pools[d.id_]]
    if not live:
        raise ConfigError(f"no document offers a question of type {', '.join(types)} (tables, headings, "
                          "definitions, figures); try --method llm")
    chosen: list[Candidate] = []
    turn = 0
    for kind in kinds:
        while live:
            doc_id = live[turn % len(live)]
            pool = pools[doc_id]
            available = [kind] if kind in pool else []
            available += [other for other in types if other in pool and other != kind]
            if available:
                chosen.append(pool[available[0]].pop())
                if not pool[available[0]]:
                    del pool[available[0]]
                turn += 1
                break
            live.remove(doc_id)  # exhausted: the others keep their turns
        if not live:
            break
    return chosen


def _shuffled(items: list[Candidate], rng: random.Random) -> list[Candidate]:
    items = list(items)
    rng.shuffle(items)
    return items


def generate_extractive(documents: Sequence[TextDocument], params: Any, *, embed: Embed | None = None,
                        corpus: str = "", clock: Callable[[], float] = time.perf_counter) -> GeneratedSet:
    """A GeneratedSet (rows, dropped, record) from ``params`` (GenerationParams: n, types, seed,
    duplicate_threshold)."""
    started = clock()
    texts = {d.id_: d.text for d in documents}
    planned = plan_extractive(documents, params.n, params.types, params.seed)
    templates = find_templates([((c.doc_id, c.answer), c.question) for c in planned])
    dropped: list[dict[str, Any]] = []
    kept: list[tuple[int, Candidate]] = []
    for number, candidate in enumerate(planned):
        count = templates.get(normalise_question(candidate.question))
        if count is not None:
            dropped.append(_dropped(number, candidate, "duplicate",
                                    f"a template: the same question stands for {count} different answers"))
        else:
            kept.append((number, candidate))
    repeated = {d.index: d for d in find_duplicates([c.question for _, c in kept], embed, params.duplicate_threshold)}
    rows = []
    for index, (number, candidate) in enumerate(kept):
        if index in repeated:
            other = kept[repeated[index].of][1].question
            dropped.append(_dropped(number, candidate, "duplicate", f"repeats {other!r} ({repeated[index].how})"))
        else:
            rows.append(_row(number, candidate, texts[candidate.doc_id]))
    by_reason = dict(Counter(item["reason"] for item in dropped))
    record = {
        "format": RECORD_FORMAT, "method": "extractive",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "corpus": corpus, "model": None, "params": params.model_dump(mode="json"), "seed": params.seed,
        "asked": params.n, "planned": len(planned), "kept": len(rows), "calls": 0, "backend_calls": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "seconds": round(clock() - started, 3),
        "by_type": dict(Counter(row["type"] for row in rows)),
        "duplicates_by": "normalised text and embedding cosine" if embed else "normalised text",
        "dropped_by_reason": by_reason, "dropped": dropped,
    }
    record["outcome"] = yield_outcome(params.n, len(rows), by_reason, method="extractive")
    return GeneratedSet(rows=rows, dropped=dropped, record=record)


def _dropped(number: int, candidate: Candidate, reason: str, detail: str) -> dict[str, Any]:
    return {"slot": number, "type": candidate.type, "doc_id": candidate.doc_id, "question": candidate.question,
            "reason": reason, "detail": detail}


def _row(number: int, candidate: Candidate, text: str) -> dict[str, Any]:
    start, end = candidate.answer
    passage = {"doc_id": candidate.doc_id, "section": candidate.section, "start": candidate.passage[0],
               "end": candidate.passage[1]}
    overlap = word_overlap(candidate.question, text[candidate.passage[0]:candidate.passage[1]])
    return {"id": f"q{number + 1:04d}", "question": candidate.question, "doc_id": candidate.doc_id,
            "answer": text[start:end], "answer_start": start, "answer_end": end, "type": candidate.type,
            "method": "extractive",
            "generation": {"method": "extractive", "passages": [passage], "word_overlap": round(overlap, 4)}}
