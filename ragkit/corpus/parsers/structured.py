"""JSON, JSON Lines and YAML files: records as text, top-level keys as sections, BEIR corpus
lines as documents with their own ids."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ragkit.corpus.parsers.parsed import ParsedDocument, title_author
from ragkit.corpus.parsers.plain import read_text
from ragkit.errors import IngestError
from ragkit.json_input import JsonInputError
from ragkit.json_input import parse_json as parse_json_text
from ragkit.yaml_input import parse_yaml_documents

# A top-level key in json.dumps(indent=2): two spaces, never more (nested keys have four or more).
_JSON_TOP_KEY = re.compile(r'^  "((?:[^"\\]|\\.)*)": ', re.MULTILINE)
# A top-level key in block YAML: at column 0, not a comment, a document marker or a list item.
_YAML_TOP_KEY = re.compile(r"^(?![#\-\s.])(?:\"([^\"]*)\"|'([^']*)'|([^:\n]+?))[ \t]*:(?:[ \t]|$)", re.MULTILINE)


def _load_json(text: str, first_line: int = 1) -> Any:
    """``ragkit.json_input.parse_json`` (nesting and value size bounded), every failure an
    IngestError naming the line: syntax, over-long integers, deep nesting, an over-long string."""
    try:
        return parse_json_text(text, first_line)
    except JsonInputError as error:
        raise IngestError(f"invalid JSON on line {error.line}: {error.detail}") from None


def _dump_json(value: Any, indent: int | None = None) -> str:
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False)
    except RecursionError:  # the indenting encoder recurses in Python, deeper than the decoder did
        raise IngestError("JSON nested too deeply to render as text") from None


def _key_sections(text: str, pattern: re.Pattern[str], decode: Callable[[re.Match[str]], str]) -> list[list[Any]]:
    """[start_char, key] per top-level key, so chunks carry the key as their breadcrumb."""
    return [[match.start(), decode(match)] for match in pattern.finditer(text)]


def parse_json(path: Path) -> list[ParsedDocument]:
    value = _load_json(read_text(path))
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return [ParsedDocument(value["text"], title_author(value.get("title"), value.get("author")))]
    text = _dump_json(value, indent=2)
    # An object's top-level keys are its sections; a top-level array has none (its items are
    # records of one kind, which a chunker cuts by size like any list).
    if not isinstance(value, dict):
        return [ParsedDocument(text)]
    sections = _key_sections(text, _JSON_TOP_KEY, lambda match: json.loads(f'"{match.group(1)}"'))
    return [ParsedDocument(text, {"sections": sections} if sections else {})]


def parse_yaml(path: Path) -> list[ParsedDocument]:
    """The file's own text (so answer spans and line numbers match it), checked to be YAML with
    ``yaml.safe_load`` within the bounds of ``ragkit.yaml_input``, its top-level keys as sections."""
    text = read_text(path)
    try:
        parse_yaml_documents(text)
    except yaml.YAMLError as error:
        raise IngestError(f"invalid YAML: {str(error).splitlines()[0]}") from None
    except RecursionError:
        raise IngestError("invalid YAML: nested too deeply to read") from None
    sections = _key_sections(text, _YAML_TOP_KEY, lambda match: next(g for g in match.groups() if g is not None))
    return [ParsedDocument(text, {"sections": sections} if sections else {})]


def parse_jsonl(path: Path) -> list[ParsedDocument]:
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if line.strip():
            records.append((number, _load_json(line, number)))
    if records and all(_is_beir_record(record) for _, record in records):
        return _beir_documents(records)
    texts = [
        record["text"] if isinstance(record, dict) and isinstance(record.get("text"), str)
        else _dump_json(record)
        for _, record in records
    ]
    return [ParsedDocument("\n".join(texts))]


def _is_beir_record(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("text"), str) and ("_id" in record or "id" in record)


def _beir_documents(records: list[tuple[int, Any]]) -> list[ParsedDocument]:
    documents, seen = [], set()
    for number, record in records:
        own_id = str(record["_id"] if "_id" in record else record["id"])
        if own_id in seen:
            raise IngestError(f"duplicate document id '{own_id}' on line {number}")
        seen.add(own_id)
        metadata = {"title": record["title"]} if isinstance(record.get("title"), str) and record["title"] else {}
        documents.append(ParsedDocument(record["text"], metadata, own_id=own_id))
    return documents
