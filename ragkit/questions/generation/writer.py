"""Writing a generated (or reviewed) set: SQuAD-style JSONL rows plus the generation record.

``--out`` ending in ``.jsonl`` is that file, with the record beside it (``<stem>.generation.json``);
anything else is a folder holding ``questions.jsonl``, ``generation.json`` and, when the corpus
came from a dataset folder, a copy of its ``corpus.jsonl``, so an experiment can name the folder
as its dataset with no corpus setting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.storage.atomic import make_dirs, write_bytes_atomic, write_json_atomic

QUESTIONS_FILE = "questions.jsonl"
RECORD_FILE = "generation.json"


def set_paths(out: Path) -> tuple[Path, Path]:
    """(questions file, record file) for an ``--out`` value."""
    if out.suffix.lower() == ".jsonl":
        return out, out.with_name(f"{out.stem}.generation.json")
    return out / QUESTIONS_FILE, out / RECORD_FILE


def check_out(out: Path) -> None:
    """Refuse an --out that would overwrite something that is not a question set of ours."""
    questions, _ = set_paths(out)
    if out.suffix.lower() != ".jsonl" and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a folder or a .jsonl file name")
    if questions.is_dir():
        raise ConfigError(f"--out {out}: {questions} is a folder")
    if questions.exists():
        # A set may have a review beside it: writing a new set under it would mix the two.
        raise ConfigError(f"--out {out} already holds a question set ({questions}); give a new folder or file")


def write_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    make_dirs(path.parent)
    write_bytes_atomic(path, text.encode("utf-8"))


def read_rows(path: Path) -> list[dict[str, Any]]:
    from ragkit.questions.rows import file_in, jsonl_rows

    return [row for _, row in jsonl_rows(file_in(path, QUESTIONS_FILE))]


def write_set(out: Path, rows: list[dict[str, Any]], record: dict[str, Any], corpus_file: Path | None = None) -> Path:
    """Write the rows and the record (and the corpus copy into a folder); returns the questions file."""
    check_out(out)
    questions, record_path = set_paths(out)
    write_rows(questions, rows)
    write_json_atomic(record_path, record)
    if corpus_file is not None and out.suffix.lower() != ".jsonl":
        target = out / "corpus.jsonl"
        if corpus_file.resolve() != target.resolve():
            write_bytes_atomic(target, corpus_file.read_bytes())
    return questions
