"""The jsonl and csv readers: doc ids, answer alternatives and multi-part answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import load_question_set
from tests.questions.conftest import write_jsonl

pytestmark = pytest.mark.unit


def test_plain_jsonl_doc_ids_answers_and_default_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "plain.jsonl",
        [
            {"id": "x", "question": "Q one?", "relevant_doc_ids": ["d1", "d2"]},
            {"question": "Q two?", "answer": "Masks"},
            {"question": "Q three?", "relevant_doc_ids": {"d1": 3, "d2": 1}, "answer": "Bats"},
            {"question": "Q four?", "answer": ["Bats", " ", "bats"]},
        ],
    )
    question_set = load_question_set(path)

    assert question_set.format == "jsonl"
    assert [q.id for q in question_set.questions] == ["x", "2", "3", "4"]
    one, two, three, four = question_set.questions
    assert one.relevant_docs == {"d1": 1.0, "d2": 1.0} and one.answers == []
    assert two.relevant_docs == {} and two.answers == ["Masks"]
    assert three.relevant_docs == {"d1": 3.0, "d2": 1.0} and three.answers == ["Bats"]
    assert four.answers == ["Bats", "bats"] and four.answer_parts == []  # alternatives of one part


def test_plain_jsonl_answer_parts_give_one_part_per_item(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "parts.jsonl",
        [{"id": "v", "question": "Which two vaccines?", "relevant_doc_ids": ["d1"],
          "answer_parts": [" Pfizer ", ["Moderna", "mRNA-1273"]]}],
    )
    (question,) = load_question_set(path).questions

    assert question.answer_parts == [["Pfizer"], ["Moderna", "mRNA-1273"]]
    assert question.answers == ["Pfizer", "Moderna", "mRNA-1273"]
    assert question.span_groups() == [[], []]  # two parts, not resolved against a corpus yet


def test_csv_semicolon_doc_ids_and_answers(tmp_path: Path) -> None:
    path = tmp_path / "questions.csv"
    path.write_text(
        "question,relevant_doc_ids,answer\n"
        "Which animals?,d1; d3,Bats\n"
        '"Multi-line,\nquestion?",d2,\n'
        "Answer only?,,Soap\n",
        encoding="utf-8",
    )
    question_set = load_question_set(path)

    assert question_set.format == "csv"
    assert [q.id for q in question_set.questions] == ["1", "2", "3"]
    first, second, third = question_set.questions
    assert first.relevant_docs == {"d1": 1.0, "d3": 1.0} and first.answers == ["Bats"]
    assert second.text == "Multi-line,\nquestion?" and second.answers == []
    assert third.relevant_docs == {} and third.answers == ["Soap"]


def test_csv_answer_parts_are_separated_by_double_bars(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("id,question,relevant_doc_ids,answer_parts\nv,Which two?,d1,Pfizer || Moderna\n", encoding="utf-8")
    (question,) = load_question_set(path).questions
    assert question.answer_parts == [["Pfizer"], ["Moderna"]]
    assert question.answers == ["Pfizer", "Moderna"]


def test_answer_and_answer_parts_together_name_the_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "both.jsonl",
        [{"question": "Fine?", "answer": "yes"},
         {"question": "Which?", "answer": "Pfizer", "answer_parts": ["Pfizer", "Moderna"]}],
    )
    with pytest.raises(ConfigError, match=r"both\.jsonl, line 2: give either answer or answer_parts, not both"):
        load_question_set(path)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("blank.jsonl", '{"id": "v", "question": "Which?", "answer_parts": ["Pfizer", []]}\n'),
        ("blank.csv", "id,question,answer_parts\nv,Which?,Pfizer ||\n"),
    ],
)
def test_an_empty_answer_part_names_the_line_and_question(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    line = 1 if name.endswith(".jsonl") else 2
    with pytest.raises(ConfigError, match=rf"{name}, line {line}: .*question v: every answer part needs"):
        load_question_set(path)


def test_csv_row_without_ground_truth_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,question,relevant_doc_ids\na,"two\nlines",d1\nb,No truth,\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"q\.csv, line 4: .*relevant documents or an answer"):
        load_question_set(path)


def test_csv_without_required_columns_lists_what_it_found(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("query,docs\nhello,d1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"needs a 'question' column.*found columns: docs, query"):
        load_question_set(path)
