"""CSV files: one line per row, each cell as "column: value"."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ragkit.corpus.parsers.parsed import ParsedDocument
from ragkit.corpus.parsers.plain import read_text
from ragkit.errors import IngestError


def parse_csv(path: Path) -> list[ParsedDocument]:
    # The csv module rather than pandas: pandas renames repeated column names in quadratic time
    # (a 20 KB header of one repeated name took a minute) and builds a frame we do not need.
    rows: list[list[str]] = []
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        for row in reader:
            if rows and len(row) > len(rows[0]):
                raise IngestError(
                    f"malformed CSV: line {reader.line_num} has {len(row)} fields, the header {len(rows[0])}"
                )
            if any(cell.strip() for cell in row):
                rows.append(row)
    except csv.Error as error:  # e.g. a field over csv.field_size_limit(), an unclosed quote at the end
        raise IngestError(f"malformed CSV: {error} (line {reader.line_num})") from None
    if not rows:
        raise IngestError("no extractable text")
    columns = [name or f"column {number}" for number, name in enumerate(rows[0], start=1)]
    # Empty cells are left out: a sparse table would otherwise be mostly "col: ;" noise.
    lines = [
        "; ".join(f"{column}: {value}" for column, value in zip(columns, row) if value.strip()) for row in rows[1:]
    ]
    return [ParsedDocument("\n".join(lines), {"columns": columns, "rows": len(rows) - 1})]
