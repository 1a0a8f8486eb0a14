"""Turning an LLM's reply into a validated object, or into an error that says what was wrong.

Small models wrap JSON in code fences, put prose around it and leave trailing commas; those
are repaired here. Anything else is an error with the reason, never a default value: a judge
that cannot read its reply falls back to judge-off behaviour and counts the reply as invalid.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str, schema_model: type[ModelT]) -> tuple[ModelT | None, str | None]:
    """``(object, None)`` if ``text`` holds JSON valid for ``schema_model``, else ``(None, reason)``."""
    if not text or not text.strip():
        return None, "empty reply"
    candidate = extract_json_text(text)
    if candidate is None:
        return None, f"no JSON object in reply: {_preview(text)}"
    try:
        value = json.loads(_drop_trailing_commas(candidate))
    except json.JSONDecodeError as error:
        return None, f"invalid JSON ({error.msg} at char {error.pos}): {_preview(candidate)}"
    try:
        return schema_model.model_validate(value), None
    except ValidationError as error:
        return None, "JSON does not match the schema: " + _describe(error)


def extract_json_text(text: str) -> str | None:
    """The JSON part of a reply: the whole text, a fenced block, or the first balanced {...}/[...]."""
    stripped = text.strip()
    if stripped[:1] in "{[" and _balanced_end(stripped, 0) == len(stripped):
        return stripped
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    for start, char in enumerate(text):
        if char in "{[":
            end = _balanced_end(text, start)
            if end is not None:
                return text[start:end]
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket closing the one at ``start``, skipping brackets in strings."""
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _drop_trailing_commas(text: str) -> str:
    """Remove commas directly before a closing bracket, outside of strings."""
    out: list[str] = []
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            rest = text[index + 1 :].lstrip()
            if rest[:1] in ("}", "]"):
                continue
        out.append(char)
    return "".join(out)


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(root)"
        problems.append(f"field '{field}': {item['msg']} (got {item.get('input')!r})")
    return "; ".join(problems)


def _preview(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


def schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to a backend to constrain its reply."""
    return model.model_json_schema()
