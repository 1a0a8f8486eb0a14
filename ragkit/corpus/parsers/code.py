"""Source code files read as text; a Python module's docstring is its description."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ragkit.corpus.parsers.parsed import ParsedDocument, short_description
from ragkit.corpus.parsers.plain import read_text
from ragkit.corpus.validation import file_type_of

# The code chunker splits Python by definition, the rest recursively.
CODE_LANGUAGES = {"py": "python", "pyi": "python", "js": "javascript", "ts": "typescript", "java": "java",
                  "go": "go", "rs": "rust", "c": "c", "h": "c", "cpp": "cpp", "hpp": "cpp", "rb": "ruby",
                  "sh": "shell", "sql": "sql", "toml": "toml"}


def parse_code(path: Path) -> list[ParsedDocument]:
    language = CODE_LANGUAGES.get(file_type_of(path), "text")
    text = read_text(path)
    metadata: dict[str, Any] = {"language": language}
    if language == "python":
        try:
            docstring = ast.get_docstring(ast.parse(text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            docstring = None  # not valid Python: still a text document
        if docstring:
            metadata["description"] = short_description(docstring.split("\n\n")[0])
    return [ParsedDocument(text, metadata)]
