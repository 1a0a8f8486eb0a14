"""Python source: one chunk per top-level function or class, module code between them grouped.

Offsets come from ``ast`` line numbers at whole-line granularity (col_offset counts UTF-8
bytes, lines do not), so decorators, trailing comments and the comment block right above a
definition stay with it. Text that is not Python falls back to recursive splitting, marked
with ``chunk_fallback: "recursive"`` so the fallback is visible in the chunk set.

Each Python chunk records what it holds, for filters, prompts and the reader: ``function`` and
``class`` (its enclosing class for a method), ``signature`` (``def name(args) -> ret`` or
``class Name(bases)``), the first line of its ``docstring``, and the module's ``imports``
(top-level, at most 20). Other languages get none of these: only Python is parsed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from ragkit.chunkers.base import Chunker, Span
from ragkit.chunkers.params import CodeChunkerInfo, CodeParams
from ragkit.chunkers.recursive import recursive_spans

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_PYTHON_SUFFIXES = ("", ".py", ".pyi", ".pyw")
_NEWLINE = re.compile(r"\r\n|\r|\n")  # the line breaks Python's tokenizer counts


class CodeChunker(CodeChunkerInfo, Chunker):
    params: CodeParams

    def split_spans(self, text: str, metadata: Mapping[str, Any]) -> list[Span]:
        module = _parse_python(text, metadata)
        if module is None:
            p = self.params
            pieces = recursive_spans(text, 0, len(text), p.fallback_chunk_size, p.chunk_overlap)
            return [Span(start, end, {"chunk_fallback": "recursive"}) for start, end in pieces]
        line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)] + [len(text)]
        spans = self._segment(text, line_starts, module.body, 1, len(line_starts) - 1, [])
        imports = module_imports(module)
        if imports:
            spans = [Span(span.start, span.end, {**span.metadata, "imports": imports}) for span in spans]
        return spans

    def _segment(
        self, text: str, line_starts: list[int], body: list[ast.stmt], first: int, last: int, trail: list[str]
    ) -> list[Span]:
        """Spans for lines first..last (1-based): each definition in ``body`` and the code between."""
        spans: list[Span] = []
        cursor = first
        for statement in body:
            if not isinstance(statement, _DEFINITIONS):
                continue
            start = _definition_start(text, line_starts, statement, floor=cursor)
            if start > cursor:
                spans.extend(self._piece(text, line_starts, cursor, start - 1, trail))
            end = statement.end_lineno or statement.lineno
            too_long = line_starts[end] - line_starts[start - 1] > self.params.max_chars
            if too_long and isinstance(statement, ast.ClassDef):
                spans.extend(
                    self._segment(text, line_starts, statement.body, start, end, [*trail, statement.name])
                )
            else:
                spans.extend(self._piece(text, line_starts, start, end, [*trail, statement.name],
                                         definition_metadata(statement, trail)))
            cursor = end + 1
        if cursor <= last:
            spans.extend(self._piece(text, line_starts, cursor, last, trail))
        return spans

    def _piece(self, text: str, line_starts: list[int], first: int, last: int, trail: list[str],
               described: dict[str, Any] | None = None) -> list[Span]:
        start, end = line_starts[first - 1], line_starts[last]
        extra: dict[str, Any] = {"breadcrumb": " > ".join(trail)} if trail else {}
        extra.update(described or {})
        if described is None and trail:  # code inside a class, between its methods
            extra["class"] = trail[-1]
        pieces = recursive_spans(text, start, end, self.params.max_chars, self.params.chunk_overlap)
        return [Span(s, e, extra) for s, e in pieces]


MAX_IMPORTS = 20
DOCSTRING_CHARS = 200


def module_imports(module: ast.Module) -> list[str]:
    """The modules a file imports at top level, in order, once each (at most MAX_IMPORTS)."""
    names: list[str] = []
    for statement in module.body:
        if isinstance(statement, ast.Import):
            names += [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            names.append("." * statement.level + (statement.module or ""))
    return list(dict.fromkeys(names))[:MAX_IMPORTS]


def definition_metadata(statement: ast.stmt, trail: list[str]) -> dict[str, Any]:
    """function / class / signature / docstring of one top-level or class-level definition."""
    meta: dict[str, Any] = {}
    if isinstance(statement, ast.ClassDef):
        bases = ", ".join(ast.unparse(base) for base in statement.bases)
        meta.update({"class": statement.name, "signature": f"class {statement.name}({bases})" if bases
                     else f"class {statement.name}"})
    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        prefix = "async def" if isinstance(statement, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(statement.returns)}" if statement.returns is not None else ""
        meta["function"] = statement.name
        meta["signature"] = f"{prefix} {statement.name}({ast.unparse(statement.args)}){returns}"
        if trail:  # a method: the class it belongs to
            meta["class"] = trail[-1]
    if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        docstring = ast.get_docstring(statement)
        if docstring:
            meta["docstring"] = docstring.strip().splitlines()[0][:DOCSTRING_CHARS]
    return meta


def _parse_python(text: str, metadata: Mapping[str, Any]) -> ast.Module | None:
    """The module's syntax tree, or None when the document is not Python source."""
    name = str(metadata.get("file_name") or metadata.get("file_path") or "")
    if PurePosixPath(name).suffix.lower() not in _PYTHON_SUFFIXES:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _definition_start(text: str, line_starts: list[int], definition: ast.stmt, floor: int) -> int:
    """First line of a definition: its decorators and the comment lines directly above it."""
    decorators = getattr(definition, "decorator_list", [])
    line = min([definition.lineno] + [d.lineno for d in decorators])
    while line - 1 >= floor and text[line_starts[line - 2] : line_starts[line - 1]].lstrip().startswith("#"):
        line -= 1
    return max(line, floor)
