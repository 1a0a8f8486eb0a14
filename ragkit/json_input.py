"""JSON a user wrote (question sets, import files, dataset corpora, reviews, label pools, ingested
files, JSON typed into a form), read within bounds.

``json.loads`` reads nesting by recursion: a line of 100,000 nested brackets raises
``RecursionError`` deep in the decoder, which no caller expects. ``parse_json`` refuses

- values nested more than ``MAX_DEPTH`` levels deep (the YAML loader's limit, ``ragkit.yaml_input``),
- a string (value or key) longer than ``max_value_chars`` characters (``RAGKIT_MAX_VALUE_CHARS``),
- an integer longer than Python's digit limit, and any syntax error,

each as a ``JsonInputError`` carrying the line and the problem, so a reader names its file:
``load_json`` turns it into a one-line ``ConfigError`` ("questions.jsonl, line 3: invalid JSON:
values are nested more than 100 levels deep (the limit)"), the ingest into an ``IngestError``.

The limits are checked on the decoded value (a walk that is one loop for a flat JSONL row), and
only a refused text is scanned again to find the line of what broke them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ragkit.errors import ConfigError
from ragkit.quoting import clipped
from ragkit.settings import get_settings
from ragkit.yaml_input import MAX_DEPTH

VALUE_SETTING = "RAGKIT_MAX_VALUE_CHARS"
# A string token or a bracket, for finding where a refused text breaks a limit.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_LONG_INTEGER = re.compile(r"\d{1000,}")


class JsonInputError(ValueError):
    """JSON that cannot be read, or is beyond a limit: ``line`` (1-based, in the file) and ``detail``."""

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(f"line {line}: invalid JSON: {detail}")
        self.line = line
        self.detail = detail


def parse_json(text: str | bytes, first_line: int = 1, max_value_chars: int | None = None) -> Any:
    """The JSON value in ``text`` within the limits above; ``first_line`` is the file line ``text``
    starts on (a JSONL row's), so the error's line is the file's."""
    if max_value_chars is None:
        max_value_chars = get_settings().max_value_chars
    if isinstance(text, bytes):
        try:
            decoded = text.decode("utf-8")
        except UnicodeDecodeError as error:
            line = first_line + text.count(b"\n", 0, error.start)
            raise JsonInputError(line, f"not UTF-8 text ({error.reason})") from None
        return _parse(decoded, first_line, max_value_chars)
    return _parse(text, first_line, max_value_chars)


def _parse(text: str, first_line: int, max_value_chars: int) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        # The end of the input is on the last line with text, not after a trailing line break.
        lineno = min(error.lineno, text.rstrip().count("\n") + 1)
        column = error.colno if lineno == error.lineno else len(text.rstrip().rsplit("\n", 1)[-1]) + 1
        raise JsonInputError(first_line + lineno - 1, f"{error.msg} (column {column})") from None
    except RecursionError:
        raise _too_deep(text, first_line) from None
    except ValueError as error:  # an integer over Python's digit limit
        match = _LONG_INTEGER.search(text)
        line = first_line + (text.count("\n", 0, match.start()) if match else 0)
        raise JsonInputError(line, clipped(str(error).split(";")[0])) from None
    breach = _breach(value, max_value_chars)
    if breach == "depth":
        raise _too_deep(text, first_line)
    if breach == "size":
        raise _too_long(text, first_line, max_value_chars)
    return value


def load_json(text: str | bytes, source: str, first_line: int = 1) -> Any:
    """``parse_json``, its refusal a ConfigError naming ``source`` and the line."""
    try:
        return parse_json(text, first_line)
    except JsonInputError as error:
        raise ConfigError(f"{source}, {error}") from None


def _breach(value: Any, max_chars: int) -> str | None:
    """"depth" or "size" for the first limit ``value`` breaks, else None (an iterative walk: the
    value may be as deep as the decoder's recursion allowed)."""
    if isinstance(value, str):
        return "size" if len(value) > max_chars else None
    if not isinstance(value, (dict, list)):
        return None
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return "depth"
        if isinstance(item, dict):
            for key, child in item.items():
                if len(key) > max_chars:
                    return "size"
                if type(child) is str:
                    if len(child) > max_chars:
                        return "size"
                elif isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
        else:
            for child in item:
                if type(child) is str:
                    if len(child) > max_chars:
                        return "size"
                elif isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
    return None


def _too_deep(text: str, first_line: int) -> JsonInputError:
    depth = 0
    for token in _TOKEN.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return JsonInputError(first_line + text.count("\n", 0, token.start()),
                                      f"values are nested more than {MAX_DEPTH} levels deep (the limit)")
        elif bracket in "]}":
            depth -= 1
    return JsonInputError(first_line, f"values are nested more than {MAX_DEPTH} levels deep (the limit)")


def _too_long(text: str, first_line: int, max_chars: int) -> JsonInputError:
    length, offset = 0, 0
    for token in _TOKEN.finditer(text):
        if len(token.group()) - 2 > max_chars:  # escapes only make the written form longer
            decoded = json.loads(token.group())
            if len(decoded) > max_chars:
                length, offset = len(decoded), token.start()
                break
    where = first_line + text.count("\n", 0, offset)
    return JsonInputError(where, f"a string of {length:,} characters, over the limit of {max_chars:,} "
                                 f"characters per value ({VALUE_SETTING})")
