"""A dataset's own corpus: corpus.jsonl beside the questions, or a SQuAD file's contexts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.questions import load_dataset_corpus
from tests.questions.conftest import SQUAD_ROWS, write_jsonl

pytestmark = pytest.mark.unit


def test_dataset_corpus_keeps_title_as_metadata_only(beir_dir: Path, tmp_path: Path) -> None:
    documents = load_dataset_corpus(beir_dir)
    assert [d.id_ for d in documents] == ["d1", "d2", "d3"]
    assert documents[0].text == "Bats host many coronaviruses."
    assert documents[0].metadata["title"] == "Bats"
    assert documents[0].metadata["doc_id"] == "d1"
    assert "title" not in documents[1].metadata  # empty title is not stored
    assert load_dataset_corpus(write_jsonl(tmp_path / "alone" / "q.jsonl", SQUAD_ROWS)) is None


def test_duplicate_document_id_in_corpus_names_the_line(tmp_path: Path) -> None:
    folder = tmp_path / "dup"
    write_jsonl(folder / "corpus.jsonl", [{"_id": "d1", "text": "One."}, {"_id": "d1", "text": "Two."}])
    with pytest.raises(ConfigError, match=r"corpus\.jsonl, line 2: duplicate document id 'd1'"):
        load_dataset_corpus(folder)


def test_squad_doc_id_used_for_two_contexts_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "squad.json"
    paragraphs = [{"id": "p", "context": "First.", "qas": []}, {"id": "p", "context": "Second.", "qas": []}]
    path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"paragraphs\[1\]: doc id 'p' is used for two different contexts"):
        load_dataset_corpus(path)
