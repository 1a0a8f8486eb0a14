"""Row helpers: every error names where it happened, blank lines are skipped, not dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import Question
from ragkit.questions.rows import duplicates, file_in, first_row_has_offsets, jsonl_rows, numbered_lines, parse_row

pytestmark = pytest.mark.unit


def test_parse_row_names_the_place_and_each_field() -> None:
    with pytest.raises(ConfigError, match=r"^q\.jsonl, line 3: id: Field required; text: Field required$"):
        parse_row(Question, {"answers": ["x"]}, "q.jsonl, line 3")


def test_bad_group_numbering_read_from_a_file_is_a_config_error_naming_the_question() -> None:
    row = {"id": "q7", "text": "Which?", "relevant_docs": {"d": 1},
           "spans": [{"doc_id": "d", "start": 0, "end": 1, "group": 1}]}
    with pytest.raises(ConfigError, match=r"q\.jsonl, line 3: .*question q7: span groups must be numbered 0\.\.G-1"):
        parse_row(Question, row, "q.jsonl, line 3")


def test_numbered_lines_skip_blank_lines_but_keep_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('\ufeff{"a": 1}\r\n\n  \n{"b": 2}\n', encoding="utf-8")
    assert list(numbered_lines(path)) == [(1, '{"a": 1}'), (4, '{"b": 2}')]
    assert list(jsonl_rows(path)) == [(1, {"a": 1}), (4, {"b": 2})]


def test_jsonl_rows_reject_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"a\.jsonl, line 2: expected a JSON object, got list"):
        list(jsonl_rows(path))


def test_first_row_has_offsets(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('\n{"question": "Q", "answer_start": 3}\n', encoding="utf-8")
    assert first_row_has_offsets(path)
    path.write_text('{"question": "Q"}\n{"answer_start": 3}\n', encoding="utf-8")
    assert not first_row_has_offsets(path)
    path.write_text("{broken\n", encoding="utf-8")
    assert not first_row_has_offsets(path)


def test_file_in_and_duplicates(tmp_path: Path) -> None:
    (tmp_path / "questions.csv").write_text("question\n", encoding="utf-8")
    assert file_in(tmp_path, "questions.csv") == tmp_path / "questions.csv"
    with pytest.raises(ConfigError, match=r"expected file not found: .*questions\.jsonl"):
        file_in(tmp_path, "questions.jsonl")
    assert duplicates(["b", "a", "b", "c", "a"]) == ["a", "b"]
