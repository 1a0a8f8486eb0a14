"""Follow-up questions, routes and unanswerable questions: the model, the readers, the content key
(unchanged for question sets that do not use them) and the bundled multi-turn sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragkit.errors import ConfigError
from ragkit.questions import Question, QuestionSet, Turn, load_dataset_corpus, load_question_set, resolve_answer_spans
from tests.questions.conftest import write_jsonl

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "multiturn_sample"


def test_the_content_key_of_a_set_without_the_new_fields_is_the_one_before_them():
    # Pinned from the code before follow-ups existed (the key every cached run of this set uses).
    questions = QuestionSet(name="pin", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0}, answers=["when content"]),
        Question(id="q2", text="when do dogs bark", relevant_docs={"d2": 1.0})])
    assert questions.content_key() == "017bab3adc94f648"
    with_history = QuestionSet(name="pin", format="jsonl", questions=[
        questions.questions[0].model_copy(update={"history": [Turn(role="user", content="hi")]}),
        questions.questions[1]])
    assert with_history.content_key() != questions.content_key()


def test_an_unanswerable_question_needs_no_ground_truth_and_an_answerable_one_does():
    assert Question(id="u", text="who won the cup?", answerable=False, expected_route="web").answerable is False
    with pytest.raises(ValidationError, match="relevant documents or an answer"):
        Question(id="a", text="who won the cup?")
    with pytest.raises(ValidationError, match="expected_route"):
        Question(id="u", text="hi", answerable=False, expected_route="chat")
    with pytest.raises(ValidationError, match="blank"):
        Turn(role="user", content="  ")


def test_jsonl_reads_history_as_objects_or_alternating_strings(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"id": "a", "question": "And its size?", "answer": "31 kb",
         "history": [{"role": "user", "content": "Bovine coronavirus?"}, {"role": "assistant", "content": "Yes."}]},
        {"id": "b", "question": "And its size?", "answer": "31 kb", "history": ["Bovine coronavirus?", "Yes."],
         "expected_route": "documents"},
        {"id": "c", "question": "hello!", "answerable": False, "expected_route": "conversational"},
    ])
    a, b, c = load_question_set(path).questions
    assert a.history == b.history == [Turn(role="user", content="Bovine coronavirus?"),
                                      Turn(role="assistant", content="Yes.")]
    assert (b.expected_route, c.expected_route, c.answerable, a.answerable) == (
        "documents", "conversational", False, True)


def test_csv_reads_history_as_json_and_answerable_as_a_boolean(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('id,question,answer,history,answerable,expected_route\n'
                    'a,And its size?,31 kb,"[""Bovine coronavirus?"", ""Yes.""]",,\n'
                    'b,hello!,,,false,conversational\n', encoding="utf-8")
    a, b = load_question_set(path).questions
    assert [t.role for t in a.history] == ["user", "assistant"] and b.answerable is False


@pytest.mark.parametrize(("row", "message"), [
    ({"question": "q", "answer": "x", "history": "[not json"}, "line 1.*'history' is not valid JSON"),
    ({"question": "q", "answer": "x", "history": [{"role": "bot", "content": "x"}]}, "line 1.*history"),
    ({"question": "q", "answer": "x", "expected_route": "chat"}, "line 1.*expected_route"),
])
def test_bad_values_name_the_line_and_field(tmp_path, row, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    with pytest.raises(ConfigError, match=message):
        load_question_set(path)


def test_the_bundled_multi_turn_sample_loads_with_exact_spans():
    questions = load_question_set(SAMPLE)
    documents = {doc.id_: doc for doc in load_dataset_corpus(SAMPLE)}
    resolved = resolve_answer_spans(questions, documents).questions
    assert len(resolved) == 12 and len(documents) == 3
    answerable = [q for q in resolved if q.answerable]
    assert len(answerable) == 7 and sum(bool(q.history) for q in answerable) == 5
    for question in answerable:
        (span,) = question.spans
        assert documents[span.doc_id].text[span.start:span.end] == question.answers[0]
    routes = [q.expected_route for q in resolved if not q.answerable]
    assert sorted(routes) == ["conversational", "conversational", "documents", "web", "web"]
    licence = (SAMPLE / "LICENSE").read_text(encoding="utf-8")
    assert "Apache" in licence and "Provenance" in (SAMPLE / "README.md").read_text(encoding="utf-8")
    assert all(json.loads(line)["_id"] in documents for line in (SAMPLE / "corpus.jsonl").read_text().splitlines())
