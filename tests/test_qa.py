"""Question sets: every format parsed into the same ground truth, errors that name the line."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from ragkit.corpus.model import make_document
from ragkit.qa import (
    AnswerSpan,
    Question,
    QuestionSet,
    load_dataset_corpus,
    load_question_set,
    resolve_answer_spans,
    validate_against_corpus,
)
from ragkit.registry import ConfigError
from tests.conftest import SAMPLE_DATASET, require_shared_dataset

pytestmark = pytest.mark.unit


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Bats", "text": "Bats host many coronaviruses."},
            {"_id": "d2", "title": "", "text": "Masks reduce spread."},
            {"_id": "d3", "title": "Soap", "text": "Soap breaks lipid envelopes."},
        ],
    )
    write_jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "q1", "text": "Which animals host coronaviruses?", "metadata": {}},
            {"_id": "q2", "text": "Do masks work?", "metadata": {}},
            {"_id": "q3", "text": "Only judged not relevant", "metadata": {}},
            {"_id": "q4", "text": "A training query", "metadata": {}},
        ],
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        "q2\td2\t1\n"
        "q1\td1\t2\n"
        "q1\td3\t1\n"
        "q1\td2\t0\n"
        "q3\td1\t0\n",
        encoding="utf-8",
    )
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq4\td3\t1\n", encoding="utf-8")
    return folder


SQUAD_ROWS = [
    {"id": "s1", "question": "What do bats host?", "answer": "coronaviruses", "doc_id": "d1",
     "answer_start": 15, "answer_end": 28},
    {"id": "s2", "question": "What reduces spread?", "answer": "Masks", "doc_id": "d2", "answer_start": 0},
]


def test_beir_keeps_graded_scores_drops_zero_rows_and_follows_qrels_order(beir_dir: Path) -> None:
    question_set = load_question_set(beir_dir, format="beir")

    assert question_set.format == "beir"
    assert question_set.name == "tiny"
    assert [q.id for q in question_set.questions] == ["q2", "q1"]
    by_id = question_set.by_id()
    assert by_id["q1"].text == "Which animals host coronaviruses?"
    assert by_id["q1"].relevant_docs == {"d1": 2.0, "d3": 1.0}
    assert isinstance(by_id["q1"].relevant_docs["d1"], float)
    assert by_id["q2"].relevant_docs == {"d2": 1.0}
    assert "q3" not in by_id  # judged, but only with score 0
    assert question_set.count_judgements() == 3
    assert question_set.count_spans() == 0


def test_beir_split_selects_the_qrels_file(beir_dir: Path) -> None:
    train = load_question_set(beir_dir, split="train")
    assert [(q.id, q.relevant_docs) for q in train.questions] == [("q4", {"d3": 1.0})]

    with pytest.raises(ConfigError, match=r"split 'dev' not found.*dev\.tsv.*available splits: test, train"):
        load_question_set(beir_dir, split="dev")


def test_beir_query_missing_from_queries_names_the_qrels_line(beir_dir: Path) -> None:
    with open(beir_dir / "qrels" / "test.tsv", "a", encoding="utf-8") as handle:
        handle.write("q9\td1\t1\n")
    with pytest.raises(ConfigError, match=r"test\.tsv, line 7: query 'q9' is not in .*queries\.jsonl"):
        load_question_set(beir_dir)


def test_beir_bad_score_names_the_line(beir_dir: Path) -> None:
    (beir_dir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"test\.tsv, line 2: score 'high' is not a number"):
        load_question_set(beir_dir)


def test_squad_jsonl_gives_doc_span_and_answer(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", SQUAD_ROWS)
    question_set = load_question_set(path)

    assert question_set.format == "squad"
    first, second = question_set.questions
    assert first == Question(
        id="s1",
        text="What do bats host?",
        relevant_docs={"d1": 1.0},
        spans=[AnswerSpan(doc_id="d1", start=15, end=28)],
        answers=["coronaviruses"],
    )
    assert second.spans == [AnswerSpan(doc_id="d2", start=0, end=5)]  # answer_end defaults to start + len


def test_official_squad_json_doc_id_rule_and_offset_alignment(tmp_path: Path) -> None:
    data = {
        "data": [
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
        ]
    }
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")

    question_set = load_question_set(path)

    assert question_set.format == "squad"
    assert [q.id for q in question_set.questions] == ["a", "b", "d"]  # the unanswerable one is skipped
    a, b, d = question_set.questions
    assert a.spans == [AnswerSpan(doc_id="630", start=12, end=31)]  # annotated 11, moved onto the answer
    assert b.relevant_docs == {"Bats": 1.0}  # single-paragraph article: its title
    assert b.spans == [AnswerSpan(doc_id="Bats", start=0, end=4)] and b.answers == ["Bats"]
    assert d.relevant_docs == {"Soap#1": 1.0}  # several paragraphs: title#index

    documents = {doc.id_: doc for doc in load_dataset_corpus(path)}
    assert sorted(documents) == ["630", "Bats", "Soap#0", "Soap#1"]
    assert validate_against_corpus(question_set, documents) == []


def test_plain_jsonl_doc_ids_answers_and_default_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "plain.jsonl",
        [
            {"id": "x", "question": "Q one?", "relevant_doc_ids": ["d1", "d2"]},
            {"question": "Q two?", "answer": "Masks"},
            {"question": "Q three?", "relevant_doc_ids": {"d1": 3, "d2": 1}, "answer": "Bats"},
        ],
    )
    question_set = load_question_set(path)

    assert question_set.format == "jsonl"
    assert [q.id for q in question_set.questions] == ["x", "2", "3"]
    one, two, three = question_set.questions
    assert one.relevant_docs == {"d1": 1.0, "d2": 1.0} and one.answers == []
    assert two.relevant_docs == {} and two.answers == ["Masks"]
    assert three.relevant_docs == {"d1": 3.0, "d2": 1.0} and three.answers == ["Bats"]


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


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(SQUAD_ROWS[0]) + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"qa\.jsonl, line 3: invalid JSON"):
        load_question_set(path)


def test_squad_row_missing_field_names_the_field_and_line(tmp_path: Path) -> None:
    bad = {key: value for key, value in SQUAD_ROWS[1].items() if key != "doc_id"}
    path = write_jsonl(tmp_path / "qa.jsonl", [SQUAD_ROWS[0], bad])
    with pytest.raises(ConfigError, match=r"qa\.jsonl, line 2: doc_id: Field required"):
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


def test_models_reject_inconsistent_ground_truth() -> None:
    with pytest.raises(ValidationError, match="end must be > start"):
        AnswerSpan(doc_id="d", start=5, end=5)
    with pytest.raises(ValidationError):
        AnswerSpan(doc_id="d", start=-1, end=3)
    with pytest.raises(ValidationError, match="relevant documents or an answer"):
        Question(id="q", text="Why?")
    with pytest.raises(ValidationError, match="not among relevant_docs"):
        Question(id="q", text="Why?", answers=["x"], spans=[AnswerSpan(doc_id="d", start=0, end=1)])
    with pytest.raises(ValidationError, match="duplicate question ids"):
        QuestionSet(name="n", format="jsonl", questions=[Question(id="q", text="Why?", answers=["x"])] * 2)


def test_dataset_corpus_keeps_title_as_metadata_only(beir_dir: Path, tmp_path: Path) -> None:
    documents = load_dataset_corpus(beir_dir)
    assert [d.id_ for d in documents] == ["d1", "d2", "d3"]
    assert documents[0].text == "Bats host many coronaviruses."
    assert documents[0].metadata["title"] == "Bats"
    assert documents[0].metadata["doc_id"] == "d1"
    assert "title" not in documents[1].metadata  # empty title is not stored
    assert load_dataset_corpus(write_jsonl(tmp_path / "alone" / "q.jsonl", SQUAD_ROWS)) is None


def test_resolve_answer_spans_finds_exact_then_case_insensitive_offsets(caplog: pytest.LogCaptureFixture) -> None:
    documents = {
        "d1": make_document("d1", "Bats host many coronaviruses. Bats fly."),
        "d2": make_document("d2", "MASKS reduce spread."),
    }
    question_set = QuestionSet(
        name="n",
        format="jsonl",
        questions=[
            Question(id="exact", text="Who hosts?", relevant_docs={"d1": 1}, answers=["Bats"]),
            Question(id="case", text="What helps?", relevant_docs={"d2": 1}, answers=["masks"]),
            Question(id="missing", text="Where?", relevant_docs={"d1": 1, "d9": 1}, answers=["Wuhan"]),
            Question(id="docs_only", text="Which?", relevant_docs={"d1": 1}),
            Question(
                id="has_span", text="Kept?", relevant_docs={"d1": 1}, answers=["fly"],
                spans=[AnswerSpan(doc_id="d1", start=35, end=38)],
            ),
        ],
    )

    with caplog.at_level(logging.WARNING, logger="ragkit.qa"):
        resolved = resolve_answer_spans(question_set, documents)

    by_id = resolved.by_id()
    assert by_id["exact"].spans == [AnswerSpan(doc_id="d1", start=0, end=4)]
    assert by_id["case"].spans == [AnswerSpan(doc_id="d2", start=0, end=5)]
    assert by_id["missing"].spans == [] and by_id["docs_only"].spans == []
    assert by_id["has_span"].spans == [AnswerSpan(doc_id="d1", start=35, end=38)]
    assert resolved.ids_without_spans() == ["missing"]
    assert "no answer span found for 1 questions" in caplog.text
    assert question_set.ids_without_spans() == ["exact", "case", "missing"]
    assert validate_against_corpus(resolved, documents) == [
        "question missing: relevant document 'd9' is not in the corpus"
    ]


def test_validate_against_corpus_reports_each_problem() -> None:
    documents = {"d1": make_document("d1", "Bats host viruses.")}
    question_set = QuestionSet(
        name="n",
        format="squad",
        questions=[
            Question(id="ok", text="Who?", relevant_docs={"d1": 1}, answers=["Bats"],
                     spans=[AnswerSpan(doc_id="d1", start=0, end=4)]),
            Question(id="far", text="Who?", relevant_docs={"d1": 1}, spans=[AnswerSpan(doc_id="d1", start=10, end=99)]),
            Question(id="off", text="Who?", relevant_docs={"d1": 1}, answers=["Bats"],
                     spans=[AnswerSpan(doc_id="d1", start=1, end=5)]),
            Question(id="gone", text="Who?", relevant_docs={"d7": 1}),
        ],
    )
    assert validate_against_corpus(question_set, documents) == [
        "question far: span [10, 99) is outside document 'd1' (18 chars)",
        "question off: span [1, 5) in 'd1' reads 'ats ', not the answer 'Bats'",
        "question gone: relevant document 'd7' is not in the corpus",
    ]


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


def test_shared_scifact_test_split() -> None:
    folder = require_shared_dataset("scifact") / "beir"
    question_set = load_question_set(folder)
    assert question_set.format == "beir" and question_set.name == "scifact"
    assert len(question_set.questions) == 300
    assert question_set.count_judgements() == 339
    documents = {d.id_: d for d in load_dataset_corpus(folder)}
    assert len(documents) == 5183
    assert validate_against_corpus(question_set, documents) == []


def test_shared_covidqa() -> None:
    folder = require_shared_dataset("covidqa")
    question_set = load_question_set(folder)
    assert question_set.format == "squad"
    assert len(question_set.questions) == 1380
    documents = {d.id_: d for d in load_dataset_corpus(folder)}
    assert len(documents) == 98
    assert validate_against_corpus(question_set, documents) == []
