"""The squad reader: COVID-QA JSONL and official SQuAD JSON, every answer one group of alternatives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import AnswerSpan, Question, load_dataset_corpus, load_question_set, validate_against_corpus
from tests.conftest import SAMPLE_DATASET, require_shared_dataset
from tests.questions.conftest import SQUAD_ROWS, write_jsonl

pytestmark = pytest.mark.unit


def write_squad_json(path: Path, articles: list[dict]) -> Path:
    path.write_text(json.dumps({"data": articles}), encoding="utf-8")
    return path


def test_squad_jsonl_gives_doc_span_and_answer(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", SQUAD_ROWS)
    question_set = load_question_set(path)

    assert question_set.format == "squad"
    first, second = question_set.questions
    assert first == Question(
        id="s1",
        text="What do bats host?",
        relevant_docs={"d1": 1.0},
        spans=[AnswerSpan(doc_id="d1", start=15, end=28, group=0)],
        answers=["coronaviruses"],
    )
    assert second.spans == [AnswerSpan(doc_id="d2", start=0, end=5)]  # answer_end defaults to start + len
    assert first.span_groups() == [[AnswerSpan(doc_id="d1", start=15, end=28)]]
    assert first.source_document == "d1"


def test_official_squad_json_doc_id_rule_and_offset_alignment(tmp_path: Path) -> None:
    path = write_squad_json(
        tmp_path / "squad.json",
        [
            {"title": "Covid", "paragraphs": [
                {"document_id": 630, "context": "Masks work. Masks reduce spread.",
                 "qas": [{"id": "a", "question": "What reduces spread?",
                          "answers": [{"text": "Masks reduce spread", "answer_start": 11}]}]},
            ]},
            {"title": "Bats", "paragraphs": [
                {"context": "Bats host viruses.",
                 "qas": [{"id": "b", "question": "Who hosts viruses?",
                          "answers": [{"text": "Bats", "answer_start": 0}, {"text": "Bats", "answer_start": 0}]},
                         {"id": "c", "question": "Unanswerable?", "answers": [], "is_impossible": True}]},
            ]},
            {"title": "Soap", "paragraphs": [
                {"context": "Wash hands.", "qas": []},
                {"context": "Soap breaks envelopes.",
                 "qas": [{"id": "d", "question": "What breaks envelopes?",
                          "answers": [{"text": "Soap", "answer_start": 0}]}]},
            ]},
        ],
    )

    question_set = load_question_set(path)

    assert question_set.format == "squad"
    assert [q.id for q in question_set.questions] == ["a", "b", "d"]  # the unanswerable one is skipped
    a, b, d = question_set.questions
    assert a.spans == [AnswerSpan(doc_id="630", start=12, end=31)]  # annotated 11, moved onto the answer
    assert b.relevant_docs == {"Bats": 1.0}  # single-paragraph article: its title
    assert b.spans == [AnswerSpan(doc_id="Bats", start=0, end=4)] and b.answers == ["Bats"]  # identical kept once
    assert d.relevant_docs == {"Soap#1": 1.0}  # several paragraphs: title#index

    documents = {doc.id_: doc for doc in load_dataset_corpus(path)}
    assert sorted(documents) == ["630", "Bats", "Soap#0", "Soap#1"]
    assert validate_against_corpus(question_set, documents) == []


def test_official_squad_answer_variants_are_one_group_of_alternatives(tmp_path: Path) -> None:
    path = write_squad_json(
        tmp_path / "squad.json",
        [{"title": "Vaccines", "paragraphs": [
            {"context": "The Pfizer vaccine was first.",
             "qas": [{"id": "v", "question": "Which vaccine was first?",
                      "answers": [{"text": "Pfizer vaccine", "answer_start": 4},
                                  {"text": "The Pfizer vaccine", "answer_start": 0}]}]},
        ]}],
    )

    (question,) = load_question_set(path).questions

    overlapping = [AnswerSpan(doc_id="Vaccines", start=4, end=18), AnswerSpan(doc_id="Vaccines", start=0, end=18)]
    assert question.span_groups() == [overlapping]
    assert question.answers == ["Pfizer vaccine", "The Pfizer vaccine"]
    documents = {doc.id_: doc for doc in load_dataset_corpus(path)}
    assert validate_against_corpus(load_question_set(path), documents) == []  # each reads as one alternative


def test_official_squad_json_without_data_list_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"version": "2.0"}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json: expected SQuAD JSON of the form"):
        load_question_set(path)


def test_squad_row_missing_field_names_the_field_and_line(tmp_path: Path) -> None:
    bad = {key: value for key, value in SQUAD_ROWS[1].items() if key != "doc_id"}
    path = write_jsonl(tmp_path / "qa.jsonl", [SQUAD_ROWS[0], bad])
    with pytest.raises(ConfigError, match=r"qa\.jsonl, line 2: doc_id: Field required"):
        load_question_set(path)


def sample_readme_count(label: str) -> int:
    text = (SAMPLE_DATASET / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^\| {label} \| ([\d,]+)", text, re.MULTILINE)
    assert match, f"no '{label}' row in the sample README"
    return int(match.group(1).replace(",", ""))


def test_bundled_sample_matches_its_readme_and_every_span_reads_as_its_answer() -> None:
    question_set = load_question_set(SAMPLE_DATASET)
    documents = load_dataset_corpus(SAMPLE_DATASET)
    by_id = {d.id_: d for d in documents}

    assert question_set.format == "squad" and question_set.name == "covidqa_sample"
    assert len(documents) == sample_readme_count("documents")
    assert len(question_set.questions) == sample_readme_count("questions")
    assert question_set.count_judgements() == sample_readme_count("judgements")
    assert question_set.count_spans() == sample_readme_count("answer spans")
    for question in question_set.questions:
        (span,) = question.spans
        assert by_id[span.doc_id].text[span.start : span.end] == question.answers[0]
    assert validate_against_corpus(question_set, by_id) == []
    for doc_id in re.findall(r"^\| (\d+) \| [\d,]+ \| \d+ \|", (SAMPLE_DATASET / "README.md").read_text(), re.M):
        assert doc_id in by_id


def test_bundled_sample_loads_as_beir_with_the_same_judgements() -> None:
    as_squad = load_question_set(SAMPLE_DATASET)
    as_beir = load_question_set(SAMPLE_DATASET, format="beir")
    assert [(q.id, q.text, q.relevant_docs) for q in as_beir.questions] == [
        (q.id, q.text, q.relevant_docs) for q in as_squad.questions
    ]


def test_shared_covidqa() -> None:
    folder = require_shared_dataset("covidqa")
    question_set = load_question_set(folder)
    assert question_set.format == "squad"
    assert len(question_set.questions) == 1380
    documents = {d.id_: d for d in load_dataset_corpus(folder)}
    assert len(documents) == 98
    assert validate_against_corpus(question_set, documents) == []
