"""The beir reader: graded qrels, splits, and errors that name the qrels line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import load_dataset_corpus, load_question_set, validate_against_corpus
from tests.conftest import require_shared_dataset

pytestmark = pytest.mark.unit


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


def test_beir_questions_have_no_answer_parts_and_cluster_on_their_best_document(beir_dir: Path) -> None:
    by_id = load_question_set(beir_dir).by_id()
    assert by_id["q1"].span_groups() == []
    assert by_id["q1"].source_document == "d1"  # graded 2 over d3's 1


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


def test_beir_row_without_three_fields_names_the_line(beir_dir: Path) -> None:
    (beir_dir / "qrels" / "test.tsv").write_text("q1\td1\t1\nq2 d2 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"test\.tsv, line 2: expected query-id, corpus-id, score"):
        load_question_set(beir_dir)


def test_shared_scifact_test_split() -> None:
    folder = require_shared_dataset("scifact") / "beir"
    question_set = load_question_set(folder)
    assert question_set.format == "beir" and question_set.name == "scifact"
    assert len(question_set.questions) == 300
    assert question_set.count_judgements() == 339
    documents = {d.id_: d for d in load_dataset_corpus(folder)}
    assert len(documents) == 5183
    assert validate_against_corpus(question_set, documents) == []
