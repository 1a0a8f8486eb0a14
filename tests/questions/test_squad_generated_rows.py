"""The squad JSONL reader on what generated sets add: type, answer_parts, answerable: false."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import load_question_set
from tests.questions.conftest import write_jsonl

pytestmark = pytest.mark.unit

ROWS = [
    {"id": "m", "question": "Which two?", "doc_id": "d1", "answer": "bats", "answer_start": 0, "answer_end": 4,
     "type": "multi_hop", "generation": {"anything": 1},
     "answer_parts": [{"doc_id": "d1", "answer": "bats", "answer_start": 0, "answer_end": 4},
                      {"doc_id": "d2", "answer": "masks", "answer_start": 3}]},
    {"id": "u", "question": "Who?", "doc_id": "d2", "answer": None, "answer_start": None, "answerable": False,
     "type": "unanswerable"},
    {"id": "n", "question": "Who else?", "doc_id": None, "answer": None, "answer_start": None, "answerable": False},
]


def test_generated_rows_read_as_parts_and_unanswerable_questions(tmp_path: Path):
    questions = load_question_set(write_jsonl(tmp_path / "g.jsonl", ROWS)).by_id()
    hop = questions["m"]
    assert hop.question_type == "multi_hop" and hop.answer_parts == [["bats"], ["masks"]]
    assert [(s.doc_id, s.start, s.end, s.group) for s in hop.spans] == [("d1", 0, 4, 0), ("d2", 3, 8, 1)]
    assert hop.relevant_docs == {"d1": 1.0, "d2": 1.0}
    lost = questions["u"]
    assert not lost.answerable and lost.relevant_docs == {} and lost.source_document == "d2"
    assert questions["n"].source_document is None


def test_an_answerable_row_without_an_answer_is_an_error(tmp_path: Path):
    bad = {"id": "x", "question": "What?", "doc_id": "d1", "answer": None, "answer_start": None}
    with pytest.raises(ConfigError, match=r"line 2: an answerable row needs doc_id, answer and answer_start"):
        load_question_set(write_jsonl(tmp_path / "g.jsonl", [ROWS[0], bad]))


def test_existing_keys_do_not_change_with_the_new_fields():
    from ragkit.questions import Question

    plain = Question(id="q", text="t", relevant_docs={"d": 1.0})
    assert "question_type" not in plain.key_dump() and "source_doc" not in plain.key_dump()
    typed = plain.model_copy(update={"question_type": "factoid"})
    assert typed.content_key() != plain.content_key()
