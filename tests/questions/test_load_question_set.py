"""load_question_set and detect_format: format choice, limits, and errors that name the path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import detect_format, load_question_set
from tests.questions.conftest import SQUAD_ROWS, write_jsonl

pytestmark = pytest.mark.unit


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(SQUAD_ROWS[0]) + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"qa\.jsonl, line 3: invalid JSON"):
        load_question_set(path)


def test_duplicate_question_ids_are_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [SQUAD_ROWS[0], SQUAD_ROWS[0]])
    with pytest.raises(ConfigError, match=r"qa\.jsonl: duplicate question ids: s1"):
        load_question_set(path)


def test_limit_keeps_the_first_questions_in_file_order(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "answer": "yes"} for i in range(10)]
    path = write_jsonl(tmp_path / "many.jsonl", rows)
    assert [q.id for q in load_question_set(path, limit=3).questions] == ["q0", "q1", "q2"]
    assert len(load_question_set(path, limit=50).questions) == 10
    with pytest.raises(ConfigError, match="limit must be > 0, got 0"):
        load_question_set(path, limit=0)


def test_generic_file_names_take_the_folder_name(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "vaccines" / "questions.jsonl", [{"question": "Why?", "answer": "Because"}])
    assert load_question_set(path).name == "vaccines"
    assert load_question_set(path, name="mine").name == "mine"


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ("beir_folder", "beir"),
        ("squad_folder", "squad"),
        ("squad_and_qrels_folder", "squad"),
        ("squad_jsonl", "squad"),
        ("plain_jsonl", "jsonl"),
        ("csv", "csv"),
    ],
)
def test_auto_detection(layout: str, expected: str, beir_dir: Path, tmp_path: Path) -> None:
    plain = [{"question": "Why?", "answer": "Because"}]

    def write_csv() -> Path:
        path = tmp_path / "c.csv"
        path.write_text("question,answer\nWhy?,Because\n", encoding="utf-8")
        return path

    paths = {
        "beir_folder": lambda: beir_dir,
        "squad_folder": lambda: write_jsonl(tmp_path / "sq" / "questions.jsonl", SQUAD_ROWS).parent,
        "squad_and_qrels_folder": lambda: write_jsonl(beir_dir / "questions.jsonl", SQUAD_ROWS).parent,
        "squad_jsonl": lambda: write_jsonl(tmp_path / "a.jsonl", SQUAD_ROWS),
        "plain_jsonl": lambda: write_jsonl(tmp_path / "b.jsonl", plain),
        "csv": write_csv,
    }
    assert load_question_set(paths[layout]()).format == expected


def test_detection_failures_say_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"expected qrels/ \(beir\), questions\.jsonl"):
        detect_format(tmp_path)
    odd = tmp_path / "q.txt"
    odd.write_text("Why?\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"from its extension; pass format= one of beir, squad, jsonl, csv"):
        detect_format(odd)


def test_unknown_format_lists_the_choices(beir_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown question-set format 'trec'.*auto, beir, squad, jsonl, csv"):
        load_question_set(beir_dir, format="trec")


def test_missing_files_name_the_expected_path(tmp_path: Path, beir_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"question set not found: .*nowhere\.jsonl"):
        load_question_set(tmp_path / "nowhere.jsonl")
    (beir_dir / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"expected file not found: .*tiny/queries\.jsonl"):
        load_question_set(beir_dir)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"expected file not found: .*empty/questions\.jsonl"):
        load_question_set(empty, format="squad")


def test_split_other_than_test_is_rejected_for_formats_without_splits(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", SQUAD_ROWS)
    with pytest.raises(ConfigError, match="split 'train' applies only to beir"):
        load_question_set(path, split="train")
