"""Row-reading helpers shared by the question-set readers (not part of the package's API).

Every reader reports a bad row as a ConfigError that names the file and line (or JSON path), so
nothing is dropped quietly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ragkit.errors import LOCATION_PART_CHARS, MAX_PROBLEMS, PROBLEM_CHARS, ConfigError
from ragkit.json_input import JsonInputError, load_json, parse_json
from ragkit.quoting import clipped


class RowModel(BaseModel):
    """A row as a user wrote it: unknown fields are ignored, numeric ids read as strings."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, populate_by_name=True)


def parse_row(model: type[BaseModel], obj: Any, where: str) -> Any:
    """Validate one row; ``where`` names the file and line (or JSON path) in the error."""
    try:
        return model.model_validate(obj)
    except ValidationError as error:
        parts = []
        for item in error.errors(include_url=False):
            field = ".".join(clipped(str(part), LOCATION_PART_CHARS) for part in item["loc"])
            message = clipped(item["msg"].removeprefix("Value error, "), PROBLEM_CHARS)
            parts.append(f"{field}: {message}" if field else message)
        distinct = list(dict.fromkeys(parts))
        more = [f"and {len(distinct) - MAX_PROBLEMS} more problem(s)"] if len(distinct) > MAX_PROBLEMS else []
        raise ConfigError(f"{where}: {'; '.join(distinct[:MAX_PROBLEMS] + more)}") from None


def duplicates(ids: Iterable[str]) -> list[str]:
    return sorted(question_id for question_id, count in Counter(ids).items() if count > 1)


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for every non-blank line; text that is not UTF-8 is a
    ConfigError naming the last line read (the decoder reads ahead, so not the exact one)."""
    with open(path, encoding="utf-8-sig") as handle:
        line_no = 0
        try:
            for line_no, line in enumerate(handle, start=1):
                if line.strip():
                    yield line_no, line.rstrip("\r\n")
        except UnicodeDecodeError as error:
            raise ConfigError(f"{path}: not UTF-8 text after line {line_no} ({error.reason})") from None


def read_bytes(path: Path) -> bytes:
    """A whole JSON file's bytes (``ragkit.json_input`` decodes them), a leading UTF-8 byte-order
    mark dropped as ``numbered_lines`` drops it."""
    return path.read_bytes().removeprefix(b"\xef\xbb\xbf")


def jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line, each read by ``ragkit.json_input`` (nesting
    and value size bounded); anything but an object is a ConfigError naming the line."""
    for line_no, line in numbered_lines(path):
        obj = load_json(line, str(path), line_no)
        if not isinstance(obj, dict):
            raise ConfigError(f"{path}, line {line_no}: expected a JSON object, got {type(obj).__name__}")
        yield line_no, obj


def first_row_has_offsets(path: Path) -> bool:
    """True if the first row of a JSONL file carries ``answer_start`` (the squad layout)."""
    for line_no, line in numbered_lines(path):
        try:
            obj = parse_json(line, line_no)
        except JsonInputError:
            return False  # the loader reports the bad line
        return isinstance(obj, dict) and "answer_start" in obj
    return False


def file_in(path: Path, default_name: str) -> Path:
    """The file itself, or default_name inside a folder; a missing file names the path expected."""
    target = path / default_name if path.is_dir() else path
    if not target.is_file():
        raise ConfigError(f"expected file not found: {target}")
    return target
